package realrt

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/process"
)

// Codec turns the messages of a protocol into bytes and back. The runtime
// knows no protocol: the caller supplies the codec (package wire has the
// reference lock service's), so realrt imports nothing of lockservice.
type Codec interface {
	// AppendMessage appends m's encoding to b. It fails for a message type
	// the codec does not know.
	AppendMessage(b []byte, m process.Message) ([]byte, error)
	// DecodeMessage decodes one whole encoding. It must not panic on any
	// input, and must not keep b, which the transport reuses.
	DecodeMessage(b []byte) (process.Message, error)
}

// The wire format between two nodes. A connection carries messages one way
// only, from the node that dialled it: it opens with a hello (magic, format
// version, the sender's and the intended receiver's ids, big-endian), then
// carries frames, each a 4-byte big-endian payload length followed by the
// payload, a message as the Codec encodes it (its first byte names its type
// in package wire). A message longer than MaxFrame (a Raft snapshot of a
// large lock table) travels as a run of frames whose length has its top
// bit set (moreFrames: the message continues in the next frame), ended by
// one without it; the receiver joins their payloads, up to MaxMessage, and
// decodes the whole. Every message up to MaxFrame is one frame, as before
// continuations existed, so the hello's version did not change; a node
// from before them closes the connection on a continued frame (its length
// reads as over the limit), which drops that message and nothing else.
// The receiver never writes; it closes the connection on a bad hello, a
// frame or message over the size limits, or a payload that does not
// decode, since after any of those the stream cannot be trusted.
const (
	helloMagic   = "FSRT"
	helloVersion = 1
	helloLen     = len(helloMagic) + 1 + 8 + 8
	frameHeader  = 4
	moreFrames   = 1 << 31 // in a frame's length: the message continues in the next frame
)

// appendFrames appends the frames of payload to b: one frame if it fits
// in max bytes, else a run of continued frames of max bytes and a last one.
func appendFrames(b, payload []byte, max int) []byte {
	for len(payload) > max {
		b = binary.BigEndian.AppendUint32(b, uint32(max)|moreFrames)
		b = append(b, payload[:max]...)
		payload = payload[max:]
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func appendHello(b []byte, from, to process.NodeID) []byte {
	b = append(b, helloMagic...)
	b = append(b, helloVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(from))
	return binary.BigEndian.AppendUint64(b, uint64(to))
}

func parseHello(b []byte) (from, to process.NodeID, err error) {
	if string(b[:len(helloMagic)]) != helloMagic {
		return 0, 0, fmt.Errorf("realrt: not a fencesim peer (hello %q)", b[:len(helloMagic)])
	}
	if v := b[len(helloMagic)]; v != helloVersion {
		return 0, 0, fmt.Errorf("realrt: peer speaks wire version %d, this node %d", v, helloVersion)
	}
	b = b[len(helloMagic)+1:]
	return process.NodeID(binary.BigEndian.Uint64(b)), process.NodeID(binary.BigEndian.Uint64(b[8:])), nil
}

// TransportStats counts what a node's transport did, since it started.
type TransportStats struct {
	FramesSent     uint64 // frames written to a peer's connection
	FramesReceived uint64 // frames decoded and handed to the executor
	QueueDropped   uint64 // frames dropped from a full send queue (the oldest)
	WriteLost      uint64 // frames of batches whose write failed (the connection is redialled)
	InboxDropped   uint64 // messages dropped on a full executor inbox
	Unroutable     uint64 // messages to a node with no address
	BadPeers       uint64 // inbound connections closed for a bad hello or frame
	Dials          uint64 // connections opened to peers, reconnections included
}

// transport moves frames between nodes over TCP. Send only encodes and
// queues (the executor never waits on the network); one goroutine per peer
// dials, redials with backoff and writes; one goroutine per inbound
// connection reads, decodes and posts to the executor.
type transport struct {
	self    process.NodeID
	cfg     *Config
	log     *slog.Logger
	ln      net.Listener
	peers   map[process.NodeID]*peer
	deliver func(from process.NodeID, m process.Message) bool

	mu      sync.Mutex
	inbound map[net.Conn]struct{}
	closing bool

	quit    chan struct{}   // closed by stop: outbound goroutines end
	ctx     context.Context // cancelled by stop: dials in progress end
	cancel  context.CancelFunc
	readers sync.WaitGroup
	writers sync.WaitGroup

	sent, received, writeLost, unroutable, badPeers, dials atomic.Uint64
}

func newTransport(cfg *Config, ln net.Listener, log *slog.Logger, deliver func(process.NodeID, process.Message) bool) *transport {
	t := &transport{self: cfg.ID, cfg: cfg, log: log, ln: ln, deliver: deliver,
		peers: make(map[process.NodeID]*peer, len(cfg.Peers)), inbound: map[net.Conn]struct{}{}, quit: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	for id, addr := range cfg.Peers {
		if id == cfg.ID {
			continue // a node's messages to itself never touch the network
		}
		p := &peer{t: t, id: id, addr: addr, ring: make([][]byte, cfg.SendQueue), wake: make(chan struct{}, 1)}
		t.peers[id] = p
		t.writers.Add(1)
		go p.run()
	}
	t.readers.Add(1)
	go t.accept()
	return t
}

// send encodes m and queues it for to. It runs on the executor and never
// blocks on the network.
func (t *transport) send(to process.NodeID, m process.Message) {
	p := t.peers[to]
	if p == nil {
		t.unroutable.Add(1)
		t.log.Debug("realrt: message to a node with no address dropped", "to", to)
		return
	}
	b, err := t.cfg.Codec.AppendMessage(make([]byte, frameHeader, 64), m)
	if err != nil {
		// A message the codec cannot encode is a programming error in the
		// codec or the protocol; dropping it keeps the node up, and the
		// protocol treats it as a lost message.
		t.log.Error("realrt: message not encodable, dropped", "to", to, "type", fmt.Sprintf("%T", m), "err", err)
		return
	}
	switch size := len(b) - frameHeader; {
	case size > t.cfg.MaxMessage:
		t.log.Error("realrt: message larger than MaxMessage, dropped", "to", to, "bytes", size, "max", t.cfg.MaxMessage)
		return
	case size > t.cfg.MaxFrame:
		// Queued as one item, so that the queue drops all of its frames
		// or none.
		b = appendFrames(make([]byte, 0, size+(size/t.cfg.MaxFrame+1)*frameHeader), b[frameHeader:], t.cfg.MaxFrame)
	default:
		binary.BigEndian.PutUint32(b, uint32(size))
	}
	p.enqueue(b)
}

// stopInbound closes the listener and every inbound connection and waits
// for their readers: no message reaches the executor afterwards.
func (t *transport) stopInbound() {
	t.mu.Lock()
	t.closing = true
	for c := range t.inbound {
		c.Close()
	}
	t.mu.Unlock()
	t.ln.Close()
	t.readers.Wait()
}

// stopOutbound ends every peer's goroutine, closing its connection; frames
// still queued are discarded, as a stopped machine's socket buffers are.
func (t *transport) stopOutbound() {
	close(t.quit)
	t.cancel()
	for _, p := range t.peers {
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	}
	t.writers.Wait()
}

func (t *transport) accept() {
	defer t.readers.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			t.mu.Lock()
			closing := t.closing
			t.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (too many open files, an aborted
			// handshake): pause briefly rather than spin.
			t.log.Warn("realrt: accept failed", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.inbound[c] = struct{}{}
		t.readers.Add(1)
		t.mu.Unlock()
		go t.read(c)
	}
}

// read serves one inbound connection until it fails or the node stops.
func (t *transport) read(c net.Conn) {
	defer t.readers.Done()
	raw := c // the key in t.inbound; c may become its TLS layer
	defer func() {
		t.mu.Lock()
		delete(t.inbound, raw)
		t.mu.Unlock()
		c.Close()
	}()
	var certID process.NodeID = -1
	if t.cfg.TLS != nil {
		tc := tls.Server(c, t.cfg.TLS.Server)
		c = tc
		var err error
		if certID, err = t.handshake(tc); err != nil {
			t.badPeer(c, err)
			return
		}
	}
	r := bufio.NewReaderSize(c, 64<<10)
	from, err := t.readHello(c, r)
	if err != nil {
		t.badPeer(c, err)
		return
	}
	if certID >= 0 && from != certID {
		t.badPeer(c, fmt.Errorf("realrt: hello says node %d, its certificate names node %d", from, certID))
		return
	}
	var hdr [frameHeader]byte
	var buf []byte // the message so far: the payloads of its frames
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.log.Debug("realrt: inbound connection ended", "from", from, "err", err)
			}
			return
		}
		h := binary.BigEndian.Uint32(hdr[:])
		n, more := int(h&^moreFrames), h&moreFrames != 0
		if n > t.cfg.MaxFrame {
			t.badPeer(c, fmt.Errorf("realrt: frame of %d bytes from node %d exceeds MaxFrame %d", n, from, t.cfg.MaxFrame))
			return
		}
		if len(buf)+n > t.cfg.MaxMessage {
			t.badPeer(c, fmt.Errorf("realrt: message of more than %d bytes from node %d exceeds MaxMessage %d", len(buf)+n, from, t.cfg.MaxMessage))
			return
		}
		at := len(buf)
		buf = slices.Grow(buf, n)[:at+n]
		if _, err := io.ReadFull(r, buf[at:]); err != nil {
			t.log.Debug("realrt: inbound connection ended mid-frame", "from", from, "err", err)
			return
		}
		if more {
			continue
		}
		m, err := t.cfg.Codec.DecodeMessage(buf)
		if err != nil {
			t.badPeer(c, fmt.Errorf("realrt: undecodable frame from node %d: %w", from, err))
			return
		}
		t.received.Add(1)
		t.deliver(from, m)
		if cap(buf) > t.cfg.MaxFrame {
			buf = nil // a continued message's buffer: not kept for the life of the connection
		} else {
			buf = buf[:0]
		}
	}
}

// handshake runs an inbound TLS handshake within HandshakeTimeout and
// returns the peer its verified certificate names.
func (t *transport) handshake(c *tls.Conn) (process.NodeID, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		return -1, fmt.Errorf("realrt: TLS handshake: %w", err)
	}
	id, err := t.cfg.TLS.PeerID(c.ConnectionState())
	if err != nil {
		return -1, fmt.Errorf("realrt: peer certificate: %w", err)
	}
	if _, ok := t.peers[id]; !ok {
		return -1, fmt.Errorf("realrt: the peer certificate names node %d, which is not among this node's peers", id)
	}
	return id, nil
}

// readHello reads and checks the hello within the handshake timeout.
func (t *transport) readHello(c net.Conn, r *bufio.Reader) (process.NodeID, error) {
	var b [helloLen]byte
	c.SetReadDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("realrt: reading the hello: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	from, to, err := parseHello(b[:])
	if err != nil {
		return 0, err
	}
	if to != t.self {
		return 0, fmt.Errorf("realrt: connection meant for node %d reached node %d", to, t.self)
	}
	if _, ok := t.peers[from]; !ok {
		return 0, fmt.Errorf("realrt: hello from node %d, which is not among this node's peers", from)
	}
	return from, nil
}

func (t *transport) badPeer(c net.Conn, err error) {
	t.badPeers.Add(1)
	t.log.Warn("realrt: closing a bad inbound connection", "remote", c.RemoteAddr().String(), "err", err)
}

// peer is the outbound side towards one node: a bounded queue of encoded
// frames and the goroutine that writes them.
//
// When the queue is full the OLDEST frame is dropped. The protocols on top
// tolerate loss (the simulator loses messages too) and recover by
// retransmission: Raft resends from its progress tracking, clients retry
// with the same request id. What they cannot use is a stale message
// delivered in place of a fresh one: the newest frames carry the current
// term, commit index and replies to the latest requests, while the oldest
// are the likeliest to have been superseded.
type peer struct {
	t    *transport
	id   process.NodeID
	addr string
	wake chan struct{} // capacity 1: frames queued

	mu      sync.Mutex
	ring    [][]byte // fixed capacity cfg.SendQueue
	head, n int
	bytes   int // of the queued frames, bounded by cfg.SendQueueBytes
	dropped uint64
	conn    net.Conn // the current connection, for stopOutbound to close
}

func (p *peer) enqueue(frame []byte) {
	p.mu.Lock()
	for p.n > 0 && (p.n == len(p.ring) || p.bytes+len(frame) > p.t.cfg.SendQueueBytes) {
		p.bytes -= len(p.ring[p.head])
		p.ring[p.head] = nil
		p.head = (p.head + 1) % len(p.ring)
		p.n--
		p.dropped++
	}
	p.ring[(p.head+p.n)%len(p.ring)] = frame
	p.n++
	p.bytes += len(frame)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take moves every queued frame to batch.
func (p *peer) take(batch [][]byte) [][]byte {
	p.mu.Lock()
	for ; p.n > 0; p.n-- {
		batch = append(batch, p.ring[p.head])
		p.bytes -= len(p.ring[p.head])
		p.ring[p.head] = nil
		p.head = (p.head + 1) % len(p.ring)
	}
	p.mu.Unlock()
	return batch
}

func (p *peer) queueDropped() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// run dials the peer when there is something to send, writes batches of
// frames with a deadline, and on any failure closes the connection and
// dials again after a backoff. Frames of a failed write are lost.
func (p *peer) run() {
	defer p.t.writers.Done()
	cfg := p.t.cfg
	var w *bufio.Writer
	var conn net.Conn
	var gone <-chan struct{} // closed once the peer has closed conn
	var batch [][]byte
	backoff := cfg.MinBackoff
	for {
		select {
		case <-p.t.quit:
			return
		case <-p.wake:
		}
		for {
			if conn != nil {
				select {
				case <-gone: // the peer went away while the connection was idle: redial before writing into it
					p.setConn(nil)
					conn.Close()
					conn = nil
				default:
				}
			}
			if conn == nil {
				c, g, err := p.dial()
				if err != nil {
					p.t.log.Debug("realrt: dial failed", "peer", p.id, "addr", p.addr, "err", err, "retry_in", backoff)
					if !p.sleep(backoff) {
						return
					}
					backoff = min(2*backoff, cfg.MaxBackoff)
					continue
				}
				conn, gone, backoff = c, g, cfg.MinBackoff
				w = bufio.NewWriterSize(conn, 64<<10)
			}
			batch = p.take(batch[:0])
			if len(batch) == 0 {
				break
			}
			if err := p.write(conn, w, batch); err != nil {
				p.t.log.Debug("realrt: write failed, reconnecting", "peer", p.id, "err", err, "lost_frames", len(batch))
				p.t.writeLost.Add(uint64(len(batch)))
				p.setConn(nil)
				conn.Close()
				conn = nil
			}
			clear(batch)
		}
	}
}

func (p *peer) write(conn net.Conn, w *bufio.Writer, batch [][]byte) error {
	conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
	for _, f := range batch {
		if _, err := w.Write(f); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	p.t.sent.Add(uint64(len(batch)))
	return nil
}

// dial opens a connection to the peer and sends the hello. A goroutine
// reads the connection, on which the peer never writes, so that the peer's
// close (it stopped or restarted) is seen at once: it closes gone, and the
// next batch goes to a new connection instead of into a dead socket.
func (p *peer) dial() (c net.Conn, gone <-chan struct{}, err error) {
	cfg := p.t.cfg
	d := net.Dialer{Timeout: cfg.DialTimeout}
	if c, err = d.DialContext(p.t.ctx, "tcp", p.addr); err != nil {
		return nil, nil, err
	}
	if selfConnected(c) {
		c.Close()
		return nil, nil, fmt.Errorf("dial %s: connected to itself (nothing listens there, and the kernel gave the dial that very port)", p.addr)
	}
	if cfg.TLS != nil {
		tc := tls.Client(c, cfg.TLS.Client(p.id))
		ctx, cancel := context.WithTimeout(p.t.ctx, cfg.DialTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("TLS handshake with node %d: %w", p.id, err)
		}
		c = tc
	}
	c.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
	if _, err := c.Write(appendHello(nil, p.t.self, p.id)); err != nil {
		c.Close()
		return nil, nil, err
	}
	if !p.setConn(c) {
		c.Close()
		return nil, nil, net.ErrClosed
	}
	p.t.dials.Add(1)
	g := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(g)
	}()
	return c, g, nil
}

// selfConnected reports whether c is a TCP self-connection: dialing a
// port on this host that nothing listens on can succeed by simultaneous
// open when the kernel picks that same port as the dial's own. The
// connection then echoes what is written to it, and, worse, holds the
// port: the peer, restarting, cannot listen on it ("address already in
// use") for as long as the connection lives — which, since every write
// succeeds, is forever.
func selfConnected(c net.Conn) bool {
	return c.LocalAddr().String() == c.RemoteAddr().String()
}

// setConn records the current connection; it refuses a new one once the
// transport is stopping.
func (p *peer) setConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != nil {
		select {
		case <-p.t.quit:
			return false
		default:
		}
	}
	p.conn = c
	return true
}

// sleep waits d with ±25% jitter, so that peers that lost a node together
// do not redial in lockstep; false if the transport stopped meanwhile.
func (p *peer) sleep(d time.Duration) bool {
	d += time.Duration(rand.Int64N(int64(d)/2+1)) - d/4
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-p.t.quit:
		return false
	case <-tm.C:
		return true
	}
}

func (t *transport) stats() TransportStats {
	s := TransportStats{FramesSent: t.sent.Load(), FramesReceived: t.received.Load(), WriteLost: t.writeLost.Load(),
		Unroutable: t.unroutable.Load(), BadPeers: t.badPeers.Load(), Dials: t.dials.Load()}
	for _, p := range t.peers {
		s.QueueDropped += p.queueDropped()
	}
	return s
}
