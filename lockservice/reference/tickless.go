package reference

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Raft counts its timeouts in ticks of TickInterval on the replica's
// monotonic clock, but most ticks only count: a follower acts once its
// election timeout (10–20 ticks) passes without a leader, a leader at its
// heartbeat (every 2 ticks), its CheckQuorum check and the end of a
// leadership transfer. So the replica is tickless: one timer, armed for
// the next tick that may act (raft.Node.TicksToDeadline), and the ticks
// before it are delivered as they are needed — before a Raft message is
// stepped (Step reads the election count for the leader lease), before a
// transfer starts, and when the timer fires. A follower's deadline moves
// later with every heartbeat; its timer is not re-armed for that, it wakes
// at the old deadline, finds it passed without acting, and sleeps on. It
// is re-armed at once only when a deadline moves earlier (a new leader's
// first heartbeat). The ticks land on the same grid as a fixed ticker's —
// counted from the last tick that acted — and Raft draws its randomized
// election timeouts from the run's seeded stream exactly as before; only
// the timer events, which do nothing, are gone.
//
// Pauses. A replica paused across its deadline (a GC or stop-the-world
// pause, a slow disk) fires that deadline once when it wakes, and counts on
// from then: the ticks up to the deadline count, those after it are
// dropped, as a Go timer that fires late once and a ticker that drops the
// ticks its reader missed (etcd's) do. So a follower that was paused past
// its election timeout campaigns (a pre-vote, harmless to a live leader)
// when it wakes unless a message delivered before its timer — the runtime
// delivers what fell due during a pause in its original order — told it of
// a leader first; a leader sends its heartbeat at once and counts two
// ticks at most towards CheckQuorum, so a pause alone never makes it step
// down. The fixed ticker this replaces counted one tick per wake-up, which
// delayed a paused follower's campaign by up to its whole timeout.
type raftClock struct {
	timer clockwork.Timer
	// base is the monotonic reading of the last tick delivered to Raft;
	// due is the monotonic reading the timer is armed for, never after
	// the deadline base + TicksToDeadline()·TickInterval.
	base, due time.Duration
}

// startClock arms the timer for the fresh node's first deadline.
func (r *Replica) startClock() {
	now := r.env.Clock().Monotonic()
	r.clock.base = now
	r.clock.due = r.deadline()
	r.clock.timer = r.env.Clock().AfterFunc(r.clock.due-now, r.onDeadline)
}

// deadline is the monotonic reading of the next tick that may act.
func (r *Replica) deadline() time.Duration {
	return r.clock.base + time.Duration(r.node.TicksToDeadline())*r.cfg.TickInterval
}

// catchUp delivers the ticks that passed since the last one, up to but not
// including the deadline's own tick, which is the timer's to deliver (it is
// due now). Past the deadline — the replica was paused — the ticks after
// it are dropped: the grid restarts one tick before now, so that the
// deadline's tick is the only one pending.
func (r *Replica) catchUp() {
	now := r.env.Clock().Monotonic()
	passed := int((now - r.clock.base) / r.cfg.TickInterval)
	if passed == 0 {
		return
	}
	quiet := r.node.TicksToDeadline() - 1
	if passed > quiet {
		r.quietTicks(quiet)
		r.clock.base = now - r.cfg.TickInterval
		return
	}
	r.quietTicks(passed)
	r.clock.base += time.Duration(passed) * r.cfg.TickInterval
}

// quietTicks delivers n ticks that TicksToDeadline promised only count.
func (r *Replica) quietTicks(n int) {
	for range n {
		r.node.Tick()
	}
}

// onDeadline runs when the timer fires: at the deadline it was armed for
// or, after a pause, later. If the deadline has moved later meanwhile (a
// follower heard from its leader), it delivers the ticks that passed and
// sleeps on; otherwise it delivers the deadline's tick — once, however
// late — and counts the next ticks from now.
func (r *Replica) onDeadline() {
	now := r.env.Clock().Monotonic()
	passed := int((now - r.clock.base) / r.cfg.TickInterval)
	if k := r.node.TicksToDeadline(); passed < k {
		r.quietTicks(passed)
		r.clock.base += time.Duration(passed) * r.cfg.TickInterval
	} else {
		r.quietTicks(k - 1)
		r.node.Tick()
		r.clock.base = now
		r.flush()
	}
	r.timers.Tick(r.env)
	r.rearm(true)
}

// rearm arms the timer for the deadline if it moved earlier than the timer
// (or always, from the timer's own callback). A deadline that moved later
// is left to the timer, which finds it not reached and sleeps on: a
// follower's deadline moves with every heartbeat, and re-arming a timer
// costs as much as the wake-up it would save.
func (r *Replica) rearm(always bool) {
	if r.clock.timer == nil {
		return // Start's first flush: startClock arms it
	}
	due := r.deadline()
	if !always && due >= r.clock.due {
		return
	}
	r.clock.due = due
	r.clock.timer.Reset(due - r.env.Clock().Monotonic())
}
