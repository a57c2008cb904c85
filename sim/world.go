// Package sim is fencesim's deterministic discrete-event simulator: the only
// loop of a run. Virtual time, one root seed, nodes hosting processes, a
// network that delays, loses, duplicates and partitions, per-node clocks,
// disks that lose (or tear) unsynced writes and may sync slowly, pauses,
// crashes and restarts, and a trace whose 64-bit hash identifies the run.
// Same seed and same code ⇒ same trace, byte for byte.
//
// Everything runs on the caller's goroutine: no goroutines, channels,
// mutexes, wall-clock reads or global randomness (a test reads this
// package's syntax to keep it so).
package sim

import (
	"fmt"
	"github.com/fencesim/fencesim/process"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
)

// Config is what a World is built from.
type Config struct {
	// Seed is the root of every random draw of the run.
	Seed uint64
	// Network sets latency, loss, duplication and reordering.
	Network NetworkConfig
	// Trace, if set, receives one readable line per fired event and every
	// process log record, each carrying step, node and virtual time.
	Trace io.Writer
	// Limits bound what the run may hold at once (zero fields: the
	// defaults); a run that reaches one stops with Exhausted.
	Limits Limits
}

// Outcome says why Run returned.
type Outcome uint8

const (
	// Quiescent: no event is left.
	Quiescent Outcome = iota
	// Deadline: the next event lies beyond the requested time.
	Deadline
	// StepLimit: the step budget ran out; a livelock or a runaway timer.
	StepLimit
	// Exhausted: a limit on what the run may hold was reached (see Limits
	// and World.Cut); the run cannot go on.
	Exhausted
)

func (o Outcome) String() string {
	return [...]string{"quiescent", "deadline", "step-limit", "exhausted"}[o]
}

// World is one simulation run.
type World struct {
	now    time.Duration
	step   uint64
	queue  queue
	timers timerTable
	root   *rand.Rand
	net    network
	nodes  []*node
	trace  *tracer

	actionNames []string

	limits Limits
	// cut is the limit that stopped the run (nil while none has).
	cut *LimitError
	// parked counts the events paused nodes hold and the messages stalled
	// nodes keep in their outboxes: waiting, like the queue's.
	parked int
	// peak is the most events that have waited at once.
	peak int
	// action is 1 + the index of the harness action running now, 0 if
	// none: a panic names it.
	action int

	// running is the node whose process code runs now (nil between
	// events and during harness actions; process events never nest), and
	// stall how long its Syncs have stalled it during the current event:
	// what it sends leaves only when the stall ends.
	running *node
	stall   time.Duration
	// batch is the node whose batch of events is open: a process.Batcher
	// that ran an event. Its batch ends (EndBatch) before the loop fires
	// an event that is not another delivery or timer of that node at the
	// same instant — the events the real runtime would have found queued
	// together (a burst, what a pause or a stall held back).
	batch *node
}

// New builds an empty World. The network draws its random stream first;
// every node then draws its own in the order it is added.
func New(cfg Config) (*World, error) {
	if err := cfg.Network.Validate(); err != nil {
		return nil, err
	}
	w := &World{root: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5DEECE66D)), limits: cfg.Limits.withDefaults()}
	w.trace = newTracer(cfg.Trace, w.limits.TraceBytes, w)
	w.net = network{cfg: cfg.Network, rng: w.Stream()}
	return w, nil
}

// Stream returns a new random stream seeded from the root stream. Components
// call it once, at construction, in a fixed order; later draws of one stream
// never shift another's.
func (w *World) Stream() *rand.Rand {
	return rand.New(rand.NewPCG(w.root.Uint64(), w.root.Uint64()))
}

// Now returns the current true time.
func (w *World) Now() time.Duration { return w.now }

// Step returns the number of events fired so far.
func (w *World) Step() uint64 { return w.step }

// Hash returns the trace hash: every fired event folded in order.
func (w *World) Hash() uint64 { return w.trace.hash }

// AddNode adds a node named name whose process is built by newProcess, now
// and at every restart (a crash loses the process's memory). The process
// starts at the current time. The clock config must be valid.
func (w *World) AddNode(name string, newProcess func() Process, clock fakeclock.Config) (NodeID, error) {
	if err := clock.Validate(); err != nil {
		return 0, fmt.Errorf("sim: node %q: %w", name, err)
	}
	n := &node{w: w, id: NodeID(len(w.nodes)), name: name, newProcess: newProcess, disk: newDisk()}
	n.disk.onSync = n.synced
	n.disk.now = w.Now
	n.disk.asyncDelay = func() time.Duration { return n.syncDelay }
	n.disk.schedule = func(at time.Duration, fire func()) { scheduler{n}.Schedule(at, fireFunc(fire)) }
	n.disk.maxBytes = w.limits.DiskBytes
	n.disk.full = func() { w.Exhaust("disk bytes of node "+name, w.limits.DiskBytes) }
	n.rng = w.Stream()
	n.clock = fakeclock.New(scheduler{n}, clock)
	n.log = slog.New(w.trace.handler(n))
	w.nodes = append(w.nodes, n)
	w.net.grow(len(w.nodes))
	w.room()
	w.queue.push(event{at: w.now, kind: evStart, node: n.id})
	return n.id, nil
}

// Node IDs and names.

// Nodes returns how many nodes the world has.
func (w *World) Nodes() int { return len(w.nodes) }

// Name returns node id's name.
func (w *World) Name(id NodeID) string { return w.node(id).name }

// Clock returns node id's clock, for the harness to skew or jump.
func (w *World) Clock(id NodeID) *fakeclock.Clock { return w.node(id).clock }

// Disk returns node id's disk, for inspection by the harness.
func (w *World) Disk(id NodeID) *Disk { return w.node(id).disk }

// CrashedAt returns the true time of node id's latest crash; ok is false
// if it never crashed.
func (w *World) CrashedAt(id NodeID) (at time.Duration, ok bool) {
	n := w.node(id)
	return n.crashedAt, n.crashes > 0
}

// State returns node id's lifecycle state.
func (w *World) State(id NodeID) NodeState { return w.node(id).state }

// Process returns the process currently running on node id (nil while
// crashed), for the harness to inspect after a run.
func (w *World) Process(id NodeID) Process { return w.node(id).proc }

func (w *World) node(id NodeID) *node {
	if id < 0 || int(id) >= len(w.nodes) {
		w.failf("no node %d", id)
	}
	return w.nodes[id]
}

// At schedules a harness callback at true time at (clamped to now). It runs
// whatever the state of any node: scripted faults and workload drivers use it.
func (w *World) At(at time.Duration, name string, fn func()) {
	if at < w.now {
		at = w.now
	}
	w.actionNames = append(w.actionNames, name)
	w.room()
	w.queue.push(event{at: at, kind: evAction, id: uint64(len(w.actionNames) - 1), fn: fn, node: -1})
}

// Run fires events in (time, sequence) order until the queue drains, the
// next event lies after until, or limit steps have fired. On Deadline the
// clock is advanced to until. A run that reached one of its Limits returns
// Exhausted, then and ever after. A panic during the run comes out as a
// *Panic naming the step, the virtual time and the node. It is the only
// loop in a simulation.
func (w *World) Run(until time.Duration, limit uint64) (out Outcome) {
	if w.cut != nil {
		return Exhausted
	}
	defer w.recoverRun(&out)
	return w.loop(until, limit)
}

// loop is Run's loop, kept apart from Run's deferred recover: with both in
// one function, BenchmarkLoop100 measured several percent slower.
func (w *World) loop(until time.Duration, limit uint64) Outcome {
	for fired := uint64(0); ; fired++ {
		if w.batch != nil && !w.continuesBatch() {
			w.endBatch()
		}
		at, ok := w.queue.peekAt()
		if !ok {
			return Quiescent
		}
		if at > until {
			if until > w.now { // never back: until may lie before now
				w.now = until
			}
			return Deadline
		}
		if fired >= limit {
			return StepLimit
		}
		ev, _ := w.queue.pop()
		if ev.at < w.now {
			w.failf("time went backwards: event at %v", ev.at)
		}
		w.now = ev.at
		w.step++
		w.fire(ev)
	}
}

// continuesBatch reports whether the next event belongs to the open
// batch: a delivery or timer of the batch's node at this instant.
func (w *World) continuesBatch() bool {
	ev, ok := w.queue.peek()
	return ok && ev.at == w.now && ev.node == w.batch.id && (ev.kind == evDeliver || ev.kind == evTimer)
}

// endBatch tells the open batch's process that its batch has run
// (process.Batcher), if it is still up: a paused node's batch goes on when
// it resumes, a crashed one's is gone.
func (w *World) endBatch() {
	n := w.batch
	w.batch = nil
	if n.state != Up || n.proc == nil {
		return
	}
	w.running, w.stall = n, 0
	n.proc.(process.Batcher).EndBatch(nodeEnv{n})
	w.running = nil
}

// ran notes that n's process ran an event: a Batcher's batch is open.
func (w *World) ran(n *node) {
	if n.batcher {
		w.batch = n
	}
}

// fire carries out one event.
func (w *World) fire(ev event) {
	var n *node
	if ev.kind != evAction {
		n = w.nodes[ev.node]
		if ev.epoch != n.epoch || n.state == Crashed {
			// Addressed to an incarnation that no longer exists.
			if ev.kind == evTimer {
				w.timers.free(ev.id)
			}
			if ev.kind == evDeliver {
				w.net.dropped++
			}
			w.trace.record(w, &ev, "stale")
			return
		}
		if n.state == Paused && ev.kind != evResume {
			w.room()
			w.parked++
			n.held = append(n.held, ev)
			w.trace.record(w, &ev, "held")
			return
		}
	}
	switch ev.kind {
	case evStart:
		w.trace.record(w, &ev, "")
		n.proc = n.newProcess()
		_, n.batcher = n.proc.(process.Batcher)
		w.running, w.stall = n, 0
		n.proc.Start(nodeEnv{n})
		w.running = nil
		w.ran(n)
	case evDeliver:
		if n.proc == nil {
			// Restarted at this very instant; its Start event is still
			// queued, so there is no process to receive the message yet.
			w.net.dropped++
			w.trace.record(w, &ev, "stale")
			return
		}
		if w.net.isBlocked(ev.from, ev.node) {
			w.net.dropped++
			w.trace.record(w, &ev, "blocked")
			return
		}
		w.net.delivered++
		w.trace.record(w, &ev, "")
		w.running, w.stall = n, 0
		n.proc.Receive(nodeEnv{n}, ev.from, ev.msg)
		w.running = nil
		w.ran(n)
	case evTimer:
		h := w.timers.take(ev.id)
		if h == nil {
			return // cancelled: not an event of the run
		}
		w.trace.record(w, &ev, "")
		w.running, w.stall = n, 0
		h.Fire(ev.id)
		w.running = nil
		w.ran(n)
	case evResume:
		if n.state != Paused || w.now < n.pausedUntil {
			return // superseded by a longer pause, or by a crash
		}
		w.trace.record(w, &ev, "")
		n.state = Up
		// What the process sent after a slow Sync leaves now.
		out := n.outbox
		n.outbox = nil
		w.parked -= len(out) + len(n.held)
		for _, o := range out {
			w.transmit(n, o.to, o.msg)
		}
		held := n.held
		n.held = nil
		// What fell due during the pause happens now, in its original
		// order, before anything else due at this instant reaches the node.
		for _, h := range held {
			h.at = w.now
			w.step++
			w.fire(h)
		}
	case evAction:
		w.trace.record(w, &ev, w.actionNames[ev.id])
		w.action = int(ev.id) + 1
		ev.fn()
		w.action = 0
	default:
		w.failf("unknown event kind %d", ev.kind)
	}
}

// send puts a message on the wire from n. A message sent after a stalled
// Sync of the same event waits in n's outbox until the stall ends: it
// leaves only if n is still alive then, so a crash during a slow sync
// takes back every answer that depended on it.
func (w *World) send(n *node, to NodeID, msg Message) {
	w.node(to)
	w.net.sent++
	if w.running == n && w.stall > 0 {
		w.room()
		w.parked++
		n.outbox = append(n.outbox, outgoing{to: to, msg: msg})
		return
	}
	w.transmit(n, to, msg)
}

// transmit decides a message's fate on the network and queues its
// delivery.
func (w *World) transmit(n *node, to NodeID, msg Message) {
	dst := w.nodes[to]
	f := w.net.decide()
	if w.net.isBlocked(n.id, to) || f.lost {
		w.net.dropped++
		return
	}
	if f.copies == 2 {
		w.net.duplicated++
	}
	for i := range f.copies {
		w.room()
		w.queue.push(event{at: w.now + f.latency[i], kind: evDeliver, node: to, from: n.id, epoch: dst.epoch, msg: msg})
	}
}

// Pause stops node id for d of true time: nothing runs on it; what falls due
// is held and delivered in order when it resumes. Pausing a paused node
// extends the pause to whichever ends later. Pausing a crashed node does
// nothing.
func (w *World) Pause(id NodeID, d time.Duration) {
	n := w.node(id)
	if d > 0 && w.pauseUntil(n, w.now+d) {
		n.pauses++
	}
}

// pauseUntil pauses n until true time until, unless it is crashed or
// already paused at least as long; it reports whether it did.
func (w *World) pauseUntil(n *node, until time.Duration) bool {
	if n.state == Crashed || until <= w.now {
		return false
	}
	if n.state == Paused && until <= n.pausedUntil {
		return false
	}
	n.state, n.pausedUntil = Paused, until
	w.room()
	w.queue.push(event{at: until, kind: evResume, node: n.id, epoch: n.epoch})
	return true
}

// Crash kills node id: its process's memory, timers, held events and the
// messages in flight to it are gone; its disk keeps only synced writes.
func (w *World) Crash(id NodeID) {
	n := w.node(id)
	if w.kill(n) {
		n.disk.crash()
	}
}

// CrashTorn is Crash with a torn write: if the last change to node id's
// disk since its last Sync was a non-empty Write or Append, a prefix of
// what it wrote survives instead of nothing — the first floor(len·keep)
// bytes, always fewer than all of them, durably, as when power fails
// halfway through a write (after an Append, behind what the key held
// before it). Every other unsynced write is lost. keep must lie in [0, 1).
func (w *World) CrashTorn(id NodeID, keep float64) {
	n := w.node(id)
	if !(keep >= 0 && keep < 1) {
		w.failf("CrashTorn(%s, %v): keep must lie in [0, 1)", n.name, keep)
	}
	if w.kill(n) {
		n.disk.crashTorn(keep)
	}
}

// kill takes n down, leaving its disk to the caller; it reports false if n
// was already crashed.
func (w *World) kill(n *node) bool {
	if n.state == Crashed {
		return false
	}
	n.state = Crashed
	n.epoch++
	n.crashes++
	n.crashedAt = w.now
	n.proc = nil
	for _, h := range n.held {
		switch h.kind {
		case evTimer:
			w.timers.free(h.id)
		case evDeliver:
			w.net.dropped++ // addressed to the incarnation that just died
		}
	}
	w.parked -= len(n.held) + len(n.outbox)
	n.held = nil
	w.net.dropped += len(n.outbox) // never left: the sync they waited for never completed
	n.outbox = nil
	n.clock.DropTimers()
	return true
}

// SetSyncDelay gives node id a slow disk: from now on, every Sync its
// process makes stalls the node for d of true time — a pause of d starting
// at the Sync (Pause semantics: what falls due meanwhile is held) — and
// every message the process sends after that Sync, within the same event,
// leaves only when the stall ends. Several Syncs in one event add up. The
// process's own clock readings and timers within that event still see the
// instant of the Sync. Syncs made by the harness (World.Disk) never stall.
// d = 0 makes the disk fast again; d must not be negative.
func (w *World) SetSyncDelay(id NodeID, d time.Duration) {
	n := w.node(id)
	if d < 0 {
		w.failf("SetSyncDelay(%s, %v): the delay must not be negative", n.name, d)
	}
	n.syncDelay = d
}

// SyncDelay returns node id's sync delay (0: a fast disk).
func (w *World) SyncDelay(id NodeID) time.Duration { return w.node(id).syncDelay }

// Restart boots a crashed node again: a fresh process, started now, with
// what its disk had synced. Restarting a live node does nothing.
func (w *World) Restart(id NodeID) {
	n := w.node(id)
	if n.state != Crashed {
		return
	}
	n.state = Up
	w.room()
	w.queue.push(event{at: w.now, kind: evStart, node: id, epoch: n.epoch})
}

// Block drops every message on the directed link from → to, including those
// already in flight when they arrive.
func (w *World) Block(from, to NodeID) {
	w.node(from)
	w.node(to)
	w.net.setBlocked(from, to, true)
}

// Unblock reopens the directed link from → to.
func (w *World) Unblock(from, to NodeID) {
	w.node(from)
	w.node(to)
	w.net.setBlocked(from, to, false)
}

// Partition blocks every link between the two sides, both ways.
func (w *World) Partition(a, b []NodeID) {
	for _, x := range a {
		for _, y := range b {
			w.Block(x, y)
			w.Block(y, x)
		}
	}
}

// Heal reopens every link.
func (w *World) Heal() { clear(w.net.blocked) }

// Blocked reports whether the directed link from → to drops everything.
func (w *World) Blocked(from, to NodeID) bool {
	w.node(from)
	w.node(to)
	return w.net.isBlocked(from, to)
}

// Network returns the network's current behaviour, so that a fault can
// change one setting and later restore what was there.
func (w *World) Network() NetworkConfig { return w.net.cfg }

// SetNetwork replaces the network's behaviour from now on (faults change
// loss and latency mid-run).
func (w *World) SetNetwork(cfg NetworkConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	w.net.cfg = cfg
	return nil
}

// Stats summarises a run so far.
type Stats struct {
	Steps   uint64
	Now     time.Duration
	Network NetworkStats
	Crashes int
	Pauses  int
	Stalls  int // slow-disk stalls: Syncs that paused their node
	// PeakPending is the most events that waited at once (what
	// Limits.Pending bounds), PeakDiskBytes the most one disk held.
	PeakPending, PeakDiskBytes int
}

// Stats returns the run's counters.
func (w *World) Stats() Stats {
	s := Stats{Steps: w.step, Now: w.now, PeakPending: w.peak, Network: NetworkStats{
		Sent: w.net.sent, Delivered: w.net.delivered, Dropped: w.net.dropped, Duplicated: w.net.duplicated,
	}}
	for _, n := range w.nodes {
		s.Crashes += n.crashes
		s.Pauses += n.pauses
		s.Stalls += n.stalls
		s.PeakDiskBytes = max(s.PeakDiskBytes, n.disk.peak)
	}
	return s
}

// failf panics on a broken invariant or a programmer error, naming the step
// and virtual time so the failure can be found again from its seed.
func (w *World) failf(format string, args ...any) {
	panic(fmt.Sprintf("sim: step %d at %v: %s", w.step, w.now, fmt.Sprintf(format, args...)))
}
