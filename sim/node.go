package sim

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/process"
)

// NodeState is where a node is in its lifecycle.
type NodeState uint8

const (
	// Up: the process runs.
	Up NodeState = iota
	// Paused: the process runs nothing (a GC or stop-the-world pause);
	// messages and timers that fall due are held and delivered in order on
	// resume; its clock keeps running.
	Paused
	// Crashed: memory, timers and in-flight messages to it are gone; its disk
	// holds only synced writes.
	Crashed
)

func (s NodeState) String() string {
	switch s {
	case Up:
		return "up"
	case Paused:
		return "paused"
	case Crashed:
		return "crashed"
	}
	return "state?"
}

// node is one simulated machine: a process, its clock, disk and random
// stream, and its lifecycle.
type node struct {
	w          *World
	id         NodeID
	name       string
	newProcess func() Process
	proc       Process
	batcher    bool // proc is a process.Batcher
	clock      *fakeclock.Clock
	disk       *Disk
	rng        *rand.Rand
	log        *slog.Logger

	state       NodeState
	epoch       uint32        // incarnation: bumped by every crash
	pausedUntil time.Duration // while Paused
	held        []event       // events that fell due while Paused, in order
	syncDelay   time.Duration // a slow disk: each Sync of the process stalls the node this long
	outbox      []outgoing    // sent after a slow Sync, leaving when the stall ends

	crashes, pauses, stalls int
	crashedAt               time.Duration // true time of the latest crash
}

// synced is told of every Sync of n's disk. A Sync made by n's process
// during one of its events, on a slow disk, stalls n: the stall grows by
// the sync delay, n is paused until it ends, and the sync completes then.
func (n *node) synced() (time.Duration, bool) {
	w := n.w
	if n.syncDelay <= 0 || w.running != n {
		return 0, false
	}
	w.stall += n.syncDelay
	w.pauseUntil(n, w.now+w.stall)
	n.stalls++
	return w.now + w.stall, true
}

// outgoing is a message waiting in a stalled node's outbox.
type outgoing struct {
	to  NodeID
	msg Message
}

// nodeEnv is the Env a node's process sees. It is a distinct type so that a
// process cannot reach the World, and it hands out the node's
// fakeclock.Clock and Disk as process.Clock and process.Disk, so that their
// fault controls (drift, wall jumps, dropped timers, crashes) stay out of
// the process's reach.
type nodeEnv struct{ n *node }

// The simulator implements the process contract.
var (
	_ process.Env          = nodeEnv{}
	_ process.Clock        = (*fakeclock.Clock)(nil)
	_ process.Disk         = (*Disk)(nil)
	_ process.SyncNotifier = (*Disk)(nil)
)

func (e nodeEnv) ID() NodeID           { return e.n.id }
func (e nodeEnv) Name() string         { return e.n.name }
func (e nodeEnv) Clock() process.Clock { return e.n.clock }
func (e nodeEnv) Disk() process.Disk   { return e.n.disk }
func (e nodeEnv) Rand() *rand.Rand     { return e.n.rng }
func (e nodeEnv) Log() *slog.Logger    { return e.n.log }
func (e nodeEnv) Send(to NodeID, msg Message) {
	e.n.w.send(e.n, to, msg)
}

// scheduler adapts a node to fakeclock.Scheduler: the clock's timers become
// timer events addressed to the node, so they obey pauses and crashes.
type scheduler struct{ n *node }

func (s scheduler) TrueNow() time.Duration { return s.n.w.now }

func (s scheduler) Schedule(at time.Duration, h fakeclock.Handler) uint64 {
	w := s.n.w
	if at < w.now {
		w.failf("timer scheduled in the past: %v < now", at)
	}
	id := w.timers.alloc(h)
	w.room()
	w.queue.push(event{at: at, kind: evTimer, node: s.n.id, epoch: s.n.epoch, id: id})
	return id
}

func (s scheduler) Cancel(id uint64) bool { return s.n.w.timers.free(id) }

// fireFunc is a node event that runs a function: a disk's completed
// asynchronous sync (Disk.SyncThen), which obeys pauses and crashes as
// timers do but not the node's clock faults (the disk keeps true time).
type fireFunc func()

func (f fireFunc) Fire(uint64) { f() }

// timerTable tracks which timer ids are still pending, and what each runs,
// without a map: an id packs a slot index and the slot's generation, so a
// cancelled timer's event is recognised as stale when it pops, and slots
// are reused without allocating. The handler lives in the slot rather than
// in the event, which keeps events narrow and needs no closure per timer.
type timerTable struct {
	slots    []timerSlot
	freeList []uint32
}

// timerSlot is one entry of the timer table.
type timerSlot struct {
	gen uint32            // current generation; odd = pending
	h   fakeclock.Handler // what the pending timer runs; nil once retired
}

func (t *timerTable) alloc(h fakeclock.Handler) uint64 {
	var slot uint32
	if n := len(t.freeList); n > 0 {
		slot = t.freeList[n-1]
		t.freeList = t.freeList[:n-1]
	} else {
		slot = uint32(len(t.slots))
		t.slots = append(t.slots, timerSlot{})
	}
	s := &t.slots[slot]
	s.gen++ // now odd: pending
	s.h = h
	return uint64(slot)<<32 | uint64(s.gen)
}

// pending reports whether id is still due to fire.
func (t *timerTable) pending(id uint64) bool {
	slot, gen := uint32(id>>32), uint32(id)
	return int(slot) < len(t.slots) && t.slots[slot].gen == gen && gen%2 == 1
}

// take retires id and returns its handler, or nil if it was not pending.
func (t *timerTable) take(id uint64) fakeclock.Handler {
	if !t.pending(id) {
		return nil
	}
	s := &t.slots[uint32(id>>32)]
	h := s.h
	s.gen++ // now even: retired
	s.h = nil
	t.freeList = append(t.freeList, uint32(id>>32))
	return h
}

// free retires id; it reports whether the timer was pending.
func (t *timerTable) free(id uint64) bool { return t.take(id) != nil }
