// Package realclock is the machine's clock as a process.Clock, for running
// process code outside the simulator.
//
// It is clockwork's real clock with the changes that make it keep the
// contract the simulator's clock keeps:
//
//   - Monotonic is measured from the clock's creation on Go's monotonic
//     clock.
//   - Now, Since and Until are wall readings only. time.Now carries a
//     monotonic reading too, and Go compares two such times by it, so a
//     deadline taken from Now (a Redlock key's expiry, a wall-clock lease)
//     would ignore a step of the wall clock on a real machine although it
//     sees one in the simulator. Now strips it, so wall-clock code meets
//     the same hazard in both worlds.
//   - AfterFunc callbacks run on the node's serial executor, one at a time
//     with the process's other events (process.Process requires it), not on
//     a goroutine of their own as time.AfterFunc's do. Stop and Reset
//     report, and prevent, exactly what the simulator's do: a timer stopped
//     after it fell due but before its callback ran on the executor does
//     not run it, and Stop says it prevented the call.
//
// This is real-runtime code, not simulated: it reads the machine's clock and
// its timers fire on goroutines, so it is not in the determinism lint.
package realclock

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/process"
)

// Clock is the machine's clock for one node. The zero value is not usable;
// call New.
type Clock struct {
	clockwork.Clock
	origin time.Time    // carries the monotonic reading Monotonic counts from
	post   func(func()) // runs a callback on the node's serial executor
}

// Clock implements the process contract.
var _ process.Clock = (*Clock)(nil)

// New returns the machine's clock, its monotonic reading starting at 0 now.
// post must queue f to run on the node's serial executor, after what it is
// running now, and must not wait for it to run: timer callbacks go through
// it. Methods of the Clock's timers (Stop, Reset) must be called on that
// executor too, as process code does.
func New(post func(f func())) *Clock {
	if post == nil {
		panic("realclock: New called with a nil post; pass the function that queues work on the node's serial executor")
	}
	return &Clock{Clock: clockwork.NewRealClock(), origin: time.Now(), post: post}
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

// AfterFunc arranges for f to run on the node's executor once d has passed
// on the machine's monotonic clock. The returned Timer's Stop and Reset
// behave as the simulator's: see timer.
func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	if f == nil {
		panic("realclock: AfterFunc called with a nil func; pass the callback to run")
	}
	t := &timer{clock: c, f: f}
	t.arm(d)
	return t
}

// timer is an AfterFunc timer whose callback runs on the executor. Its
// fields are touched on the executor only: the machine's timer posts the
// arming's generation, and the executor runs f only if the timer is still
// pending in that generation, so a Stop or Reset made on the executor
// after the machine's timer fired still prevents that firing.
type timer struct {
	clock   *Clock
	f       func()
	machine clockwork.Timer // the machine's timer of the current arming
	gen     uint64          // bumped by every Stop (and so every Reset)
	pending bool            // armed, and f not run since
}

func (t *timer) arm(d time.Duration) {
	t.pending = true
	gen := t.gen
	t.machine = t.clock.Clock.AfterFunc(d, func() {
		t.clock.post(func() { t.fire(gen) })
	})
}

// fire runs on the executor when the arming of generation gen fell due.
func (t *timer) fire(gen uint64) {
	if !t.pending || t.gen != gen {
		return // stopped or re-armed after the machine's timer fired
	}
	t.pending = false
	t.f()
}

// Chan returns nil, as a time.AfterFunc timer's C is: the callback is the
// delivery.
func (t *timer) Chan() <-chan time.Time { return nil }

// Stop prevents the callback from running and reports whether it did so:
// false if the callback already ran or the timer was already stopped.
func (t *timer) Stop() bool {
	was := t.pending
	t.pending = false
	t.gen++
	t.machine.Stop()
	return was
}

// Reset re-arms the timer to run its callback once d has passed from now,
// replacing any pending run, and reports whether one was pending.
func (t *timer) Reset(d time.Duration) bool {
	was := t.Stop()
	t.arm(d)
	return was
}
