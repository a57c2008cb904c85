package realclock

import (
	"strings"
	"testing"
	"time"
)

// TestMonotonicAdvancesWithRealTime: the reading starts near 0, never goes
// back, and advances at least as much as real time slept.
func TestMonotonicAdvancesWithRealTime(t *testing.T) {
	c := New()
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
	c := New()
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

// TestAfterFuncTimers: a timer fires no earlier than its delay on the
// monotonic reading, Reset re-arms the same timer after it fired (the lock
// service re-arms its heartbeats that way), and Stop prevents a firing.
func TestAfterFuncTimers(t *testing.T) {
	c := New()
	const d = 10 * time.Millisecond
	fired := make(chan time.Duration, 2)
	armed := c.Monotonic()
	tm := c.AfterFunc(d, func() { fired <- c.Monotonic() })
	select {
	case at := <-fired:
		if at-armed < d {
			t.Fatalf("timer fired %v after it was armed, want at least %v", at-armed, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timer did not fire within 10s")
	}
	if tm.Reset(d) {
		t.Error("Reset of a fired timer reported it pending")
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("re-armed timer did not fire within 10s")
	}

	stopped := c.AfterFunc(d, func() { fired <- 0 })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported it not pending")
	}
	select {
	case <-fired:
		t.Fatal("a stopped timer fired")
	case <-time.After(5 * d):
	}
}
