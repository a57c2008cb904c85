// Package realrt is the real runtime for process.Process: it hosts one
// process per Node on the machine's clock (realclock), a file disk
// (filedisk) and a TCP transport between nodes, so that the same service
// and client code the simulator runs can be deployed.
//
// A Node keeps the promise the simulator keeps: Start, Receive and timer
// callbacks run one at a time, on the node's serial executor, so process
// code needs no locks. Code that is not a process (an HTTP handler, a test)
// reaches the process through Do, which runs a function on that executor.
//
// This is the one package outside tests with goroutines, mutexes and the
// machine's time; it is not in the determinism lint's list of simulation
// packages and it is tested under the race detector. It knows no protocol:
// messages cross the network through a Codec the caller supplies (package
// wire has the reference lock service's).
package realrt

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realclock"
)

// Config describes one node. ID, DataDir, Codec and a listen address
// (Listen or Listener) are required; the rest have defaults.
type Config struct {
	// ID is the node's id; its peers know it by this id.
	ID process.NodeID
	// Name is the node's name in logs (default "node-<ID>").
	Name string
	// DataDir is the directory of the node's disk. A restart opens the
	// same directory and finds what the process synced there.
	DataDir string
	// Disk tunes the file disk.
	Disk filedisk.Options
	// Listen is the TCP address peers connect to, e.g. "127.0.0.1:7001".
	Listen string
	// Listener, if set, is used instead of Listen (a test's port picked
	// beforehand, a socket handed over by a supervisor). The node closes it.
	Listener net.Listener
	// Peers are the addresses of the nodes this one sends to and accepts
	// connections from, by id; the node's own entry, if any, is ignored.
	Peers map[process.NodeID]string
	// Codec encodes and decodes the process's messages.
	Codec Codec
	// Local, if set, sees on the executor every message the process sends
	// to another node, before the network does; returning true keeps the
	// message off the network. A front end that is not a node (an HTTP
	// API) gives its pending requests ids of their own, submits them with
	// Do, and takes the process's replies to those ids here. It must not
	// block (hand the reply to a buffered channel, say): the process waits.
	Local func(to process.NodeID, m process.Message) bool
	// Seed seeds the process's random stream; 0 draws one from
	// crypto/rand at boot (a real node needs no reproducible stream).
	Seed uint64
	// Logger is the base logger (default slog.Default()); the node adds
	// its name and id.
	Logger *slog.Logger

	// InboxDepth bounds the network messages waiting for the executor
	// (default 4096); beyond it new ones are dropped.
	InboxDepth int
	// SendQueue bounds the frames queued per peer (default 1024); beyond
	// it the oldest is dropped (see peer).
	SendQueue int
	// SendQueueBytes bounds the bytes of the frames queued per peer
	// (default 64 MiB), so that large frames to a dead peer cannot grow
	// memory without end; the oldest are dropped first here too.
	SendQueueBytes int
	// MaxFrame bounds a frame's payload in bytes, both ways (default 16
	// MiB, at most 2 GiB − 1). A longer message travels in several frames.
	MaxFrame int
	// MaxMessage bounds a message's encoding in bytes, both ways (default
	// 1 GiB): a message over it is dropped by its sender, and a peer that
	// sends one is cut off. Messages between MaxFrame and MaxMessage (a
	// Raft snapshot of a large lock table) are split into frames.
	MaxMessage int
	// WriteTimeout is the deadline of each batch written to a peer
	// (default 2s): a peer that stops reading costs a reconnection, never
	// a stuck writer.
	WriteTimeout time.Duration
	// DialTimeout bounds a connection attempt (default 1s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds the wait for an inbound connection's hello
	// (default 5s).
	HandshakeTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed dials to a
	// peer, doubling from one to the other (defaults 20ms and 1s).
	MinBackoff, MaxBackoff time.Duration
	// TLS, if set, authenticates peers with mutual TLS; nil: plain TCP,
	// which trusts whoever reaches the port (see PeerTLS).
	TLS *PeerTLS
}

// PeerTLS authenticates the peers of a node with mutual TLS. An inbound
// connection is refused — before its hello is read, let alone a frame
// decoded — unless its handshake completes within HandshakeTimeout with
// a certificate Server verifies and PeerID maps to a peer; its hello must
// then name that same peer. The caller decides how a certificate names a
// node (package internal/peertls: a DNS name "fencesim-node-<id>").
type PeerTLS struct {
	// Server is the listener's configuration; it must require and verify
	// client certificates (tls.RequireAndVerifyClientCert).
	Server *tls.Config
	// Client returns the configuration to dial peer id with; it must
	// verify that the server's certificate names id.
	Client func(id process.NodeID) *tls.Config
	// PeerID returns the node a verified client certificate names.
	PeerID func(cs tls.ConnectionState) (process.NodeID, error)
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = fmt.Sprintf("node-%d", c.ID)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.InboxDepth, 4096)
	def(&c.SendQueue, 1024)
	def(&c.SendQueueBytes, 64<<20)
	def(&c.MaxFrame, 16<<20)
	c.MaxFrame = min(c.MaxFrame, moreFrames-1)
	def(&c.MaxMessage, 1<<30)
	defDur(&c.WriteTimeout, 2*time.Second)
	defDur(&c.DialTimeout, time.Second)
	defDur(&c.HandshakeTimeout, 5*time.Second)
	defDur(&c.MinBackoff, 20*time.Millisecond)
	defDur(&c.MaxBackoff, time.Second)
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	return c
}

// ErrClosed is returned by Do on a node that is closing or closed.
var ErrClosed = errors.New("realrt: node closed")

// Node hosts one process: its executor, clock, disk and transport.
type Node struct {
	cfg   Config
	proc  process.Process
	exec  *executor
	env   *env
	disk  *filedisk.Disk
	pdisk process.Disk // disk as the process sees it (nodeDisk), made once
	tr    *transport
	close sync.Once
}

// Start opens the node's disk, listens for peers, and runs the process's
// Start on the executor. The process must be fresh: a restart is a new
// Node with a new process on the same DataDir (and address), which finds
// on disk what the previous one synced, as after a crash.
func Start(cfg Config, proc process.Process) (*Node, error) {
	cfg = cfg.withDefaults()
	switch {
	case proc == nil:
		return nil, errors.New("realrt: Start needs a process")
	case cfg.Codec == nil:
		return nil, errors.New("realrt: Config.Codec is nil; give the codec of the process's messages (e.g. wire.Codec{})")
	case cfg.DataDir == "":
		return nil, errors.New("realrt: Config.DataDir is empty; give the node's data directory")
	case cfg.Listen == "" && cfg.Listener == nil:
		return nil, errors.New("realrt: neither Config.Listen nor Config.Listener is set; give the address peers connect to")
	}
	disk, err := filedisk.Open(cfg.DataDir, cfg.Disk)
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			disk.Close()
			return nil, fmt.Errorf("realrt: node %d listening: %w", cfg.ID, err)
		}
	}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		crand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
		seed = binary.LittleEndian.Uint64(b[:])
	}
	log := cfg.Logger.With("node", cfg.Name, "id", int(cfg.ID))
	n := &Node{cfg: cfg, proc: proc, disk: disk}
	var after func()
	if b, ok := proc.(process.Batcher); ok {
		after = func() { b.EndBatch(n.env) }
	}
	holdProc() // given back by Close
	n.exec = newExecutor(cfg.InboxDepth, after)
	n.pdisk = &nodeDisk{disk, n.exec}
	n.env = &env{n: n, log: log, rng: rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)),
		clock: realclock.New(func(f func()) { n.exec.post(f) })}
	n.tr = newTransport(&n.cfg, ln, log, n.deliver)
	n.exec.post(func() { proc.Start(n.env) })
	return n, nil
}

// deliver hands a message from the network to the process, on the
// executor; false if the inbox was full or the node is closing.
func (n *Node) deliver(from process.NodeID, m process.Message) bool {
	return n.exec.postMessage(func() { n.proc.Receive(n.env, from, m) })
}

// Do runs f on the node's executor, after the events queued before it and
// never alongside the process's own, and waits for it to return. It
// returns nil if f ran; ctx's error if ctx ended before f started (f then
// never runs: an abandoned request is not half-submitted); ErrClosed if
// the node is closing. f must not block, nor call Do or Close.
func (n *Node) Do(ctx context.Context, f func(env process.Env)) error {
	const (
		waiting = iota
		running
		abandoned
	)
	var state atomic.Int32
	done := make(chan struct{})
	if !n.exec.postLow(func() {
		if state.CompareAndSwap(waiting, running) {
			f(n.env)
			close(done)
		}
	}) {
		return ErrClosed
	}
	select {
	case <-done:
		return nil
	case <-n.exec.done:
		select {
		case <-done:
			return nil
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		if state.CompareAndSwap(waiting, abandoned) {
			return ctx.Err()
		}
		<-done // f is running: it will not block, so wait for it
		return nil
	}
}

// AdjustClock skews the node's clock on its executor (realclock's
// Adjust: a wall offset and a drift that the process's monotonic reading,
// wall reading and timers follow). It is a test-only fault for live runs.
func (n *Node) AdjustClock(ctx context.Context, offset time.Duration, ppm int64) error {
	var err error
	if derr := n.Do(ctx, func(process.Env) { err = n.env.clock.Adjust(offset, ppm) }); derr != nil {
		return derr
	}
	return err
}

// SetSyncDelay makes each fsync of the node's disk wait delay first (0:
// off), a slow disk: a test-only fault for live runs (filedisk's failpoint).
func (n *Node) SetSyncDelay(delay time.Duration) { n.disk.SetSyncDelay(delay) }

// Fsyncs reports how many fsyncs of write batches the node's disk made
// since Start (filedisk.Disk.Fsyncs): with group commit and background
// syncs, far fewer than its Raft Readys.
func (n *Node) Fsyncs() uint64 { return n.disk.Fsyncs() }

// Addr is the address the node accepts peers on (useful with ":0").
func (n *Node) Addr() net.Addr { return n.tr.ln.Addr() }

// ID is the node's id.
func (n *Node) ID() process.NodeID { return n.cfg.ID }

// Stats reports the transport's counters and the inbox's drops.
func (n *Node) Stats() TransportStats {
	s := n.tr.stats()
	s.InboxDropped = n.exec.droppedMessages()
	return s
}

// Close stops the node without a crash: it stops accepting messages, lets
// the executor run every event already queued (timers that fall due
// afterwards never run), stops the outbound side (frames still queued are
// discarded), and closes the disk, which keeps everything the process
// synced. It returns the disk's close error. Close must not be called from
// the executor (inside Do or process code). Calling it again does nothing.
func (n *Node) Close() error {
	var err error
	n.close.Do(func() {
		n.tr.stopInbound()
		n.exec.close()
		n.tr.stopOutbound()
		err = n.disk.Close()
		releaseProc()
	})
	return err
}

// env is the process's view of its node. Its methods are called on the
// executor only.
type env struct {
	n     *Node
	log   *slog.Logger
	rng   *rand.Rand
	clock *realclock.Clock
}

var _ process.Env = (*env)(nil)

func (e *env) ID() process.NodeID   { return e.n.cfg.ID }
func (e *env) Name() string         { return e.n.cfg.Name }
func (e *env) Clock() process.Clock { return e.clock }
func (e *env) Disk() process.Disk   { return e.n.pdisk }
func (e *env) Rand() *rand.Rand     { return e.rng }
func (e *env) Log() *slog.Logger    { return e.log }

// nodeDisk is the node's file disk as its process sees it: a SyncThen's
// done runs on the executor, as an event of the process, not on the
// disk's writer goroutine.
type nodeDisk struct {
	*filedisk.Disk
	exec *executor
}

var _ process.SyncNotifier = (*nodeDisk)(nil)

// SyncThen implements process.SyncNotifier. A done that completes after
// the node began closing is dropped, as a stopped machine's would be.
func (d *nodeDisk) SyncThen(done func()) bool {
	return d.Disk.SyncThen(func() { d.exec.post(done) })
}

// Send delivers a message to the node itself through the executor's
// queue (after the current event, as the simulator does), offers it to
// Config.Local, or queues it for the network; it never blocks.
func (e *env) Send(to process.NodeID, m process.Message) {
	n := e.n
	switch {
	case to == n.cfg.ID:
		n.deliver(to, m)
	case n.cfg.Local != nil && n.cfg.Local(to, m):
	default:
		n.tr.send(to, m)
	}
}
