package inject

import (
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/sim"
)

// Coverage is what an installed schedule needs to count the nemesis's
// coverage marks (package coverage): the run's counts, its lease TTL (for
// "wall jumps of 1–4 TTLs") and which nodes are the lock service's and the
// store. The nemesis only looks: it reads the world and the processes'
// state, never changes them, so counting leaves the trace as it was.
type Coverage struct {
	Marks   *coverage.Counts
	TTL     time.Duration
	Servers []sim.NodeID
	Store   sim.NodeID
}

// leaderProcess is a service process that elects a leader
// (lockservice.Leader).
type leaderProcess interface {
	IsLeader() (leads bool, term uint64)
}

// holderProcess is a client that can say whether it believes it holds its
// lock (the harness's workload client).
type holderProcess interface {
	Held() bool
}

// persister is a process that can say when it last wrote a vote and log
// entries to its disk, on its monotonic clock (the reference replica).
type persister interface {
	LastPersist() (vote, entries time.Duration)
}

// snapshotter is a process that can say when it last wrote a snapshot,
// on its monotonic clock (the reference replica).
type snapshotter interface {
	LastSnapshot() time.Duration
}

// crashWindow is how soon after a vote or an append a crash counts as
// "right after" it: a heartbeat of the reference's defaults.
const crashWindow = 20 * time.Millisecond

// leader is the live server that leads with the highest term.
func (c *Coverage) leader(w *sim.World) (sim.NodeID, bool) {
	best, bestTerm, found := sim.NodeID(0), uint64(0), false
	for _, id := range c.Servers {
		p, ok := w.Process(id).(leaderProcess)
		if !ok || w.State(id) == sim.Crashed {
			continue
		}
		if lead, term := p.IsLeader(); lead && (!found || term > bestTerm) {
			best, bestTerm, found = id, term, true
		}
	}
	return best, found
}

func (c *Coverage) isServer(id sim.NodeID) bool {
	for _, s := range c.Servers {
		if s == id {
			return true
		}
	}
	return false
}

// beforeCrash marks what a crash of id is about to interrupt.
func (c *Coverage) beforeCrash(w *sim.World, id sim.NodeID) {
	if c == nil || c.Marks == nil || w.State(id) == sim.Crashed {
		return
	}
	if lead, ok := c.leader(w); ok && lead == id {
		c.Marks.Hit(coverage.CrashLeader)
	}
	if p, ok := w.Process(id).(persister); ok {
		vote, entries := p.LastPersist()
		now := w.Clock(id).Monotonic()
		unsynced := w.Disk(id).Dirty() > 0
		if vote > 0 && now-vote <= crashWindow {
			c.Marks.Hit(pick(unsynced, coverage.CrashAfterVoteUnsynced, coverage.CrashAfterVoteSynced))
		}
		if entries > 0 && now-entries <= crashWindow {
			c.Marks.Hit(pick(unsynced, coverage.CrashAfterAppendUnsynced, coverage.CrashAfterAppendSynced))
		}
	}
	if p, ok := w.Process(id).(snapshotter); ok {
		if at := p.LastSnapshot(); at > 0 && w.Clock(id).Monotonic()-at <= crashWindow {
			c.Marks.Hit(coverage.CrashAfterSnapshot)
		}
	}
	if id == c.Store && c.holderPaused(w) {
		c.Marks.Hit(coverage.StoreCrashHolderPaused)
	}
}

// afterCrash marks a crash that left a majority of the servers down.
func (c *Coverage) afterCrash(w *sim.World, id sim.NodeID) {
	if c == nil || c.Marks == nil || !c.isServer(id) {
		return
	}
	down := 0
	for _, s := range c.Servers {
		if w.State(s) == sim.Crashed {
			down++
		}
	}
	if down >= len(c.Servers)/2+1 {
		c.Marks.Hit(coverage.CrashMajority)
	}
}

func pick(cond bool, a, b coverage.Mark) coverage.Mark {
	if cond {
		return a
	}
	return b
}

// holderPaused reports whether a client that believes it holds its lock
// is paused now.
func (c *Coverage) holderPaused(w *sim.World) bool {
	for id := range w.Nodes() {
		if h, ok := w.Process(sim.NodeID(id)).(holderProcess); ok && w.State(sim.NodeID(id)) == sim.Paused && h.Held() {
			return true
		}
	}
	return false
}

// pause marks a pause of a holder.
func (c *Coverage) pause(w *sim.World, id sim.NodeID) {
	if c == nil || c.Marks == nil {
		return
	}
	if h, ok := w.Process(id).(holderProcess); ok && h.Held() {
		c.Marks.Hit(coverage.PauseHolder)
	}
}

// jump marks a wall jump of 1–4 TTLs on the leader or a client.
func (c *Coverage) jump(w *sim.World, id sim.NodeID, by time.Duration) {
	if c == nil || c.Marks == nil || c.TTL <= 0 {
		return
	}
	by = max(by, -by)
	if by < c.TTL || by >= 5*c.TTL {
		return
	}
	if lead, ok := c.leader(w); ok && lead == id {
		c.Marks.Hit(coverage.WallJumpLeader)
	}
	if _, ok := w.Process(id).(holderProcess); ok {
		c.Marks.Hit(coverage.WallJumpClient)
	}
}

// network marks a link fault that left the leader unable to reach a
// majority of the servers (itself included).
func (c *Coverage) network(w *sim.World) {
	if c == nil || c.Marks == nil {
		return
	}
	lead, ok := c.leader(w)
	if !ok {
		return
	}
	reach := 0
	for _, s := range c.Servers {
		if s == lead || !w.Blocked(lead, s) {
			reach++
		}
	}
	if reach < len(c.Servers)/2+1 {
		c.Marks.Hit(coverage.PartitionLeader)
	}
}
