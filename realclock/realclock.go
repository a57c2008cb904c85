// Package realclock is the machine's clock as a process.Clock, for running
// process code outside the simulator.
//
// It is clockwork's real clock with two changes that make it honour the
// contract the simulator's clock keeps. Monotonic is measured from the
// clock's creation on Go's monotonic clock. Now, Since and Until are wall
// readings only: time.Now carries a monotonic reading too, and Go compares
// two such times by it, so a deadline taken from Now (a Redlock key's
// expiry, a wall-clock lease) would ignore a step of the wall clock on a
// real machine although it sees one in the simulator. Now strips it, so
// wall-clock code meets the same hazard in both worlds.
//
// This is real-runtime code: AfterFunc callbacks run on their own goroutine,
// as time.AfterFunc's do. A runtime that hosts a process must run them one
// at a time with the process's other events, as process.Process requires.
package realclock

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/process"
)

// Clock is the machine's clock. The zero value is not usable; call New.
type Clock struct {
	clockwork.Clock
	origin time.Time // carries the monotonic reading Monotonic counts from
}

// Clock implements the process contract.
var _ process.Clock = (*Clock)(nil)

// New returns the machine's clock, its monotonic reading starting at 0 now.
func New() *Clock {
	return &Clock{Clock: clockwork.NewRealClock(), origin: time.Now()}
}

// Monotonic returns the time since New on Go's monotonic clock: it never
// goes back, whatever happens to the wall clock.
func (c *Clock) Monotonic() time.Duration {
	return time.Since(c.origin)
}

// Now returns the wall reading without a monotonic one, so that comparing
// it with another wall time sees a step of the wall clock.
func (c *Clock) Now() time.Time {
	return time.Now().Round(0)
}

// Since returns Now().Sub(t), on the wall clock.
func (c *Clock) Since(t time.Time) time.Duration {
	return c.Now().Sub(t)
}

// Until returns t.Sub(Now()), on the wall clock.
func (c *Clock) Until(t time.Time) time.Duration {
	return t.Sub(c.Now())
}
