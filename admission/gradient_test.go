package admission_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/admission"
	"github.com/fencesim/fencesim/fakeclock"
)

// manual is a fakeclock scheduler whose true time the test moves by hand;
// the limiter arms no timers.
type manual struct{ now time.Duration }

func (m *manual) TrueNow() time.Duration { return m.now }
func (m *manual) Schedule(time.Duration, fakeclock.Handler) uint64 {
	panic("the limiter must not arm timers")
}
func (m *manual) Cancel(uint64) bool { return false }

// newClock is a node clock with drift, so the test also shows the limiter
// measures its windows on the node's own monotonic reading.
func newClock() (*manual, *fakeclock.Clock) {
	m := &manual{}
	return m, fakeclock.New(m, fakeclock.Config{MonotonicOffset: time.Hour, DriftPPM: 200})
}

// window feeds one window of samples at latency rtt with inflight requests
// and advances the clock past WindowMin; it returns the limit after it.
func window(m *manual, g *admission.Gradient, rtt time.Duration, inflight int, dropped bool) int {
	m.now += 10 * time.Millisecond
	var lim int
	for range 10 {
		lim = g.Sample(rtt, inflight, dropped)
	}
	return lim
}

// TestGradientFallsAndRecovers: under load, the limit climbs to Max while
// latency is flat; when latency quadruples it falls to Min (not below)
// within a bounded number of windows, and stays near it while the long
// term slowly absorbs the new latency; when latency returns it recovers to
// Max (not above), the long term decaying back without waiting for its
// average.
func TestGradientFallsAndRecovers(t *testing.T) {
	m, c := newClock()
	g := admission.NewGradient(c, admission.GradientConfig{Min: 10, Max: 200, Initial: 50})
	busy := func() int { return g.Limit() } // every window uses the whole limit
	lim := 0
	for range 400 {
		lim = window(m, g, 10*time.Millisecond, busy(), false)
	}
	if lim != 200 {
		t.Fatalf("limit %d after 400 busy windows at a flat 10ms, want Max 200", lim)
	}
	if got := g.LongRTT(); got != 10*time.Millisecond {
		t.Fatalf("long-term latency %v, want 10ms", got)
	}
	fell := -1
	for i := range 100 {
		prev := g.Limit()
		lim = window(m, g, 40*time.Millisecond, busy(), false)
		if fell < 0 && lim > prev || fell >= 0 && lim > 2*10 {
			t.Fatalf("window %d of 40ms latency: limit %d -> %d (reached Min at window %d)", i, prev, lim, fell)
		}
		if lim < 10 {
			t.Fatalf("limit %d below Min 10", lim)
		}
		if lim == 10 && fell < 0 {
			fell = i
		}
	}
	if fell < 0 || fell > 50 {
		t.Fatalf("limit reached Min at window %d of 40ms latency (limit now %d), want within 50", fell, lim)
	}
	longAfter := g.LongRTT()
	if longAfter <= 10*time.Millisecond || longAfter >= 20*time.Millisecond {
		t.Fatalf("long-term latency %v after 100 slow windows: it should lag, between 10ms and 20ms", longAfter)
	}
	back := -1
	for i := range 400 {
		prev := g.Limit()
		lim = window(m, g, 5*time.Millisecond, busy(), false)
		if lim < prev || lim > 200 {
			t.Fatalf("recovery window %d: limit %d -> %d (must not fall, nor pass Max 200)", i, prev, lim)
		}
		if lim == 200 {
			back = i
			break
		}
	}
	if back < 0 {
		t.Fatalf("limit %d after 400 fast windows, want back at Max 200", lim)
	}
	if got := g.LongRTT(); got > 10*time.Millisecond {
		t.Fatalf("long-term latency %v after latency fell to 5ms: the >2x decay should have brought it down", got)
	}
}

// TestGradientIdleAndWindows: samples within one WindowMin of the clock
// move nothing, whatever their latency; an idle service (in flight under
// half the limit) never grows, and drifts down to twice its demand
// whatever the latency; a backend overload reply takes the steepest fall.
func TestGradientIdleAndWindows(t *testing.T) {
	m, c := newClock()
	g := admission.NewGradient(c, admission.GradientConfig{Min: 1, Max: 100})
	for range 20 {
		window(m, g, time.Millisecond, 100, false)
	}
	if g.Limit() != 100 {
		t.Fatalf("limit %d, want 100", g.Limit())
	}
	for range 1000 { // no time passes: one window, not closed
		g.Sample(time.Second, 100, false)
	}
	if g.Limit() != 100 {
		t.Fatalf("limit %d moved within one window of the clock", g.Limit())
	}
	m.now += 10 * time.Millisecond
	g.Sample(time.Second, 100, false)
	if g.Limit() != 90 { // 0.8·100 + 0.2·(0.5·100 + 4) = 90.8
		t.Fatalf("limit %d after the slow window, want 90", g.Limit())
	}
	for i := range 50 {
		prev := g.Limit()
		lim := window(m, g, time.Second, 10, false) // 10 < 90/2: idle, whatever the latency
		if lim > prev || lim < 20 {
			t.Fatalf("idle window %d: limit %d -> %d; it must only drift down, to twice the demand (20)", i, prev, lim)
		}
		if lim == 20 {
			break
		}
	}
	if g.Limit() != 20 {
		t.Fatalf("limit %d after 50 idle windows with 10 in flight, want 20", g.Limit())
	}
	g2 := admission.NewGradient(c, admission.GradientConfig{Min: 1, Max: 100})
	for range 20 {
		window(m, g2, time.Millisecond, 100, false)
	}
	if lim := window(m, g2, time.Millisecond, 1, true); lim != 90 {
		t.Fatalf("limit %d after a window with an overload reply, want 90", lim)
	}
}

// TestGradientBoundsAndDeterminism: whatever the samples and the clock do,
// the limit stays within Min..Max, and the same inputs give the same
// limits (integer arithmetic: nothing depends on the platform).
func TestGradientBoundsAndDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		minL := rapid.IntRange(1, 50).Draw(t, "min")
		maxL := rapid.IntRange(minL, 5000).Draw(t, "max")
		cfg := admission.GradientConfig{Min: minL, Max: maxL,
			TolerancePercent: rapid.IntRange(100, 300).Draw(t, "tol"),
			SmoothingPercent: rapid.IntRange(1, 100).Draw(t, "smooth"),
			LongWindow:       rapid.IntRange(1, 1000).Draw(t, "long")}
		type in struct {
			adv      time.Duration
			rtt      time.Duration
			inflight int
			drop     bool
		}
		ins := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) in {
			return in{time.Duration(rapid.Int64Range(0, int64(50*time.Millisecond)).Draw(t, "adv")),
				time.Duration(rapid.Int64Range(-1, int64(10*time.Second)).Draw(t, "rtt")),
				rapid.IntRange(0, 2*maxL).Draw(t, "inflight"), rapid.IntRange(0, 20).Draw(t, "drop") == 0}
		}), 1, 300).Draw(t, "samples")
		run := func() []int {
			m, c := newClock()
			g := admission.NewGradient(c, cfg)
			var out []int
			for _, s := range ins {
				m.now += s.adv
				l := g.Sample(s.rtt, s.inflight, s.drop)
				if l < minL || l > maxL {
					t.Fatalf("limit %d outside %d..%d", l, minL, maxL)
				}
				out = append(out, l)
			}
			return out
		}
		a, b := run(), run()
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("sample %d: limit %d then %d from the same inputs", i, a[i], b[i])
			}
		}
	})
}

// TestAIMD: slow requests shrink the limit once per Target to Min, fast
// busy ones grow it back to Max.
func TestAIMD(t *testing.T) {
	m, c := newClock()
	a := admission.NewAIMD(c, admission.AIMDConfig{Min: 4, Max: 64, Target: time.Millisecond})
	for range 100 {
		a.Sample(time.Second, 64, false) // same instant: one decrease
	}
	if a.Limit() != 57 {
		t.Fatalf("limit %d after a burst of slow replies at one instant, want 57 (one decrease)", a.Limit())
	}
	for range 100 {
		m.now += 2 * time.Millisecond
		a.Sample(time.Second, 64, false)
	}
	if a.Limit() != 4 {
		t.Fatalf("limit %d, want Min 4", a.Limit())
	}
	for range 5000 {
		a.Sample(time.Microsecond, a.Limit(), false)
	}
	if a.Limit() != 64 {
		t.Fatalf("limit %d after fast busy requests, want Max 64", a.Limit())
	}
}
