package fakeclock

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// refAdvance is an independent big-integer reference for the monotonic
// advance over true duration e: e + floor(e*ppm/1e6).
func refAdvance(e time.Duration, ppm int64) *big.Int {
	p := new(big.Int).Mul(big.NewInt(int64(e)), big.NewInt(ppm))
	// Euclidean division by a positive divisor is floor division.
	q := new(big.Int).Div(p, big.NewInt(1_000_000))
	return q.Add(q, big.NewInt(int64(e)))
}

// refCeilInv is ceil(m*1e6/(1e6+ppm)) with big integers.
func refCeilInv(m time.Duration, ppm int64) *big.Int {
	num := new(big.Int).Mul(big.NewInt(int64(m)), big.NewInt(1_000_000))
	den := big.NewInt(1_000_000 + ppm)
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func TestMonotonicDrift(t *testing.T) {
	const offset = 7 * time.Second
	tests := []struct {
		ppm  int64
		true time.Duration
		want time.Duration // advance over true, without the offset
	}{
		{0, 0, 0},
		{0, 1, 1},
		{0, time.Second, time.Second},
		{0, time.Hour, time.Hour},
		{100, 1, 1},
		{100, 12345, 12346},
		{100, time.Second, 1_000_100_000},
		{100, time.Hour, 3_600_360_000_000},
		{-100, 1, 0},
		{-100, 12345, 12343},
		{-100, time.Second, 999_900_000},
		{-100, time.Hour, 3_599_640_000_000},
		{500_000, 1, 1},
		{500_000, 3, 4},
		{500_000, 12345, 18517},
		{500_000, time.Second, 1_500_000_000},
		{500_000, time.Hour, 90 * time.Minute},
		{-999_999, 1, 0},
		{-999_999, 999_999, 0},
		{-999_999, 1_000_000, 1},
		{-999_999, time.Second, 1000},
		{-999_999, time.Hour, 3_600_000},
	}
	for _, tc := range tests {
		s, c := newClock(t, Config{MonotonicOffset: offset, DriftPPM: tc.ppm})
		if got := c.Monotonic(); got != offset {
			t.Fatalf("ppm %d: Monotonic at true 0 = %v, want the offset %v", tc.ppm, got, offset)
		}
		s.now = tc.true
		if got := c.Monotonic(); got != offset+tc.want {
			t.Errorf("ppm %d, true %v: Monotonic = %d, want %d", tc.ppm, tc.true, got, offset+tc.want)
		}
		if ref := refAdvance(tc.true, tc.ppm); ref.Int64() != int64(tc.want) {
			t.Errorf("table error: ppm %d, true %v: reference says %v, table says %d", tc.ppm, tc.true, ref, tc.want)
		}
		if c.DriftPPM() != tc.ppm {
			t.Errorf("DriftPPM = %d, want %d", c.DriftPPM(), tc.ppm)
		}
	}
}

func TestAdvanceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ppms := []int64{0, 1, -1, 100, -100, 500_000, -500_000, 999_999, -999_999}
	for range 20000 {
		ppm := ppms[r.IntN(len(ppms))]
		if r.IntN(2) == 0 {
			ppm = r.Int64N(1_999_999) - 999_999
		}
		// Up to 2^62 so that even +999999 ppm stays below MaxInt64.
		e := time.Duration(r.Int64N(1 << uint(r.IntN(63))))
		got := advance(e, ppm)
		if ref := refAdvance(e, ppm); ref.Int64() != int64(got) {
			t.Fatalf("advance(%d, %d) = %d, want %v", e, ppm, got, ref)
		}
		if e > 0 && advance(e-1, ppm) > got {
			t.Fatalf("advance decreases at e=%d, ppm=%d", e, ppm)
		}
		m := time.Duration(r.Int64N(1 << uint(r.IntN(40))))
		inv := invAdvance(m, ppm)
		if ref := refCeilInv(m, ppm); m > 0 && ref.Int64() != int64(inv) {
			t.Fatalf("invAdvance(%d, %d) = %d, want %v", m, ppm, inv, ref)
		}
		if advance(inv, ppm) < m {
			t.Fatalf("advance(invAdvance(%d)) = %d < %d at ppm %d", m, advance(inv, ppm), m, ppm)
		}
		if inv > 0 && advance(inv-1, ppm) >= m {
			t.Fatalf("invAdvance(%d, %d) = %d is not the smallest", m, ppm, inv)
		}
	}
}

func TestSaturation(t *testing.T) {
	s, c := newClock(t, Config{MonotonicOffset: time.Hour, DriftPPM: 999_999})
	s.now = math.MaxInt64
	if got := c.Monotonic(); got != math.MaxInt64 {
		t.Fatalf("Monotonic near the end of time = %d, want saturation at MaxInt64", got)
	}

	s, c = newClock(t, Config{DriftPPM: -999_999})
	s.now = time.Hour
	if got := c.TrueDuration(math.MaxInt64); got != math.MaxInt64-time.Hour {
		t.Fatalf("TrueDuration(MaxInt64) = %d, want %d", got, math.MaxInt64-time.Hour)
	}
	c.AfterFunc(math.MaxInt64, func() { t.Fatal("a timer at the end of time fired") })
	at, ok := s.next()
	if !ok || at < s.now {
		t.Fatalf("huge timer scheduled at %d (ok=%v), must be in the future of %d", at, ok, s.now)
	}
	if got := advance(math.MaxInt64, 999_999); got != math.MaxInt64 {
		t.Fatalf("advance saturates to %d, want MaxInt64", got)
	}
	if got := satAdd(math.MinInt64, -1); got != math.MinInt64 {
		t.Fatalf("satAdd underflow = %d", got)
	}
}

func TestMonotonicNeverDecreasesAcrossDriftChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s, c := newClock(t, Config{MonotonicOffset: 123, DriftPPM: 250})
	prev := c.Monotonic()
	for i := range 5000 {
		s.now += time.Duration(r.Int64N(int64(2 * time.Millisecond)))
		m := c.Monotonic()
		if m < prev {
			t.Fatalf("step %d: Monotonic went back from %d to %d", i, prev, m)
		}
		prev = m
		if r.IntN(4) == 0 {
			ppm := r.Int64N(1_999_999) - 999_999
			anchorTrue, anchorMono := s.now, c.Monotonic()
			if err := c.SetDriftPPM(ppm); err != nil {
				t.Fatalf("SetDriftPPM(%d): %v", ppm, err)
			}
			if got := c.Monotonic(); got != anchorMono {
				t.Fatalf("SetDriftPPM(%d) moved Monotonic from %d to %d at the same true time", ppm, anchorMono, got)
			}
			// The new rate applies exactly from the anchor.
			e := time.Duration(r.Int64N(int64(time.Second)))
			s.now += e
			want := anchorMono + time.Duration(refAdvance(e, ppm).Int64())
			if got := c.Monotonic(); got != want {
				t.Fatalf("after SetDriftPPM(%d) at true %d, %d later: Monotonic = %d, want %d", ppm, anchorTrue, e, got, want)
			}
			if got := c.Monotonic(); got < prev {
				t.Fatalf("Monotonic went back across SetDriftPPM(%d)", ppm)
			}
			prev = c.Monotonic()
		}
	}
}

func TestSetDriftPPMRejectsOutOfRange(t *testing.T) {
	s, c := newClock(t, Config{DriftPPM: 10})
	s.now = time.Second
	before := c.Monotonic()
	for _, ppm := range []int64{1_000_000, -1_000_000, math.MaxInt64, math.MinInt64} {
		err := c.SetDriftPPM(ppm)
		if err == nil || !strings.HasPrefix(err.Error(), "fakeclock: ") || !strings.Contains(err.Error(), "DriftPPM") {
			t.Fatalf("SetDriftPPM(%d) = %v, want a fakeclock: error naming DriftPPM", ppm, err)
		}
	}
	if c.DriftPPM() != 10 || c.Monotonic() != before {
		t.Fatalf("a rejected SetDriftPPM changed the clock: ppm %d, mono %d", c.DriftPPM(), c.Monotonic())
	}
	s.now = 2 * time.Second
	if got, want := c.Monotonic(), 2*time.Second+20*time.Microsecond; got != want {
		t.Fatalf("Monotonic = %v, want %v (drift should still be 10ppm)", got, want)
	}
}

func TestWallJumps(t *testing.T) {
	s, c := newClock(t, Config{MonotonicOffset: 3 * time.Second})
	epoch := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	s.now = 10 * time.Second
	w0 := c.Wall()
	if !w0.Equal(epoch.Add(13 * time.Second)) {
		t.Fatalf("Wall = %v, want default epoch + 13s", w0)
	}
	if !c.Now().Equal(w0) {
		t.Fatalf("Now = %v, want Wall %v", c.Now(), w0)
	}

	fired := time.Duration(-1)
	c.AfterFunc(5*time.Second, func() { fired = s.now })

	c.JumpWall(time.Hour)
	if got := c.Wall(); !got.Equal(w0.Add(time.Hour)) {
		t.Fatalf("after +1h jump Wall = %v, want %v", got, w0.Add(time.Hour))
	}
	if c.Monotonic() != 13*time.Second {
		t.Fatalf("JumpWall moved Monotonic to %v", c.Monotonic())
	}
	if got := c.Since(w0); got != time.Hour {
		t.Fatalf("Since sees the jump: got %v, want 1h", got)
	}

	c.JumpWall(-3 * time.Hour)
	w2 := c.Wall()
	if !w2.Before(w0) || !w2.Equal(w0.Add(-2*time.Hour)) {
		t.Fatalf("after -3h jump Wall = %v, want %v (before the first reading)", w2, w0.Add(-2*time.Hour))
	}
	if c.WallOffset() != -2*time.Hour {
		t.Fatalf("WallOffset = %v, want -2h", c.WallOffset())
	}
	if c.Monotonic() != 13*time.Second {
		t.Fatalf("a backward jump moved Monotonic to %v", c.Monotonic())
	}
	if got := c.Since(w0); got != -2*time.Hour {
		t.Fatalf("Since = %v, want -2h (wall went back)", got)
	}
	if got := c.Until(w0); got != 2*time.Hour {
		t.Fatalf("Until = %v, want 2h", got)
	}

	// Timers run on the monotonic clock: the jumps did not move the timer.
	s.runUntil(time.Minute)
	if fired != 15*time.Second {
		t.Fatalf("timer fired at true %v, want 15s regardless of wall jumps", fired)
	}
	s.now += 2 * time.Second
	if got := c.Wall(); !got.Equal(epoch.Add(3*time.Second + time.Minute + 2*time.Second - 2*time.Hour)) {
		t.Fatalf("Wall keeps advancing after jumps: got %v", got)
	}
}

func TestWallEpochConfigured(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	epoch := time.Date(1999, time.December, 31, 23, 0, 0, 0, loc)
	s, c := newClock(t, Config{WallEpoch: epoch, DriftPPM: 500_000})
	s.now = 2 * time.Second
	if got := c.Wall(); !got.Equal(epoch.Add(3*time.Second)) || got.Location() != loc {
		t.Fatalf("Wall = %v, want %v in the epoch's location", got, epoch.Add(3*time.Second))
	}
}

// checkFireExact asserts that at true time at the clock reads at least
// deadline, and one nanosecond earlier it reads less (unless at is the
// earliest time the timer could have been scheduled).
func checkFireExact(t *testing.T, s *fakeSched, c *Clock, at, earliest, deadline time.Duration) {
	t.Helper()
	saved := s.now
	defer func() { s.now = saved }()
	s.now = at
	if m := c.Monotonic(); m < deadline {
		t.Fatalf("at true %d Monotonic = %d, before the deadline %d", at, m, deadline)
	}
	if at > earliest {
		s.now = at - 1
		if m := c.Monotonic(); m >= deadline {
			t.Fatalf("at true %d (one before firing) Monotonic = %d already reached the deadline %d", at-1, m, deadline)
		}
	}
}

func TestAfterFuncFiresExactlyAtMonotonicDeadline(t *testing.T) {
	ppms := []int64{0, 100, -100, 500_000, -500_000, 999_999, -999_999, 3, -7}
	starts := []time.Duration{0, 1, 333, 999_999, 1_234_567, 5 * time.Second}
	ds := []time.Duration{1, 2, 7, time.Microsecond, time.Millisecond + 1, time.Second, time.Hour}
	for _, ppm := range ppms {
		for _, start := range starts {
			for _, d := range ds {
				s, c := newClock(t, Config{MonotonicOffset: 42, DriftPPM: ppm})
				s.now = start
				deadline := c.Monotonic() + d
				td := c.TrueDuration(d)
				calls := 0
				var firedAt, firedMono time.Duration
				c.AfterFunc(d, func() { calls++; firedAt, firedMono = s.now, c.Monotonic() })
				if calls != 0 {
					t.Fatal("AfterFunc ran f inline")
				}
				if c.Pending() != 1 {
					t.Fatalf("Pending = %d, want 1", c.Pending())
				}
				at, ok := s.next()
				if !ok {
					t.Fatal("AfterFunc scheduled nothing")
				}
				if at-start != td {
					t.Fatalf("ppm %d start %d d %d: scheduled %d after now, TrueDuration says %d", ppm, start, d, at-start, td)
				}
				// With no fractional phase TrueDuration is the plain ceil division.
				if start == 0 && int64(td) != refCeilInv(d, ppm).Int64() {
					t.Fatalf("ppm %d d %d: TrueDuration = %d, want ceil %v", ppm, d, td, refCeilInv(d, ppm))
				}
				// It can never exceed the plain ceil division.
				if int64(td) > refCeilInv(d, ppm).Int64() {
					t.Fatalf("ppm %d start %d d %d: TrueDuration %d exceeds ceil %v", ppm, start, d, td, refCeilInv(d, ppm))
				}
				checkFireExact(t, s, c, at, start, deadline)
				s.runUntil(at - 1)
				if calls != 0 {
					t.Fatalf("fired early at true %d", s.now)
				}
				s.runUntil(at)
				if calls != 1 || firedAt != at || firedMono < deadline {
					t.Fatalf("ppm %d start %d d %d: calls %d at %d mono %d, want 1 call at %d with mono >= %d", ppm, start, d, calls, firedAt, firedMono, at, deadline)
				}
				if c.Pending() != 0 {
					t.Fatalf("Pending after firing = %d, want 0", c.Pending())
				}
			}
		}
	}
}

func TestTrueDuration(t *testing.T) {
	tests := []struct {
		ppm   int64
		start time.Duration
		mono  time.Duration
		want  time.Duration
	}{
		{0, 0, 0, 0},
		{0, 0, -5, 0},
		{0, 17, time.Second, time.Second},
		{100, 0, 1_000_100_000, time.Second},
		{100, 0, 1_000_100_001, time.Second + 1},
		{-100, 0, 999_900_000, time.Second},
		{-100, 0, 1, 2},    // advance(1) = 0, advance(2) = 1
		{500_000, 0, 3, 2}, // ceil(3/1.5) = 2
		{500_000, 0, 4, 3}, // ceil(4/1.5) = 3: advance(3) = 4
		{500_000, 1, 1, 1}, // at true 1 the reading is 1.5: at 2 it is 3 (>= 2.5)
		{-999_999, 0, 1, 1_000_000},
		{-999_999, 999_999, 1, 1}, // the fraction already accumulated counts
		{-999_999, 0, 1000, time.Second},
	}
	for _, tc := range tests {
		s, c := newClock(t, Config{DriftPPM: tc.ppm})
		s.now = tc.start
		got := c.TrueDuration(tc.mono)
		if got != tc.want {
			t.Errorf("ppm %d start %d: TrueDuration(%d) = %d, want %d", tc.ppm, tc.start, tc.mono, got, tc.want)
			continue
		}
		if tc.mono <= 0 {
			continue
		}
		m0 := c.Monotonic()
		s.now = tc.start + got
		if adv := c.Monotonic() - m0; adv < tc.mono {
			t.Errorf("ppm %d: after TrueDuration(%d) = %d the clock advanced only %d", tc.ppm, tc.mono, got, adv)
		}
		s.now = tc.start + got - 1
		if adv := c.Monotonic() - m0; adv >= tc.mono {
			t.Errorf("ppm %d: TrueDuration(%d) = %d is not the smallest: one less already advances %d", tc.ppm, tc.mono, got, adv)
		}
	}
}

func TestAfterFuncNonPositiveFiresNowViaScheduler(t *testing.T) {
	for _, d := range []time.Duration{0, -1, -time.Hour, math.MinInt64} {
		s, c := newClock(t, Config{DriftPPM: -999_999})
		s.now = 12345
		calls := 0
		c.AfterFunc(d, func() { calls++ })
		if calls != 0 {
			t.Fatalf("AfterFunc(%v) ran f inline", d)
		}
		at, ok := s.next()
		if !ok || at != 12345 {
			t.Fatalf("AfterFunc(%v) scheduled at %d (ok=%v), want the current true time 12345", d, at, ok)
		}
		s.step()
		if calls != 1 || s.now != 12345 {
			t.Fatalf("AfterFunc(%v): %d calls at %d", d, calls, s.now)
		}
	}
}

func TestTimerStop(t *testing.T) {
	s, c := newClock(t, Config{DriftPPM: 100})
	calls := 0
	tm := c.AfterFunc(time.Second, func() { calls++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending after Stop = %d", c.Pending())
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	if len(s.events) != 0 {
		t.Fatalf("Stop left %d events in the scheduler", len(s.events))
	}
	s.runUntil(time.Hour)
	if calls != 0 {
		t.Fatal("stopped timer fired")
	}

	// Stop after firing reports false.
	tm = c.AfterFunc(time.Second, func() { calls++ })
	s.runUntil(2 * time.Hour)
	if calls != 1 {
		t.Fatalf("calls = %d, want 1", calls)
	}
	if tm.Stop() {
		t.Fatal("Stop after the timer fired returned true")
	}

	// Stop from inside its own callback reports false: it is already running.
	var self interface{ Stop() bool }
	inside := true
	self = c.AfterFunc(0, func() { inside = self.Stop() })
	s.step()
	if inside {
		t.Fatal("Stop inside the callback returned true")
	}
}

func TestTimerReset(t *testing.T) {
	s, c := newClock(t, Config{})
	var fires []time.Duration
	tm := c.AfterFunc(10*time.Second, func() { fires = append(fires, s.now) })

	s.runUntil(3 * time.Second)
	if !tm.Reset(2 * time.Second) {
		t.Fatal("Reset of a pending timer returned false")
	}
	if c.Pending() != 1 || len(s.events) != 1 {
		t.Fatalf("after Reset: Pending %d, scheduler events %d, want 1 and 1", c.Pending(), len(s.events))
	}
	s.runUntil(time.Minute)
	if len(fires) != 1 || fires[0] != 5*time.Second {
		t.Fatalf("fires = %v, want exactly [5s] (Reset from now, old firing cancelled)", fires)
	}

	// Reset after firing re-arms and reports false.
	if tm.Reset(time.Second) {
		t.Fatal("Reset after firing returned true")
	}
	s.runUntil(2 * time.Minute)
	if len(fires) != 2 || fires[1] != time.Minute+time.Second {
		t.Fatalf("fires = %v, want a second firing at 1m1s", fires)
	}

	// Reset after Stop re-arms and reports false.
	tm.Reset(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of a re-armed timer returned false")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset after Stop returned true")
	}
	s.runUntil(3 * time.Minute)
	if len(fires) != 3 || fires[2] != 2*time.Minute+time.Second {
		t.Fatalf("fires = %v, want a third firing at 2m1s", fires)
	}

	// A callback may Reset its own timer to make a ticker.
	var tick interface{ Reset(time.Duration) bool }
	var ticks []time.Duration
	tick = c.AfterFunc(time.Second, func() {
		ticks = append(ticks, s.now)
		if len(ticks) < 3 {
			if tick.Reset(time.Second) {
				t.Error("Reset inside the callback returned true")
			}
		}
	})
	s.runUntil(time.Hour)
	want := []time.Duration{3*time.Minute + time.Second, 3*time.Minute + 2*time.Second, 3*time.Minute + 3*time.Second}
	if len(ticks) != 3 || ticks[0] != want[0] || ticks[1] != want[1] || ticks[2] != want[2] {
		t.Fatalf("ticks = %v, want %v", ticks, want)
	}
}

func TestResetUnderDriftUsesMonotonic(t *testing.T) {
	s, c := newClock(t, Config{DriftPPM: -500_000})
	s.now = 1 // reading 0.5
	var firedMono time.Duration
	tm := c.AfterFunc(time.Hour, func() { firedMono = c.Monotonic() })
	s.now = 4 // reading 2
	tm.Reset(3)
	deadline := c.Monotonic() + 3
	at, _ := s.next()
	checkFireExact(t, s, c, at, s.now, deadline)
	if at != 10 {
		t.Fatalf("Reset(3) at reading 2 under -50%% drift scheduled at %d, want 10", at)
	}
	s.runUntil(at)
	if firedMono != 5 {
		t.Fatalf("fired at reading %d, want 5", firedMono)
	}
}

func TestSetDriftPPMReschedulesPendingTimers(t *testing.T) {
	s, c := newClock(t, Config{})
	type fire struct {
		name     string
		at       time.Duration
		mono     time.Duration
		monoPrev time.Duration
	}
	var fires []fire
	names := []string{"A", "B", "C", "D"}
	var deadlines []time.Duration // indexed like names
	deadlineOf := func(name string) time.Duration { return deadlines[slices.Index(names, name)] }
	add := func(name string, d time.Duration) {
		deadlines = append(deadlines, c.Monotonic()+d)
		c.AfterFunc(d, func() {
			m := c.Monotonic()
			s.now--
			prev := c.Monotonic()
			s.now++
			fires = append(fires, fire{name, s.now, m, prev})
		})
	}
	add("A", 10*time.Second)
	add("B", 20*time.Second)
	add("C", 20*time.Second) // same deadline as B, created later
	add("D", time.Second)

	s.runUntil(2 * time.Second)
	if len(fires) != 1 || fires[0].name != "D" || fires[0].at != time.Second {
		t.Fatalf("fires = %+v, want D at 1s", fires)
	}
	cancels := s.cancels
	if err := c.SetDriftPPM(500_000); err != nil {
		t.Fatal(err)
	}
	if s.cancels-cancels != 3 || len(s.events) != 3 || c.Pending() != 3 {
		t.Fatalf("SetDriftPPM made %d cancels, left %d events and %d pending; want 3 each", s.cancels-cancels, len(s.events), c.Pending())
	}
	// A needs 8s more of monotonic time at 1.5x: ceil(8e9/1.5) true ns.
	at, _ := s.next()
	if at != 2*time.Second+5_333_333_334 {
		t.Fatalf("A rescheduled at %d, want %d", at, 2*time.Second+5_333_333_334)
	}
	checkFireExact(t, s, c, at, s.now, deadlineOf("A"))

	s.runUntil(4 * time.Second) // reading 2s + 3s = 5s
	if c.Monotonic() != 5*time.Second {
		t.Fatalf("Monotonic = %v, want 5s", c.Monotonic())
	}
	if err := c.SetDriftPPM(-500_000); err != nil {
		t.Fatal(err)
	}
	s.runUntil(time.Hour)

	want := []struct {
		name string
		at   time.Duration
	}{{"D", time.Second}, {"A", 14 * time.Second}, {"B", 34 * time.Second}, {"C", 34 * time.Second}}
	if len(fires) != len(want) {
		t.Fatalf("fires = %+v, want %v", fires, want)
	}
	for i, w := range want {
		f := fires[i]
		if f.name != w.name || f.at != w.at {
			t.Fatalf("fire %d = %s at %v, want %s at %v (all: %+v)", i, f.name, f.at, w.name, w.at, fires)
		}
		if f.mono < deadlineOf(f.name) || f.monoPrev >= deadlineOf(f.name) {
			t.Fatalf("%s fired at reading %v (one ns earlier %v), deadline %v", f.name, f.mono, f.monoPrev, deadlineOf(f.name))
		}
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0", c.Pending())
	}
}

func TestSetDriftPPMReschedulesWithFractionalPhase(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type rec struct {
		deadline, armedAt, firedAt, mono, prev time.Duration
		fired                                  bool
	}
	for range 300 {
		s, c := newClock(t, Config{MonotonicOffset: time.Duration(r.Int64N(1000)), DriftPPM: r.Int64N(1_999_999) - 999_999})
		var recs []*rec
		for range 5 {
			s.now += time.Duration(r.Int64N(3_000_000))
			d := time.Duration(r.Int64N(10_000_000)) - 1000
			rc := &rec{deadline: c.Monotonic() + max(d, 0), armedAt: s.now}
			recs = append(recs, rc)
			c.AfterFunc(d, func() {
				rc.fired, rc.firedAt, rc.mono = true, s.now, c.Monotonic()
				s.now--
				rc.prev = c.Monotonic()
				s.now++
			})
			if r.IntN(2) == 0 {
				s.runUntil(s.now + time.Duration(r.Int64N(1_000_000)))
				if err := c.SetDriftPPM(r.Int64N(1_999_999) - 999_999); err != nil {
					t.Fatal(err)
				}
				for _, o := range recs {
					if !o.fired {
						o.armedAt = s.now // rescheduled now
					}
				}
			}
		}
		s.runUntil(math.MaxInt64)
		if c.Pending() != 0 {
			t.Fatalf("Pending = %d after running everything", c.Pending())
		}
		for i, rc := range recs {
			if !rc.fired || rc.mono < rc.deadline {
				t.Fatalf("timer %d: fired=%v at reading %d, deadline %d", i, rc.fired, rc.mono, rc.deadline)
			}
			// Unless it was already due when last (re)scheduled, it fired
			// at the first nanosecond the deadline was reached.
			if rc.firedAt > rc.armedAt && rc.prev >= rc.deadline {
				t.Fatalf("timer %d fired late: reading %d one ns before firing at %d, deadline %d", i, rc.prev, rc.firedAt, rc.deadline)
			}
		}
	}
}

func TestSetDriftPPMInsideCallback(t *testing.T) {
	s, c := newClock(t, Config{})
	var other time.Duration = -1
	c.AfterFunc(10*time.Second, func() { other = s.now })
	c.AfterFunc(2*time.Second, func() {
		if err := c.SetDriftPPM(-500_000); err != nil {
			t.Error(err)
		}
	})
	s.runUntil(time.Hour)
	// 2s of reading at 1x, then 8s of reading at 0.5x = 16s true.
	if other != 18*time.Second {
		t.Fatalf("other timer fired at %v, want 18s", other)
	}
}

func TestDropTimers(t *testing.T) {
	s, c := newClock(t, Config{DriftPPM: 100})
	calls := 0
	t1 := c.AfterFunc(time.Second, func() { calls++ })
	c.AfterFunc(2*time.Second, func() { calls++ })
	c.AfterFunc(0, func() { calls++ })
	if c.Pending() != 3 {
		t.Fatalf("Pending = %d, want 3", c.Pending())
	}
	cancels := s.cancels
	c.DropTimers()
	if s.cancels != cancels {
		t.Fatalf("DropTimers called Scheduler.Cancel %d times", s.cancels-cancels)
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending after DropTimers = %d", c.Pending())
	}
	// Even if the scheduler still delivered the events, none may run.
	if len(s.events) != 3 {
		t.Fatalf("DropTimers touched the scheduler's events: %d left", len(s.events))
	}
	s.runUntil(time.Hour)
	if calls != 0 {
		t.Fatalf("%d dropped timers fired", calls)
	}
	if t1.Stop() {
		t.Fatal("Stop of a dropped timer returned true")
	}

	// After the crash the clock keeps working for the restarted process.
	s.discardAll()
	c.AfterFunc(time.Second, func() { calls++ })
	if t1.Reset(time.Second) {
		t.Fatal("Reset of a dropped timer returned true")
	}
	if c.Pending() != 2 {
		t.Fatalf("Pending = %d, want 2", c.Pending())
	}
	s.runUntil(2 * time.Hour)
	if calls != 2 {
		t.Fatalf("calls after restart = %d, want 2", calls)
	}
}

func TestSameDeadlineFiresInCreationOrder(t *testing.T) {
	s, c := newClock(t, Config{DriftPPM: 7})
	var order []int
	for i := range 10 {
		c.AfterFunc(time.Second, func() { order = append(order, i) })
		if i%3 == 0 {
			if err := c.SetDriftPPM(7); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.runUntil(time.Hour)
	for i, v := range order {
		if v != i {
			t.Fatalf("order = %v, want creation order", order)
		}
	}
	if len(order) != 10 {
		t.Fatalf("%d timers fired, want 10", len(order))
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" means valid
	}{
		{"zero", Config{}, ""},
		{"typical", Config{MonotonicOffset: time.Hour, DriftPPM: -200, WallEpoch: time.Unix(0, 0)}, ""},
		{"edges", Config{DriftPPM: 999_999}, ""},
		{"low edge", Config{DriftPPM: -999_999}, ""},
		{"negative offset", Config{MonotonicOffset: -1}, "MonotonicOffset"},
		{"ppm too high", Config{DriftPPM: 1_000_000}, "DriftPPM"},
		{"ppm too low", Config{DriftPPM: -1_000_000}, "DriftPPM"},
		{"ppm huge", Config{DriftPPM: math.MinInt64}, "DriftPPM"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate = nil, want an error about %s", tc.name, tc.want)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "fakeclock: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q should start with \"fakeclock: \" and mention %s", tc.name, msg, tc.want)
		}
		if rest := strings.TrimPrefix(msg, "fakeclock: "); rest[0] < 'a' || rest[0] > 'z' {
			t.Errorf("%s: error %q should be lowercase", tc.name, msg)
		}
	}
}

func TestNewPanicsOnBadInput(t *testing.T) {
	mustPanic(t, func() { New(&fakeSched{}, Config{DriftPPM: 2_000_000}) }, "fakeclock: ", "DriftPPM", "Validate")
	mustPanic(t, func() { New(&fakeSched{}, Config{MonotonicOffset: -time.Second}) }, "fakeclock: ", "MonotonicOffset")
	mustPanic(t, func() { New(nil, Config{}) }, "fakeclock: ", "nil Scheduler")
}

func TestBlockingMethodsPanic(t *testing.T) {
	_, c := newClock(t, Config{})
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"Sleep", func() { c.Sleep(time.Second) }, sleepPanic},
		{"After", func() { c.After(time.Second) }, afterPanic},
		{"NewTimer", func() { c.NewTimer(time.Second) }, newTimerPanic},
		{"NewTicker", func() { c.NewTicker(time.Second) }, newTickerPanic},
	}
	for _, tc := range tests {
		mustPanic(t, tc.f, tc.want, tc.name, "single simulation thread", "use AfterFunc")
	}
	tm := c.AfterFunc(time.Second, func() {})
	mustPanic(t, func() { tm.Chan() }, chanPanic, "no channel")
	mustPanic(t, func() { c.AfterFunc(time.Second, nil) }, "nil func")
	if c.Pending() != 1 {
		t.Fatalf("a panicking call changed the pending timers: %d", c.Pending())
	}
}

// deafSched is a fakeSched whose Cancel removes nothing: every event it was
// ever given is delivered, as a scheduler that cannot take events back
// would do. Timers must still run once, at their current deadline.
type deafSched struct{ fakeSched }

func (s *deafSched) Cancel(uint64) bool { s.cancels++; return true }

func TestReplacedEventsAreIgnoredWhenStillDelivered(t *testing.T) {
	s := &deafSched{}
	c := New(s, Config{})
	var fires []time.Duration
	f := func() { fires = append(fires, s.now) }

	a := c.AfterFunc(time.Second, f) // reset: runs only at its new deadline
	a.Reset(3 * time.Second)
	b := c.AfterFunc(time.Second, f) // stopped: never runs
	b.Stop()
	c.AfterFunc(2*time.Second, f) // rescheduled by SetDriftPPM: runs once
	s.runUntil(500 * time.Millisecond)
	if err := c.SetDriftPPM(0); err != nil {
		t.Fatal(err)
	}
	d := c.AfterFunc(time.Second, f) // stopped, then re-armed: runs once
	d.Stop()
	d.Reset(4 * time.Second)
	if got := len(s.events); got != 8 {
		t.Fatalf("the scheduler holds %d events, want 8 (none taken back)", got)
	}
	s.runUntil(time.Hour)
	want := []time.Duration{2 * time.Second, 3 * time.Second, 4*time.Second + 500*time.Millisecond}
	if !slices.Equal(fires, want) {
		t.Fatalf("fires = %v, want %v", fires, want)
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0", c.Pending())
	}
}

func TestSetDriftPPMReArmsInCreationOrderAfterStopsAndResets(t *testing.T) {
	// Stops, resets and firings reorder the clock's pending list; the
	// re-arming walk must still go by creation order, so timers that fall
	// due at the same instant fire in the order they were created.
	s, c := newClock(t, Config{})
	var order []int
	timers := make([]interface {
		Stop() bool
		Reset(time.Duration) bool
	}, 8)
	for i := range timers {
		timers[i] = c.AfterFunc(time.Hour, func() { order = append(order, i) })
	}
	c.AfterFunc(time.Second, func() {}) // fires, removing itself from the middle
	for _, i := range []int{0, 5, 2} {
		timers[i].Stop()
	}
	s.runUntil(2 * time.Second)
	for _, i := range []int{5, 0, 7, 2, 3} {
		timers[i].Reset(time.Minute) // 7 and 3 were pending
	}
	for _, i := range []int{1, 4, 6} {
		timers[i].Reset(time.Minute + time.Millisecond)
	}
	// Without a drift change the five due first would fire in the order
	// they were reset (5 0 7 2 3); re-armed, they fall due at one instant
	// and only the order of re-arming breaks the tie.
	if err := c.SetDriftPPM(999_999); err != nil {
		t.Fatal(err)
	}
	at, _ := s.next()
	s.runUntil(at)
	if want := []int{0, 2, 3, 5, 7}; !slices.Equal(order, want) {
		t.Fatalf("first instant fired %v, want creation order %v", order, want)
	}
	s.runUntil(time.Hour)
	if want := []int{0, 2, 3, 5, 7, 1, 4, 6}; !slices.Equal(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
}
