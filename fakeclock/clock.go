// Package fakeclock gives each simulated node its own clock over the
// simulator's virtual true time.
//
// A Clock has two readings, as a real machine does. The monotonic reading
// starts at Config.MonotonicOffset and advances at a rate that differs from
// true time by DriftPPM parts per million; it never goes back, so durations
// and timeouts must be measured with it. The wall reading is the monotonic
// reading plus an epoch plus every JumpWall so far; it can go back, which is
// exactly the hazard lock clients that trust wall time fall into.
//
// Every reading is computed with integer arithmetic only, so a run gives
// bit-identical results on every platform. Timers fire through the node's
// Scheduler on the simulation thread; nothing in this package blocks, starts
// goroutines or uses channels.
package fakeclock

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"
)

// ppmScale is one million: DriftPPM is expressed in parts of it.
const ppmScale = 1_000_000

// Config is the clock's initial state. It is plain data so that scenarios
// can describe every node's clock declaratively and validate it up front.
type Config struct {
	// MonotonicOffset is the monotonic reading at true time 0. It lets
	// nodes disagree about the origin of their monotonic clocks, as real
	// machines booted at different times do. It must be >= 0.
	MonotonicOffset time.Duration
	// DriftPPM is the rate error in parts per million: the clock advances
	// (1e6+DriftPPM)/1e6 seconds per true second. It must be in
	// (-1_000_000, +1_000_000) so that the clock always moves forward.
	DriftPPM int64
	// WallEpoch is the wall reading when the monotonic reading is 0 (before
	// any jump). The zero value means 2026-01-01T00:00:00Z, a fixed default
	// chosen so that runs stay reproducible.
	WallEpoch time.Time
}

// Validate reports what is wrong with c, so that scenario loaders can reject
// a bad configuration with a useful message before New panics on it.
func (c Config) Validate() error {
	if c.MonotonicOffset < 0 {
		return fmt.Errorf("fakeclock: monotonic offset is %v; set MonotonicOffset to 0 or more, since a monotonic clock never reads negative", c.MonotonicOffset)
	}
	if err := validatePPM(c.DriftPPM); err != nil {
		return err
	}
	return nil
}

// validatePPM is shared by Config.Validate and SetDriftPPM so that both
// reject the same values with the same advice.
func validatePPM(ppm int64) error {
	if ppm <= -ppmScale || ppm >= ppmScale {
		return fmt.Errorf("fakeclock: drift of %d ppm is out of range; use a DriftPPM strictly between -1000000 and 1000000, so the clock keeps moving forward", ppm)
	}
	return nil
}

// defaultWallEpoch is the wall reading at monotonic 0 when Config.WallEpoch
// is zero. It is a fixed instant, never the machine's clock, so that runs
// are reproducible.
func defaultWallEpoch() time.Time {
	return time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
}

// Clock is one node's clock. It is not safe for concurrent use: like every
// other part of the simulator it lives on the single simulation thread.
//
// The monotonic reading is a piecewise-linear function of true time. The
// current piece starts at the anchor (trueAt, monoAt) and has slope
// (1e6+ppm)/1e6; SetDriftPPM starts a new piece at the current true time, so
// the reading stays continuous.
type Clock struct {
	sched Scheduler

	trueAt time.Duration // true time at which the current piece starts
	monoAt time.Duration // monotonic reading at trueAt
	ppm    int64         // drift of the current piece

	wallEpoch  time.Time     // wall reading at monotonic 0
	wallOffset time.Duration // sum of JumpWall so far

	// pending holds the armed timers, in no particular order: each knows
	// its index, so adding one is an append and removing one a swap with
	// the last, O(1) however many are pending. A walk whose order reaches
	// the scheduler (SetDriftPPM) sorts it by creation sequence first, so
	// it stays deterministic.
	pending []*timer
	nextSeq uint64
}

// Clock implements clockwork.Clock so that lock clients written against
// clockwork can run unchanged inside the simulator.
var _ clockwork.Clock = (*Clock)(nil)

// New returns a clock driven by s. It panics if cfg is invalid or s is nil,
// because both are programming errors: callers are expected to run
// cfg.Validate first and report its error properly.
func New(s Scheduler, cfg Config) *Clock {
	if s == nil {
		panic("fakeclock: New called with a nil Scheduler; pass the node's scheduler")
	}
	if err := cfg.Validate(); err != nil {
		panic(err.Error() + " (call Config.Validate before New)")
	}
	epoch := cfg.WallEpoch
	if epoch.IsZero() {
		epoch = defaultWallEpoch()
	}
	return &Clock{
		sched:     s,
		trueAt:    0,
		monoAt:    cfg.MonotonicOffset,
		ppm:       cfg.DriftPPM,
		wallEpoch: epoch,
	}
}

// Monotonic returns the monotonic reading at the current true time. It never
// goes back, not even across SetDriftPPM or JumpWall, so it is the reading
// to measure durations and lease expiry with.
func (c *Clock) Monotonic() time.Duration {
	return c.monoAtTrue(c.sched.TrueNow())
}

// monoAtTrue evaluates the current piece at true time t. A t before the
// anchor (which a correct scheduler never produces) reads as the anchor, so
// the reading still cannot go back.
func (c *Clock) monoAtTrue(t time.Duration) time.Duration {
	e := t - c.trueAt
	if e < 0 {
		e = 0
	}
	return satAdd(c.monoAt, advance(e, c.ppm))
}

// Wall returns WallEpoch + Monotonic + WallOffset. Unlike Monotonic it may go
// back (after a negative JumpWall), which is why it must not be used to
// measure durations.
func (c *Clock) Wall() time.Time {
	return c.wallEpoch.Add(c.Monotonic()).Add(c.wallOffset)
}

// DriftPPM returns the current rate error, so that assertions and traces can
// report how fast the node's clock is running.
func (c *Clock) DriftPPM() int64 {
	return c.ppm
}

// SetDriftPPM changes the rate error from now on, to model a clock whose
// frequency changes mid-run. It re-anchors at the current true time so the
// monotonic reading stays continuous, and reschedules every pending timer so
// that each still fires exactly when the monotonic reading reaches its
// deadline. It returns an error, and changes nothing, if ppm is out of range.
func (c *Clock) SetDriftPPM(ppm int64) error {
	if err := validatePPM(ppm); err != nil {
		return err
	}
	now := c.sched.TrueNow()
	c.monoAt = c.monoAtTrue(now)
	c.trueAt = now
	c.ppm = ppm
	// Re-anchoring drops the fractional nanosecond of the old piece, so
	// every timer is rescheduled even when ppm is unchanged. The walk is in
	// creation order, which makes the new scheduler ids, and the order of
	// timers that now fall due at the same instant, deterministic.
	slices.SortFunc(c.pending, func(a, b *timer) int { return cmp.Compare(a.seq, b.seq) })
	for i, t := range c.pending {
		t.idx = i
		c.sched.Cancel(t.id)
		c.arm(t)
	}
	return nil
}

// JumpWall moves the wall reading by d, forward or back, to model an NTP step
// or an operator setting the clock. The monotonic reading and the timers,
// which run on it, are unaffected.
func (c *Clock) JumpWall(d time.Duration) {
	c.wallOffset = satAdd(c.wallOffset, d)
}

// WallOffset returns the sum of every JumpWall so far, so that checkers can
// tell how far the wall reading has been pushed away from monotonic time.
func (c *Clock) WallOffset() time.Duration {
	return c.wallOffset
}

// DropTimers forgets every pending timer without calling Scheduler.Cancel.
// The simulator calls it when the node crashes, after it has already
// discarded the node's scheduled events, so cancelling them again would be
// wrong. A dropped timer never runs, even if its event were still delivered,
// and its Stop reports false.
func (c *Clock) DropTimers() {
	for _, t := range c.pending {
		t.pending = false // so that its event, if still delivered, is ignored
	}
	clear(c.pending)
	c.pending = c.pending[:0]
}

// Pending returns the number of pending timers, so that tests and invariant
// checks can assert that timers were stopped or dropped.
func (c *Clock) Pending() int {
	return len(c.pending)
}

// TrueDuration returns the smallest true duration after which the monotonic
// reading has advanced by at least mono, at the current drift. It lets the
// simulator and nemeses convert a node-local duration into true time. The
// result is rounded up (ceil division), so waiting that long never falls
// short; it is measured from the current true time and so takes into account
// the fraction of a nanosecond the monotonic reading has already
// accumulated. It returns 0 for mono <= 0 and saturates at the largest
// Duration.
func (c *Clock) TrueDuration(mono time.Duration) time.Duration {
	if mono <= 0 {
		return 0
	}
	now := c.sched.TrueNow()
	target := satAdd(c.monoAtTrue(now), mono)
	return c.trueAtMono(target, now) - now
}

// trueAtMono returns the smallest true time t >= now at which the monotonic
// reading is at least target on the current piece.
func (c *Clock) trueAtMono(target, now time.Duration) time.Duration {
	if target <= c.monoAt {
		return now
	}
	// Both are non-negative, so the difference cannot overflow.
	t := satAdd(c.trueAt, invAdvance(target-c.monoAt, c.ppm))
	if t < now {
		t = now
	}
	return t
}

// Now returns Wall. It exists for clockwork.Clock; it sees wall jumps.
func (c *Clock) Now() time.Time {
	return c.Wall()
}

// Since returns Wall().Sub(t). It is wall-based, as clockwork.Clock requires,
// so it sees JumpWall and can even be negative; measure durations with
// Monotonic instead.
func (c *Clock) Since(t time.Time) time.Duration {
	return c.Wall().Sub(t)
}

// Until returns t.Sub(Wall()). Like Since it is wall-based and sees
// JumpWall; measure durations with Monotonic instead.
func (c *Clock) Until(t time.Time) time.Duration {
	return t.Sub(c.Wall())
}

// AfterFunc arranges for f to run, on the simulation thread via the
// Scheduler, when the monotonic reading reaches Monotonic()+d as read now.
// Timers run on the monotonic clock because that is what a real runtime's
// timers use: they follow drift but ignore wall jumps. A d <= 0 fires at the
// current true time, still through the Scheduler and never inline, so the
// caller finishes its step first. The returned Timer's Stop and Reset behave
// like time.Timer's for AfterFunc timers.
func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	if f == nil {
		panic("fakeclock: AfterFunc called with a nil func; pass the callback to run")
	}
	t := &timer{clock: c, f: f, seq: c.nextSeq}
	c.nextSeq++
	c.start(t, d)
	return t
}

// Panic messages of the clockwork.Clock methods that would have to block.
const (
	sleepPanic     = "fakeclock: Sleep cannot work on the single simulation thread: nothing else runs while it blocks, so time would never advance; use AfterFunc instead"
	afterPanic     = "fakeclock: After cannot work on the single simulation thread: nothing else runs while a receiver blocks on the channel, so it would never fire; use AfterFunc instead"
	newTimerPanic  = "fakeclock: NewTimer cannot work on the single simulation thread: nothing else runs while a receiver blocks on the channel, so it would never fire; use AfterFunc instead"
	newTickerPanic = "fakeclock: NewTicker cannot work on the single simulation thread: nothing else runs while a receiver blocks on the channel, so it would never tick; use AfterFunc (re-armed from its callback) instead"
	chanPanic      = "fakeclock: AfterFunc timers have no channel: their callback runs on the simulation thread instead, so do not call Chan"
)

// Sleep always panics: blocking the single simulation thread would stop
// true time itself. Use AfterFunc instead.
func (c *Clock) Sleep(time.Duration) {
	panic(sleepPanic)
}

// After always panics: receiving from its channel would block the single
// simulation thread, so nothing could ever send on it. Use AfterFunc instead.
// The channel type in the signature is required by clockwork.Clock; no
// channel is ever made.
func (c *Clock) After(time.Duration) <-chan time.Time {
	panic(afterPanic)
}

// NewTimer always panics for the same reason as After. Use AfterFunc instead.
func (c *Clock) NewTimer(time.Duration) clockwork.Timer {
	panic(newTimerPanic)
}

// NewTicker always panics for the same reason as After. Use AfterFunc,
// re-armed from its own callback, instead.
func (c *Clock) NewTicker(time.Duration) clockwork.Ticker {
	panic(newTickerPanic)
}

// timer is an AfterFunc timer. It stays the same object across Reset so that
// the caller's handle keeps working; id tells its current scheduled event
// from stale ones. It is its own Handler, so arming it allocates nothing.
type timer struct {
	clock    *Clock
	f        func()
	seq      uint64        // creation order: SetDriftPPM re-arms by it
	deadline time.Duration // monotonic reading at which f runs
	id       uint64        // scheduler id of the current event, while pending
	idx      int           // index in clock.pending, while pending
	pending  bool
}

// start sets t's deadline d from the current monotonic reading, adds it to
// pending if needed and schedules it.
func (c *Clock) start(t *timer, d time.Duration) {
	now := c.sched.TrueNow()
	if d < 0 {
		d = 0
	}
	t.deadline = satAdd(c.monoAtTrue(now), d)
	if !t.pending {
		t.pending = true
		t.idx = len(c.pending)
		c.pending = append(c.pending, t)
	}
	c.arm(t)
}

// arm schedules t's event for the first true time at which the monotonic
// reading reaches t.deadline on the current piece.
func (c *Clock) arm(t *timer) {
	at := c.trueAtMono(t.deadline, c.sched.TrueNow())
	t.id = c.sched.Schedule(at, t)
}

// remove takes t out of pending by moving the last pending timer into its
// place.
func (c *Clock) remove(t *timer) {
	i := t.idx
	if i >= len(c.pending) || c.pending[i] != t {
		panic("fakeclock: internal error: pending timer missing from the pending list")
	}
	last := len(c.pending) - 1
	if i != last {
		moved := c.pending[last]
		c.pending[i] = moved
		moved.idx = i
	}
	c.pending[last] = nil
	c.pending = c.pending[:last]
	t.pending = false
}

// Fire is the scheduled event: it makes timer a Handler. It ignores events
// that were superseded by Stop, Reset, SetDriftPPM or DropTimers (their id
// is not the current one, or the timer is not pending), removes t from
// pending before calling f (so f may Reset it), and checks that the
// deadline has really been reached, which catches a scheduler that runs
// events early.
func (t *timer) Fire(id uint64) {
	if !t.pending || t.id != id {
		return
	}
	c := t.clock
	if m := c.Monotonic(); m < t.deadline {
		panic(fmt.Sprintf("fakeclock: internal error: timer fired at monotonic %v, before its deadline %v", m, t.deadline))
	}
	c.remove(t)
	t.f()
}

// Chan always panics: AfterFunc timers deliver by calling their func, and a
// channel could not be received from on the simulation thread anyway.
func (t *timer) Chan() <-chan time.Time {
	panic(chanPanic)
}

// Stop prevents the timer from firing. Like time.Timer.Stop for AfterFunc
// timers, it reports whether it prevented the call: false if the timer had
// already fired, been stopped or been dropped.
func (t *timer) Stop() bool {
	if !t.pending {
		return false
	}
	t.clock.sched.Cancel(t.id)
	t.clock.remove(t)
	return true
}

// Reset re-arms the timer to fire when the monotonic reading reaches
// Monotonic()+d as read now, replacing any pending firing. Like
// time.Timer.Reset for AfterFunc timers, it reports whether the timer had
// been pending.
func (t *timer) Reset(d time.Duration) bool {
	was := t.pending
	if was {
		t.clock.sched.Cancel(t.id)
	}
	t.clock.start(t, d)
	return was
}

// advance returns floor(e * (1e6+ppm) / 1e6) for e >= 0: the monotonic
// advance over a true duration e. Because 1e6+ppm > 0 it is non-decreasing
// in e, and it equals e + floor(e*ppm/1e6) exactly. The product is taken in
// 128 bits; the result saturates at the largest Duration.
func advance(e time.Duration, ppm int64) time.Duration {
	if e <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(e), uint64(ppmScale+ppm))
	// The quotient is below 2*e < 2^64, so hi < ppmScale and Div64 cannot
	// overflow.
	q, _ := bits.Div64(hi, lo, ppmScale)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// invAdvance returns the smallest e >= 0 with advance(e, ppm) >= m, which is
// ceil(m * 1e6 / (1e6+ppm)) for m > 0. It saturates at the largest Duration.
func invAdvance(m time.Duration, ppm int64) time.Duration {
	if m <= 0 {
		return 0
	}
	rate := uint64(ppmScale + ppm)
	hi, lo := bits.Mul64(uint64(m), ppmScale)
	if hi >= rate {
		return math.MaxInt64 // quotient would not fit in 64 bits
	}
	q, rem := bits.Div64(hi, lo, rate)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if rem != 0 {
		q++
	}
	return time.Duration(q)
}

// satAdd returns a+b, clamped to the Duration range instead of wrapping, so
// that absurdly long timers stay in the far future rather than in the past.
func satAdd(a, b time.Duration) time.Duration {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}
