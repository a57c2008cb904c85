package realclock_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/realclock"
)

// executor runs posted funcs one at a time on one goroutine, as a real
// runtime's per-node executor does.
type executor struct {
	work    chan func()
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// newExecutor starts an executor that t's cleanup stops.
func newExecutor(t *testing.T) *executor {
	e := &executor{work: make(chan func(), 1024), quit: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(e.stopped)
		for {
			select {
			case f := <-e.work:
				f()
			case <-e.quit:
				return
			}
		}
	}()
	t.Cleanup(e.stop)
	return e
}

// stop ends the executor, as a process's death does: what is queued or
// posted later never runs. It returns once nothing runs on it any more.
func (e *executor) stop() {
	e.once.Do(func() { close(e.quit) })
	<-e.stopped
}

// post queues f without waiting for it to run.
func (e *executor) post(f func()) {
	select {
	case e.work <- f:
	case <-e.quit:
	}
}

// do runs f on the executor and waits until it has run.
func (e *executor) do(f func()) {
	done := make(chan struct{})
	e.post(func() { f(); close(done) })
	<-done
}

// within fails t unless ch delivers within 10 s, a bound far above any
// delay the tests ask for, so that a loaded machine does not fail them.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
		panic("unreachable")
	}
}

// TestMonotonicAdvancesWithRealTime: the reading starts near 0, never goes
// back, and advances at least as much as real time slept.
func TestMonotonicAdvancesWithRealTime(t *testing.T) {
	c := realclock.New(newExecutor(t).post)
	first := c.Monotonic()
	if first < 0 || first > time.Second {
		t.Fatalf("Monotonic right after New = %v, want within [0, 1s]", first)
	}
	prev := first
	for range 1000 {
		m := c.Monotonic()
		if m < prev {
			t.Fatalf("Monotonic went back: %v after %v", m, prev)
		}
		prev = m
	}
	const nap = 20 * time.Millisecond
	time.Sleep(nap)
	if got := c.Monotonic() - first; got < nap {
		t.Fatalf("Monotonic advanced %v over a %v sleep", got, nap)
	}
}

// TestNowIsAWallReading: Now carries no monotonic reading (Go prints one as
// "m=±…"), so deadlines taken from it are compared on the wall clock, as
// they are in the simulator; Since and Until agree with it.
func TestNowIsAWallReading(t *testing.T) {
	if !strings.Contains(time.Now().String(), "m=") {
		t.Skip("this platform's time.Now has no monotonic reading; nothing to strip")
	}
	c := realclock.New(newExecutor(t).post)
	now := c.Now()
	if s := now.String(); strings.Contains(s, "m=") {
		t.Fatalf("Now() = %s: it carries a monotonic reading, so comparisons with it would ignore wall steps", s)
	}
	if d := time.Since(now); d < 0 || d > time.Minute {
		t.Fatalf("Now() is %v away from the machine's clock", d)
	}
	hourAgo := now.Add(-time.Hour)
	if got := c.Since(hourAgo); got < time.Hour || got > time.Hour+time.Minute {
		t.Errorf("Since(an hour ago) = %v, want about 1h", got)
	}
	if got := c.Until(hourAgo); got > -time.Hour || got < -time.Hour-time.Minute {
		t.Errorf("Until(an hour ago) = %v, want about -1h", got)
	}
}

// TestAfterFuncTimers: a callback runs on the executor no earlier than its
// delay on the monotonic reading; Reset re-arms the same timer after it ran
// (the lock service re-arms its heartbeats that way); Stop prevents a run
// and says so, and a stopped timer's Stop and Reset say it was not pending.
func TestAfterFuncTimers(t *testing.T) {
	e := newExecutor(t)
	c := realclock.New(e.post)
	const d = 10 * time.Millisecond
	ran := make(chan time.Duration, 4)
	var tm clockwork.Timer
	var armed time.Duration
	e.do(func() {
		armed = c.Monotonic()
		tm = c.AfterFunc(d, func() { ran <- c.Monotonic() })
	})
	if at := within(t, ran, "the timer's run"); at-armed < d {
		t.Fatalf("callback ran %v after the timer was armed, want at least %v", at-armed, d)
	}
	var wasPending bool
	e.do(func() { wasPending = tm.Reset(d) })
	if wasPending {
		t.Error("Reset of a timer whose callback ran reported it pending")
	}
	within(t, ran, "the re-armed timer's run")

	var stopped, again bool
	e.do(func() {
		tm.Reset(d)
		stopped = tm.Stop()
		again = tm.Stop()
	})
	if !stopped || again {
		t.Errorf("Stop of a pending timer = %v, then again = %v; want true, false", stopped, again)
	}
	time.Sleep(5 * d)
	e.do(func() {})
	if len(ran) != 0 {
		t.Fatal("a stopped timer's callback ran")
	}
}

// TestStopAfterTheMachineTimerFired: the machine's timer has fired and its
// callback waits in the executor's queue when the process stops the timer.
// As in the simulator, Stop prevents the run and reports that it did: a
// process that stops a timer never hears from it again.
func TestStopAfterTheMachineTimerFired(t *testing.T) {
	e := newExecutor(t)
	posted := make(chan struct{}, 1)
	c := realclock.New(func(f func()) {
		e.post(f)
		posted <- struct{}{}
	})
	var ran, stopped, fired bool
	e.do(func() {
		tm := c.AfterFunc(time.Millisecond, func() { ran = true })
		// The executor is busy here: the callback can only queue behind us.
		select {
		case <-posted:
			fired = true
		case <-time.After(10 * time.Second):
		}
		stopped = tm.Stop()
	})
	if !fired {
		t.Fatal("the machine timer did not fire within 10s")
	}
	e.do(func() {}) // the queued firing has run by now
	if ran || !stopped {
		t.Fatalf("callback ran = %v, Stop = %v; want false, true", ran, stopped)
	}
}

// TestAdjustDriftsTheTimers: on a clock adjusted to run fast, a timer —
// one armed before the adjustment included — fires before its duration
// has passed in real time, yet after it has passed on the clock's own
// monotonic reading; on a slow clock it fires late in real time. This is
// what a live run's clock fault relies on: a lease timed on a fast clock
// ends early.
func TestAdjustDriftsTheTimers(t *testing.T) {
	e := newExecutor(t)
	c := realclock.New(e.post)
	const d = time.Second
	type firing struct{ real, mono time.Duration }
	ran := make(chan firing, 2)
	var start time.Time
	var mono0 time.Duration
	e.do(func() {
		start, mono0 = time.Now(), c.Monotonic()
		c.AfterFunc(d, func() { ran <- firing{time.Since(start), c.Monotonic() - mono0} })
		if err := c.Adjust(0, 900_000); err != nil { // 1.9× as fast
			t.Error(err)
		}
		c.AfterFunc(d, func() { ran <- firing{time.Since(start), c.Monotonic() - mono0} })
	})
	for i := range 2 {
		f := within(t, ran, "a timer on the fast clock")
		if f.real >= d || f.mono < d {
			t.Errorf("timer %d fired after %v real, %v on the clock; want < %v real (the clock runs fast) and >= %v on the clock", i, f.real, f.mono, d, d)
		}
	}

	const short = 100 * time.Millisecond
	e.do(func() {
		if err := c.Adjust(0, -500_000); err != nil { // half as fast
			t.Error(err)
		}
		start = time.Now()
		c.AfterFunc(short, func() { ran <- firing{real: time.Since(start)} })
	})
	if f := within(t, ran, "a timer on the slow clock"); f.real < 2*short {
		t.Errorf("timer of %v on a clock at half speed fired after %v real, want >= %v", short, f.real, 2*short)
	}
}

// TestAdjustKeepsMonotonicAndOffsetsTheWall: the monotonic reading never
// goes back across adjustments, the wall reading carries the offset, and a
// drift out of range is refused without changing anything.
func TestAdjustKeepsMonotonicAndOffsetsTheWall(t *testing.T) {
	e := newExecutor(t)
	c := realclock.New(e.post)
	prev := c.Monotonic()
	check := func(what string) {
		for range 100 {
			m := c.Monotonic()
			if m < prev {
				t.Fatalf("%s: Monotonic went back from %v to %v", what, prev, m)
			}
			prev = m
		}
	}
	for _, ppm := range []int64{realclock.MaxDriftPPM, 0, -realclock.MaxDriftPPM, 250_000} {
		e.do(func() {
			if err := c.Adjust(time.Hour, ppm); err != nil {
				t.Fatal(err)
			}
		})
		check("after Adjust(1h, " + time.Duration(ppm).String() + ")")
		time.Sleep(time.Millisecond)
		check("later")
	}
	if off := c.Now().Sub(time.Now()); off < 59*time.Minute || off > 61*time.Minute {
		t.Errorf("Now() is %v from the machine's clock after Adjust(1h, …), want about 1h", off)
	}
	if off, ppm := c.Adjustment(); off != time.Hour || ppm != 250_000 {
		t.Errorf("Adjustment() = %v, %d; want 1h, 250000", off, ppm)
	}
	e.do(func() {
		if err := c.Adjust(0, 1_000_000); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Adjust(0, 1000000) = %v, want an out-of-range error", err)
		}
	})
	if off, ppm := c.Adjustment(); off != time.Hour || ppm != 250_000 {
		t.Errorf("a refused Adjust changed the clock to %v, %d", off, ppm)
	}
}
