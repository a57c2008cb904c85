package live

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// proxy is the fault proxy of one directed link, in the shape of etcd's
// pkg/proxy: it listens on a loopback port, forwards every connection it
// accepts to the real listener, and applies its faults per direction: Tx
// is the bytes from the dialer (the link's from→to direction), Rx the
// bytes back.
//
// A TCP stream cannot lose or reorder bytes the way the simulator's
// network loses messages, so the faults map as follows:
//   - blackhole (partition, isolation, one-way block): the direction stops
//     forwarding and drops what it reads, as the simulated network drops
//     messages; every connection that dropped bytes is reset when the
//     direction reopens, so no later byte lands after a gap (the peers
//     reconnect, as they do after any cut connection);
//   - delay: each chunk is held for a latency drawn up to the maximum
//     around the mean, in order;
//   - loss: a chunk is "lost" with the probability, which on TCP is a
//     retransmission: it arrives an RTO (200 ms) late;
//   - reset: every open connection is closed at once.
//
// Duplication and reordering do not exist on one TCP stream: those fault
// kinds are printed as skipped.
type proxy struct {
	from, to string
	target   string
	ln       net.Listener

	mu    sync.Mutex
	tx    dirState
	rx    dirState
	conns map[*pconn]struct{}
	rng   *rand.Rand
	wg    sync.WaitGroup
	done  bool
	// hushed: both directions drop what they read, apart from (and
	// without changing) the faults in force; see linkSet.hush.
	hushed bool
}

// dirState is one direction's faults.
type dirState struct {
	blackhole        bool
	delayMean, delay time.Duration // delay: the maximum
	loss             float64
}

type pconn struct {
	in, out net.Conn
	cutTx   bool // dropped bytes from→to: reset at heal
	cutRx   bool
}

func newProxy(from, to, target string, seed uint64) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("live: proxy %s→%s: %w", from, to, err)
	}
	p := &proxy{from: from, to: to, target: target, ln: ln, conns: map[*pconn]struct{}{},
		rng: rand.New(rand.NewPCG(seed, 0x70726f7879))}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			in.Close() // the real listener is down (a crashed server): refused, as without a proxy
			continue
		}
		c := &pconn{in: in, out: out}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, in, out, true)
		go p.pipe(c, out, in, false)
	}
}

// pipe copies one direction of c, applying that direction's faults.
func (p *proxy) pipe(c *pconn, src, dst net.Conn, tx bool) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	var due time.Time // in-order delivery: never before the previous chunk
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			st := p.rx
			if tx {
				st = p.tx
			}
			var hold time.Duration
			st.blackhole = st.blackhole || p.hushed
			if st.blackhole {
				if tx {
					c.cutTx = true
				} else {
					c.cutRx = true
				}
			} else {
				hold = p.drawDelay(st)
			}
			p.mu.Unlock()
			if st.blackhole {
				continue
			}
			if hold > 0 {
				due = later(due, time.Now().Add(hold))
				time.Sleep(time.Until(due))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// drawDelay draws the hold of one chunk; p.mu is held.
func (p *proxy) drawDelay(st dirState) time.Duration {
	var d time.Duration
	if st.delay > 0 {
		// Exponential around the mean, capped at the maximum, as the
		// simulator's latency; rand/v2's ExpFloat64 suffices here (the
		// real world's timing is not reproduced anyway).
		d = min(time.Duration(p.rng.ExpFloat64()*float64(st.delayMean)), st.delay)
	}
	if st.loss > 0 && p.rng.Float64() < st.loss {
		d += 200 * time.Millisecond
	}
	return d
}

// set changes the faults of one or both directions; reopening a
// direction resets the connections that dropped bytes on it.
func (p *proxy) set(tx, rx bool, f func(*dirState)) {
	p.mu.Lock()
	var cut []*pconn
	for _, d := range []struct {
		on bool
		st *dirState
		tx bool
	}{{tx, &p.tx, true}, {rx, &p.rx, false}} {
		if !d.on {
			continue
		}
		was := d.st.blackhole
		f(d.st)
		if was && !d.st.blackhole {
			for c := range p.conns {
				if d.tx && c.cutTx || !d.tx && c.cutRx {
					cut = append(cut, c)
				}
			}
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.in.Close()
		c.out.Close()
	}
}

// hush sets hushed; lifting it resets the connections that dropped bytes
// on a direction that is open again, as reopening a blackholed direction
// does (so no later byte lands after a gap).
func (p *proxy) hush(on bool) {
	p.mu.Lock()
	p.hushed = on
	var cut []*pconn
	if !on {
		for c := range p.conns {
			if c.cutTx && !p.tx.blackhole || c.cutRx && !p.rx.blackhole {
				cut = append(cut, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.in.Close()
		c.out.Close()
	}
}

// reset closes every open connection.
func (p *proxy) reset() {
	p.mu.Lock()
	var all []*pconn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.in.Close()
		c.out.Close()
	}
}

// close stops the proxy and waits for its goroutines (bounded: every
// connection is closed first, so every copy returns).
func (p *proxy) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.ln.Close()
	p.reset()
	p.wg.Wait()
}
