package fakeclock

import "time"

// Scheduler is what a Clock needs from the simulator: the current true time
// and a way to run a callback at a later true time, on the simulation thread.
//
// True time is virtual: nanoseconds since the start of the run, identical for
// every node. A node's clock derives its own readings from it. The simulator
// gives each node its own Scheduler so that timers obey the node's lifecycle
// (they are held while the node is paused and vanish when it crashes).
type Scheduler interface {
	// TrueNow returns the current true time.
	TrueNow() time.Duration
	// Schedule runs f at true time at (at ≥ TrueNow()) and returns an id
	// that Cancel accepts. Ids are never reused within a run.
	Schedule(at time.Duration, f func()) uint64
	// Cancel stops the callback with the given id from running. It reports
	// whether the callback was still pending.
	Cancel(id uint64) bool
}
