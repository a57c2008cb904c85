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
// For tests of the real services only, Adjust skews the clock as the
// simulator's clock faults do (fakeclock's JumpWall and SetDriftPPM): a
// wall offset, and a rate error that the monotonic reading, the wall
// reading and the timers all follow. Go reads the machine's time from the
// vDSO, where libfaketime cannot reach, so a live run moves a service's
// clock through this instead (the services expose it only with
// FENCESIM_TEST_HOOKS=1). Unadjusted, the clock is the machine's.
//
// This is real-runtime code, not simulated: it reads the machine's clock and
// its timers fire on goroutines, so it is not in the determinism lint.
package realclock

import (
	"fmt"
	"sync/atomic"
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
	// skew is the test-only adjustment (Adjust); nil: none, the machine's
	// clock as it is. It is swapped whole, so readers on any goroutine see
	// one consistent anchor.
	skew atomic.Pointer[skew]
	// pending are the armed timers, rescheduled by Adjust (executor only).
	pending map[*timer]struct{}
}

// skew is an adjustment's anchor: from real elapsed time realAt (since
// origin), when the monotonic reading was monoAt, the reading advances
// (1e6+ppm)/1e6 times as fast as the machine's; the wall reading is the
// machine's plus offset plus what the drift has accumulated.
type skew struct {
	realAt, monoAt time.Duration
	ppm            int64
	offset         time.Duration
}

// ppmScale is one million: drift is in parts of it.
const ppmScale = 1_000_000

// mono is the adjusted monotonic reading at real elapsed time real.
func (k *skew) mono(real time.Duration) time.Duration {
	e := max(real-k.realAt, 0)
	return k.monoAt + e + scalePPM(e, k.ppm)
}

// realFor is the real duration in which the adjusted monotonic reading
// advances d, rounded up so that a timer never fires before its reading.
func (k *skew) realFor(d time.Duration) time.Duration {
	if k == nil || k.ppm == 0 || d <= 0 {
		return d
	}
	rate := int64(ppmScale + k.ppm)
	q, r := int64(d)/rate, int64(d)%rate
	// d*1e6/rate without overflowing: d = q*rate + r.
	out := q*ppmScale + (r*ppmScale+rate-1)/rate
	return time.Duration(out)
}

// scalePPM is e*ppm/1e6 without overflowing for any duration of a run.
func scalePPM(e time.Duration, ppm int64) time.Duration {
	return time.Duration(int64(e)/ppmScale*ppm + int64(e)%ppmScale*ppm/ppmScale)
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
	return &Clock{Clock: clockwork.NewRealClock(), origin: time.Now(), post: post, pending: map[*timer]struct{}{}}
}

// Monotonic returns the time since New on Go's monotonic clock (at the
// adjusted rate, if Adjust set one): it never goes back, whatever happens
// to the wall clock.
func (c *Clock) Monotonic() time.Duration {
	real := time.Since(c.origin)
	if k := c.skew.Load(); k != nil {
		return k.mono(real)
	}
	return real
}

// Now returns the wall reading without a monotonic one, so that comparing
// it with another wall time sees a step of the wall clock. An adjusted
// clock adds its offset and the drift accumulated so far.
func (c *Clock) Now() time.Time {
	now := time.Now()
	if k := c.skew.Load(); k != nil {
		real := now.Sub(c.origin)
		return now.Round(0).Add(k.offset + k.mono(real) - real)
	}
	return now.Round(0)
}

// MaxDriftPPM bounds Adjust's drift: the clock must keep moving forward.
const MaxDriftPPM = ppmScale - 1

// Adjust sets the clock's test-only skew, replacing any earlier one: the
// wall reading becomes the machine's plus offset (plus the drift
// accumulated), and from now on the clock runs (1e6+ppm)/1e6 times as
// fast as the machine's — Monotonic, Now and the timers alike, so a lease
// timed on a fast clock ends early in real time. The monotonic reading
// stays continuous (it never goes back), and every pending timer is
// rescheduled to fire when the adjusted reading reaches its deadline.
// Adjust(0, 0) ends the drift (what it accumulated stays, as on a real
// machine whose oscillator was fixed). Like the timers' methods it must
// be called on the node's executor (a clock on which no timer is ever
// armed has nothing to reschedule and may be adjusted from anywhere). It refuses a ppm outside
// ±MaxDriftPPM, changing nothing.
func (c *Clock) Adjust(offset time.Duration, ppm int64) error {
	if ppm < -MaxDriftPPM || ppm > MaxDriftPPM {
		return fmt.Errorf("realclock: drift of %d ppm is out of range; use -%d..%d, so the clock keeps moving forward", ppm, MaxDriftPPM, MaxDriftPPM)
	}
	real := time.Since(c.origin)
	mono := real
	if k := c.skew.Load(); k != nil {
		mono = k.mono(real)
	}
	c.skew.Store(&skew{realAt: real, monoAt: mono, ppm: ppm, offset: offset})
	for t := range c.pending { // order is irrelevant: each gets its own machine timer
		t.machine.Stop()
		t.gen++
		t.arm(t.deadline - mono)
	}
	return nil
}

// Adjustment returns the skew Adjust set last: the wall offset and the
// drift (zero for an unadjusted clock).
func (c *Clock) Adjustment() (offset time.Duration, ppm int64) {
	if k := c.skew.Load(); k != nil {
		return k.offset, k.ppm
	}
	return 0, 0
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
	t.start(d)
	return t
}

// timer is an AfterFunc timer whose callback runs on the executor. Its
// fields are touched on the executor only: the machine's timer posts the
// arming's generation, and the executor runs f only if the timer is still
// pending in that generation, so a Stop or Reset made on the executor
// after the machine's timer fired still prevents that firing.
type timer struct {
	clock    *Clock
	f        func()
	machine  clockwork.Timer // the machine's timer of the current arming
	gen      uint64          // bumped by every Stop (and so every Reset)
	pending  bool            // armed, and f not run since
	deadline time.Duration   // the monotonic reading f is due at
}

// start arms the timer to fire once the monotonic reading has advanced d.
func (t *timer) start(d time.Duration) {
	t.pending = true
	t.deadline = t.clock.Monotonic() + d
	t.clock.pending[t] = struct{}{}
	t.arm(d)
}

// arm sets the machine's timer for d of the (adjusted) monotonic clock.
func (t *timer) arm(d time.Duration) {
	gen := t.gen
	t.machine = t.clock.Clock.AfterFunc(t.clock.skew.Load().realFor(d), func() {
		t.clock.post(func() { t.fire(gen) })
	})
}

// fire runs on the executor when the arming of generation gen fell due.
func (t *timer) fire(gen uint64) {
	if !t.pending || t.gen != gen {
		return // stopped or re-armed after the machine's timer fired
	}
	if rest := t.deadline - t.clock.Monotonic(); rest > 0 && t.clock.skew.Load() != nil {
		t.gen++ // an adjusted clock's rounding left the reading short: wait the rest
		t.arm(rest)
		return
	}
	t.pending = false
	delete(t.clock.pending, t)
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
	delete(t.clock.pending, t)
	return was
}

// Reset re-arms the timer to run its callback once d has passed from now,
// replacing any pending run, and reports whether one was pending.
func (t *timer) Reset(d time.Duration) bool {
	was := t.Stop()
	t.start(d)
	return was
}
