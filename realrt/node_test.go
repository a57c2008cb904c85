package realrt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/freeport"
	"github.com/fencesim/fencesim/process"
)

// ping is the test protocol's one message: a number, echoed back.
type ping struct {
	N    uint64
	Echo bool
	Pad  []byte // makes frames as large as a test needs
}

func (p ping) Fingerprint() uint64 { return p.N }

// pingCodec encodes ping as tag 'p', the echo flag, N and the padding.
type pingCodec struct{}

func (pingCodec) AppendMessage(b []byte, m process.Message) ([]byte, error) {
	p, ok := m.(ping)
	if !ok {
		return b, fmt.Errorf("pingCodec: %T", m)
	}
	flag := byte(0)
	if p.Echo {
		flag = 1
	}
	b = append(b, 'p', flag)
	b = binary.BigEndian.AppendUint64(b, p.N)
	return append(b, p.Pad...), nil
}

func (pingCodec) DecodeMessage(b []byte) (process.Message, error) {
	if len(b) < 10 || b[0] != 'p' || b[1] > 1 {
		return nil, errors.New("pingCodec: not a ping")
	}
	return ping{N: binary.BigEndian.Uint64(b[2:]), Echo: b[1] == 1, Pad: append([]byte(nil), b[10:]...)}, nil
}

// echo answers every ping with its echo and records what it received, in
// order. busy catches two events running at once, which the executor must
// never allow; the race detector catches unsynchronized access to got.
type echo struct {
	busy    atomic.Bool
	overlap atomic.Bool
	got     []ping
	from    []process.NodeID
	started int
}

func (e *echo) enter() func() {
	if !e.busy.CompareAndSwap(false, true) {
		e.overlap.Store(true)
	}
	return func() { e.busy.Store(false) }
}

func (e *echo) Start(process.Env) { defer e.enter()(); e.started++ }

func (e *echo) Receive(env process.Env, from process.NodeID, m process.Message) {
	defer e.enter()()
	p := m.(ping)
	e.got = append(e.got, p)
	e.from = append(e.from, from)
	if !p.Echo {
		env.Send(from, ping{N: p.N, Echo: true})
	}
}

// cluster starts nodes on loopback listeners picked beforehand, each
// knowing every other's address.
type cluster struct {
	t     *testing.T
	addrs map[process.NodeID]string
	dirs  map[process.NodeID]string
	nodes map[process.NodeID]*Node
	tune  func(*Config)
}

func newCluster(t *testing.T, ids []process.NodeID, tune func(*Config)) *cluster {
	c := &cluster{t: t, addrs: map[process.NodeID]string{}, dirs: map[process.NodeID]string{}, nodes: map[process.NodeID]*Node{}, tune: tune}
	for _, id := range ids {
		c.addrs[id] = freeAddr(t)
		c.dirs[id] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	return c
}

// freeAddr returns a loopback address nothing listens on now, drawn where
// no connection is given a local port (internal/freeport): a node
// restarted on it must be able to bind it again.
func freeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (c *cluster) start(id process.NodeID, p process.Process) *Node {
	c.t.Helper()
	cfg := Config{ID: id, DataDir: c.dirs[id], Listen: c.addrs[id], Peers: c.addrs, Codec: pingCodec{}, Seed: uint64(id) + 1,
		Logger: slog.New(slog.DiscardHandler), MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	if c.tune != nil {
		c.tune(&cfg)
	}
	var n *Node
	var err error
	// A port just freed may be briefly unavailable; retry within a bound.
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, err = Start(cfg, p); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = n
	return n
}

func (c *cluster) stop(id process.NodeID) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Fatal(err)
	}
	delete(c.nodes, id)
}

// eventually polls cond on n's executor until it holds or 5s pass.
func eventually(t *testing.T, n *Node, what string, cond func(env process.Env) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		var ok bool
		if err := n.Do(ctx, func(env process.Env) { ok = cond(env) }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not happen within 5s", what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func send(t *testing.T, n *Node, to process.NodeID, m process.Message) {
	t.Helper()
	if err := n.Do(context.Background(), func(env process.Env) { env.Send(to, m) }); err != nil {
		t.Fatal(err)
	}
}

// TestPingEcho: two nodes exchange 500 pings over TCP; every one arrives,
// in order, from the right sender, and is echoed.
func TestPingEcho(t *testing.T) {
	c := newCluster(t, []process.NodeID{1, 2}, nil)
	a, b := &echo{}, &echo{}
	na, nb := c.start(1, a), c.start(2, b)
	const n = 500
	for i := range uint64(n) {
		send(t, na, 2, ping{N: i})
	}
	eventually(t, na, "all echoes back at node 1", func(process.Env) bool { return len(a.got) == n })
	nb.Do(context.Background(), func(process.Env) {
		for i, p := range b.got {
			if p.N != uint64(i) || p.Echo || b.from[i] != 1 {
				t.Fatalf("node 2's message %d: %+v from %d", i, p, b.from[i])
			}
		}
	})
	for i, p := range a.got {
		if p.N != uint64(i) || !p.Echo || a.from[i] != 2 {
			t.Fatalf("node 1's echo %d: %+v from %d", i, p, a.from[i])
		}
	}
	if a.overlap.Load() || b.overlap.Load() {
		t.Fatal("two events ran at once on one node")
	}
	if a.started != 1 {
		t.Fatalf("Start ran %d times", a.started)
	}
	if s := na.Stats(); s.FramesSent != n || s.FramesReceived != n || s.QueueDropped != 0 {
		t.Fatalf("node 1's stats %+v", s)
	}
}

// TestSerialUnderLoad: timers, Do calls from many goroutines and messages
// from the network hit one node at once; never two events run together
// (the race detector checks the process's unsynchronized state too).
func TestSerialUnderLoad(t *testing.T) {
	c := newCluster(t, []process.NodeID{1, 2}, nil)
	a, b := &echo{}, &echo{}
	na, nb := c.start(1, a), c.start(2, b)
	var fired atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				err := nb.Do(context.Background(), func(env process.Env) {
					defer b.enter()()
					b.got = append(b.got, ping{N: uint64(g*1000 + i), Echo: true}) // not echoed: counted below
					env.Clock().AfterFunc(time.Duration(i%5)*time.Millisecond, func() {
						defer b.enter()()
						b.started++
						fired.Add(1)
					})
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range uint64(300) {
		send(t, na, 2, ping{N: i})
	}
	wg.Wait()
	eventually(t, na, "300 echoes", func(process.Env) bool { return len(a.got) == 300 })
	eventually(t, nb, "400 timers", func(process.Env) bool { return fired.Load() == 400 })
	if b.overlap.Load() {
		t.Fatal("two events ran at once on node 2")
	}
}

// TestDoAbandonedNeverRuns: a Do whose context ends before its turn
// returns the context's error, and its function never runs.
func TestDoAbandonedNeverRuns(t *testing.T) {
	c := newCluster(t, []process.NodeID{1}, nil)
	n := c.start(1, &echo{})
	release, running := make(chan struct{}), make(chan struct{})
	go n.Do(context.Background(), func(process.Env) { close(running); <-release }) // holds the executor
	<-running
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var ran atomic.Bool
	if err := n.Do(ctx, func(process.Env) { ran.Store(true) }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do returned %v, want the deadline", err)
	}
	close(release)
	if err := n.Do(context.Background(), func(process.Env) {}); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatal("an abandoned Do ran its function")
	}
}

// TestCloseDrainsAndStopsTimers: Close runs the events queued before it
// (here three messages a node sent itself while its executor was busy), a
// timer that falls due afterwards never runs, and Do on a closed node is
// ErrClosed.
func TestCloseDrainsAndStopsTimers(t *testing.T) {
	c := newCluster(t, []process.NodeID{1}, nil)
	p := &echo{}
	n := c.start(1, p)
	var late atomic.Bool
	release, running := make(chan struct{}), make(chan struct{})
	go n.Do(context.Background(), func(env process.Env) {
		env.Clock().AfterFunc(50*time.Millisecond, func() { late.Store(true) })
		for i := range uint64(3) {
			env.Send(1, ping{N: i, Echo: true}) // to itself: queued behind this event
		}
		close(running)
		<-release
	})
	<-running
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	c.stop(1)
	if len(p.got) != 3 {
		t.Fatalf("Close returned with %d of the 3 queued messages run", len(p.got))
	}
	time.Sleep(100 * time.Millisecond)
	if late.Load() {
		t.Fatal("a timer ran after Close")
	}
	if err := n.Do(context.Background(), func(process.Env) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestRestartOnSameDirAndAddress: a node closed and started again on its
// data directory finds what it synced, and its peer reconnects to it.
func TestRestartOnSameDirAndAddress(t *testing.T) {
	c := newCluster(t, []process.NodeID{1, 2}, nil)
	a := &echo{}
	na := c.start(1, a)
	nb := c.start(2, &echo{})
	nb.Do(context.Background(), func(env process.Env) { env.Disk().Write("k", []byte("v")); env.Disk().Sync() })
	send(t, na, 2, ping{N: 1})
	eventually(t, na, "the first echo", func(process.Env) bool { return len(a.got) == 1 })
	c.stop(2)

	b2 := &echo{}
	nb = c.start(2, b2)
	var v []byte
	nb.Do(context.Background(), func(env process.Env) { v, _ = env.Disk().Read("k") })
	if string(v) != "v" {
		t.Fatalf("after the restart the disk holds %q", v)
	}
	// Messages sent into the dead connection may be lost (the protocols
	// resend); keep pinging until one gets through.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := uint64(2); ; i++ {
		send(t, na, 2, ping{N: i})
		var got int
		na.Do(ctx, func(process.Env) { got = len(a.got) })
		if got > 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no echo from the restarted node within 5s; stats %+v", na.Stats())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if s := na.Stats(); s.Dials < 2 || s.WriteLost != 0 {
		t.Fatalf("node 1's stats %+v: want a reconnection, and no frame written into the dead connection (its close was seen)", s)
	}
}

// TestFullQueueDropsOldest: while the peer is down, frames beyond the send
// queue's bound are dropped oldest first, so once it is up it receives
// exactly the newest SendQueue frames, in order.
func TestFullQueueDropsOldest(t *testing.T) {
	const depth, sent = 100, 2000
	c := newCluster(t, []process.NodeID{1, 2}, func(cfg *Config) { cfg.SendQueue = depth })
	na := c.start(1, &echo{})
	for i := range uint64(sent) {
		send(t, na, 2, ping{N: i, Echo: true}) // echoes: node 2 does not answer
	}
	if d := na.Stats().QueueDropped; d != sent-depth {
		t.Fatalf("dropped %d frames, want %d", d, sent-depth)
	}
	b := &echo{}
	nb := c.start(2, b)
	eventually(t, nb, "the queued frames", func(process.Env) bool { return len(b.got) == depth })
	for i, p := range b.got {
		if want := uint64(sent - depth + i); p.N != want {
			t.Fatalf("frame %d is ping %d, want %d (the newest %d)", i, p.N, want, depth)
		}
	}
}

// TestSlowPeerDoesNotStallTheExecutor: a peer that accepts and never reads
// fills its socket; the sending node's executor goes on answering within
// milliseconds, its write deadline fires, and it redials.
func TestSlowPeerDoesNotStallTheExecutor(t *testing.T) {
	stuck, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := stuck.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // never read
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, conn := range held {
			conn.Close()
		}
		mu.Unlock()
	}()
	const writeTimeout = time.Second
	c := newCluster(t, []process.NodeID{1}, func(cfg *Config) { cfg.WriteTimeout = writeTimeout; cfg.SendQueueBytes = 4 << 20 })
	c.addrs[2] = stuck.Addr().String()
	na := c.start(1, &echo{})
	pad := make([]byte, 64<<10)
	var worst time.Duration
	for end := time.Now().Add(3 * writeTimeout / 2); time.Now().Before(end); {
		begin := time.Now()
		if err := na.Do(context.Background(), func(env process.Env) {
			for i := range uint64(10) {
				env.Send(2, ping{N: i, Pad: pad})
			}
		}); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(begin))
	}
	// Under the race detector, on a shared machine, a 640 KB Do costs up
	// to tens of ms; an executor blocked on the stuck socket would take
	// the write timeout at least.
	if worst > writeTimeout/2 {
		t.Fatalf("a Do took %v while the peer was stuck", worst)
	}
	eventually(t, na, "a redial after the write deadline", func(process.Env) bool { return na.Stats().Dials >= 2 })
	if s := na.Stats(); s.QueueDropped == 0 || s.WriteLost == 0 {
		t.Fatalf("no frame lost although the peer never read: %+v", s)
	}
}

// TestLargeMessagesTravelInFrames: a message longer than MaxFrame (a Raft
// snapshot of a large lock table) crosses in several frames and arrives
// whole, between small ones and in order; one longer than MaxMessage is
// dropped by its sender, and the small ones after it still arrive.
func TestLargeMessagesTravelInFrames(t *testing.T) {
	c := newCluster(t, []process.NodeID{1, 2}, func(cfg *Config) { cfg.MaxFrame, cfg.MaxMessage = 1<<10, 64<<10 })
	a, b := &echo{}, &echo{}
	na := c.start(1, a)
	c.start(2, b)
	pad := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		return p
	}
	sizes := []int{0, 1<<10 - 10, 1<<10 - 9, 5000, 3 << 10, 64<<10 - 10, 64<<10 - 9, 20}
	for i, n := range sizes {
		send(t, na, 2, ping{N: uint64(i), Pad: pad(n)})
	}
	want := []int{0, 1, 2, 3, 4, 5, 7} // 6 is one byte over MaxMessage
	eventually(t, na, "the echoes", func(process.Env) bool { return len(a.got) == len(want) })
	var got []ping
	if err := c.nodes[2].Do(context.Background(), func(process.Env) { got = append(got, b.got...) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("node 2 got %d pings, want %d", len(got), len(want))
	}
	for k, i := range want {
		if g := got[k]; g.N != uint64(i) || !bytes.Equal(g.Pad, pad(sizes[i])) {
			t.Errorf("ping %d: got N=%d with %d bytes of padding, want N=%d with %d", k, g.N, len(g.Pad), i, sizes[i])
		}
	}
	if s := c.nodes[2].Stats(); s.BadPeers != 0 {
		t.Errorf("the receiver cut a peer: %+v", s)
	}
}

// TestBadPeersAreCut: a connection with a wrong hello, one from an unknown
// node, one with an oversized frame and one with an undecodable frame are
// each closed and counted, and the node keeps serving its real peer.
func TestBadPeersAreCut(t *testing.T) {
	c := newCluster(t, []process.NodeID{1, 2}, func(cfg *Config) { cfg.MaxFrame, cfg.MaxMessage = 1<<10, 3<<9 })
	a := &echo{}
	na := c.start(1, a)
	nb := c.start(2, &echo{})
	frame := func(payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
	}
	more := func(payload []byte) []byte { // a frame the next one continues
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))|moreFrames), payload...)
	}
	for i, raw := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n......"),
		appendHello(nil, 99, 2),                                                                            // not a peer
		appendHello(nil, 1, 3),                                                                             // meant for another node
		append(appendHello(nil, 1, 2), frame(make([]byte, 2<<10))...),                                      // over MaxFrame
		append(appendHello(nil, 1, 2), frame([]byte("garbage, not a ping"))...),                            // undecodable
		append(append(appendHello(nil, 1, 2), more(make([]byte, 1<<10))...), more(make([]byte, 1<<10))...), // continued past MaxMessage
		append(appendHello(nil, 1, 2), more(make([]byte, 2<<10))...),                                       // a continued frame over MaxFrame
	} {
		conn, err := net.Dial("tcp", c.addrs[2])
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(raw)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := bufio.NewReader(conn).ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("bad connection %d was not closed by the node: %v", i, err)
		}
		conn.Close()
		if got := nb.Stats().BadPeers; got != uint64(i+1) {
			t.Errorf("after bad connection %d: BadPeers %d", i, got)
		}
	}
	send(t, na, 2, ping{N: 7})
	eventually(t, na, "an echo after the garbage", func(process.Env) bool { return len(a.got) == 1 })
}

// TestLocalTakesRepliesToAFrontEnd: a front end that is not a node submits
// a request under an id of its own through Do, and Config.Local hands it
// the process's reply, which never reaches the network.
func TestLocalTakesRepliesToAFrontEnd(t *testing.T) {
	const frontEnd process.NodeID = 1000
	replies := make(chan process.Message, 1)
	c := newCluster(t, []process.NodeID{1}, func(cfg *Config) {
		cfg.Local = func(to process.NodeID, m process.Message) bool {
			if to != frontEnd {
				return false
			}
			replies <- m
			return true
		}
	})
	p := &echo{}
	n := c.start(1, p)
	if err := n.Do(context.Background(), func(env process.Env) { p.Receive(env, frontEnd, ping{N: 42}) }); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replies:
		if p := m.(ping); p.N != 42 || !p.Echo {
			t.Fatalf("the front end got %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply reached Local")
	}
	if s := n.Stats(); s.Unroutable != 0 || s.FramesSent != 0 {
		t.Fatalf("the reply went to the network: %+v", s)
	}
}

// TestFullInboxDropsMessages: while the executor is busy, messages from
// the network beyond InboxDepth are dropped and counted, not queued
// without bound; the ones admitted run in order once it is free.
func TestFullInboxDropsMessages(t *testing.T) {
	const depth, sent = 10, 100
	c := newCluster(t, []process.NodeID{1, 2}, func(cfg *Config) { cfg.InboxDepth = depth })
	na := c.start(1, &echo{})
	b := &echo{}
	nb := c.start(2, b)
	release, running := make(chan struct{}), make(chan struct{})
	go nb.Do(context.Background(), func(process.Env) { close(running); <-release })
	<-running
	for i := range uint64(sent) {
		send(t, na, 2, ping{N: i, Echo: true})
	}
	deadline := time.Now().Add(5 * time.Second)
	for nb.Stats().InboxDropped < sent-depth {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("stats %+v: want %d dropped", nb.Stats(), sent-depth)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	eventually(t, nb, "the admitted messages", func(process.Env) bool { return len(b.got) == depth })
	for i, p := range b.got {
		if p.N != uint64(i) {
			t.Fatalf("admitted message %d is ping %d", i, p.N)
		}
	}
	if d := nb.Stats().InboxDropped; d != sent-depth {
		t.Fatalf("%d dropped, want %d", d, sent-depth)
	}
}

// BenchmarkRoundTrip measures a ping's round trip between two nodes over
// loopback TCP: out through the sender's executor and transport, echoed
// by the peer's process, back to the sender's process.
func BenchmarkRoundTrip(b *testing.B) {
	addrs := map[process.NodeID]string{1: "127.0.0.1:0", 2: "127.0.0.1:0"}
	lns := map[process.NodeID]net.Listener{}
	for id := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	got := make(chan struct{}, 1)
	start := func(id process.NodeID, p process.Process) *Node {
		n, err := Start(Config{ID: id, DataDir: b.TempDir(), Listener: lns[id], Peers: addrs, Codec: pingCodec{},
			Logger: slog.New(slog.DiscardHandler)}, p)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		return n
	}
	na := start(1, notify{got})
	start(2, &echo{})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		na.Do(context.Background(), func(env process.Env) { env.Send(2, ping{N: uint64(i)}) })
		<-got
	}
}

// notify signals a channel for every message it receives.
type notify struct{ c chan struct{} }

func (notify) Start(process.Env) {}
func (n notify) Receive(process.Env, process.NodeID, process.Message) {
	n.c <- struct{}{}
}

// BenchmarkFrames measures one-way throughput: frames/s from one node's
// process to another's, in batches of 1000 sends per executor event.
func BenchmarkFrames(b *testing.B) {
	addrs := map[process.NodeID]string{}
	lns := map[process.NodeID]net.Listener{}
	for _, id := range []process.NodeID{1, 2} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	var count atomic.Int64
	start := func(id process.NodeID, p process.Process) *Node {
		n, err := Start(Config{ID: id, DataDir: b.TempDir(), Listener: lns[id], Peers: addrs, Codec: pingCodec{},
			Logger: slog.New(slog.DiscardHandler), SendQueue: 1 << 16, InboxDepth: 1 << 16}, p)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		return n
	}
	na := start(1, &echo{})
	start(2, counter{&count})
	const batch = 1000
	b.ResetTimer()
	sent := 0
	for b.Loop() {
		na.Do(context.Background(), func(env process.Env) {
			for i := range uint64(batch) {
				env.Send(2, ping{N: i, Echo: true})
			}
		})
		sent += batch
		// Stay within the queue bound, so nothing is dropped and the
		// count measures delivered frames.
		for int64(sent)-count.Load() > 1<<15 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	for count.Load() < int64(sent) {
		time.Sleep(50 * time.Microsecond)
	}
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "frames/s")
}

type counter struct{ n *atomic.Int64 }

func (counter) Start(process.Env) {}
func (c counter) Receive(process.Env, process.NodeID, process.Message) {
	c.n.Add(1)
}

// batcher records its events and the ends of the executor's batches.
type batcher struct{ log []string }

func (b *batcher) Start(env process.Env) {
	b.log = append(b.log, "start")
	for i := range 10 {
		env.Send(env.ID(), ping{N: uint64(i)})
	}
}
func (b *batcher) Receive(process.Env, process.NodeID, process.Message) {
	b.log = append(b.log, "recv")
}
func (b *batcher) EndBatch(process.Env) { b.log = append(b.log, "end") }

// TestBatcherHearsTheEndOfEachBatch: events queued while a batch runs run
// as the next batch, and a process.Batcher hears EndBatch once after it,
// not after each event.
func TestBatcherHearsTheEndOfEachBatch(t *testing.T) {
	c := newCluster(t, []process.NodeID{1}, nil)
	b := &batcher{}
	n := c.start(1, b)
	var got []string
	eventually(t, n, "ten messages received", func(process.Env) bool {
		got = append([]string(nil), b.log...)
		return len(got) >= 13
	})
	want := "start end recv recv recv recv recv recv recv recv recv recv end"
	if s := fmt.Sprint(got[:13]); s != "["+want+"]" {
		t.Fatalf("events %v, want %s", got, want)
	}
}

// TestNodeHoldsAProcWhileItRuns: each running node adds one to GOMAXPROCS
// (procs.go: its fsyncs hold a P), and once every node closed the
// process's GOMAXPROCS is as before.
func TestNodeHoldsAProcWhileItRuns(t *testing.T) {
	if procsFixed {
		t.Skip("GOMAXPROCS is set in the environment: nodes leave it alone")
	}
	before := runtime.GOMAXPROCS(0)
	c := newCluster(t, []process.NodeID{1, 2}, nil)
	n1 := c.start(1, &echo{})
	n2 := c.start(2, &echo{})
	if got := runtime.GOMAXPROCS(0); got != before+2 {
		t.Errorf("with two nodes running GOMAXPROCS is %d, want %d + 2", got, before)
	}
	n1.Close()
	if got := runtime.GOMAXPROCS(0); got != before+1 {
		t.Errorf("with one node left GOMAXPROCS is %d, want %d + 1", got, before)
	}
	n1.Close() // a second Close gives nothing back twice
	n2.Close()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("with every node closed GOMAXPROCS is %d, want %d as before", got, before)
	}
}
