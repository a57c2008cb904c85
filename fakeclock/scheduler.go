package fakeclock

import "time"

// Scheduler is what a Clock needs from the simulator: the current true time
// and a way to run an event at a later true time, on the simulation thread.
//
// True time is virtual: nanoseconds since the start of the run, identical for
// every node. A node's clock derives its own readings from it. The simulator
// gives each node its own Scheduler so that timers obey the node's lifecycle
// (they are held while the node is paused and vanish when it crashes).
type Scheduler interface {
	// TrueNow returns the current true time.
	TrueNow() time.Duration
	// Schedule arranges for h.Fire(id) to run at true time at
	// (at ≥ TrueNow()), id being the value it returns, which Cancel
	// accepts. Ids are never reused within a run. It never runs h itself.
	Schedule(at time.Duration, h Handler) uint64
	// Cancel stops the event with the given id from running. It reports
	// whether the event was still pending.
	Cancel(id uint64) bool
}

// Handler is what a Scheduler runs when an event falls due. A Clock hands
// its timers over as Handlers rather than as closures, so arming or
// re-arming a timer allocates nothing; the scheduler keeps h with the event
// and gives the event's id back to Fire, from which the timer tells its
// current event from one it has replaced.
type Handler interface {
	// Fire runs the event that Schedule returned id for.
	Fire(id uint64)
}
