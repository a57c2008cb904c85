// Package admission holds the concurrency-limit algorithms of fencesim's
// bounded ingress as pure state machines: a sample (a request's latency,
// the requests in flight when it ended, whether the backend pushed back)
// goes in, the new limit comes out. They read time only from the clock they
// are given (process.Clock satisfies Clock), use integer arithmetic only,
// and start no goroutines, so the simulator can run them on virtual time
// and get bit-identical results on every platform, and the HTTP lock API
// (package lockapi) runs the same code behind its lock-free shedding gate.
//
// They are not safe for concurrent use: a real server serializes Sample
// calls (lockapi.Limiter holds a mutex there; the shedding decision itself
// never touches these types).
package admission

import (
	"fmt"
	"time"
)

// Clock is the one reading the algorithms need: process.Clock and
// fakeclock.Clock satisfy it, and so does any real monotonic source.
type Clock interface {
	Monotonic() time.Duration
}

// Algorithm adapts a concurrency limit from completed requests.
type Algorithm interface {
	// Sample records one completed request: its latency, the requests
	// in flight when it ended (itself included) and whether the backend
	// reported overload. It returns the limit to apply from now on.
	Sample(rtt time.Duration, inflight int, dropped bool) int
	// Limit is the current limit.
	Limit() int
}

// milli is the fixed-point scale of limits and ratios: 1000 is 1.0.
const milli = 1000

// GradientConfig tunes a Gradient. Zero fields take the defaults of
// Netflix's concurrency-limits Gradient2Limit where it has one (ratios
// are integers here, in percent, so the arithmetic stays exact).
type GradientConfig struct {
	// Min and Max bound the limit.
	Min, Max int
	// Initial is the starting limit; 0 means Max, so a service does not
	// shed while it learns its latency (the first idle windows bring the
	// limit down to twice the demand).
	Initial int
	// TolerancePercent is how far the short-term latency may rise above
	// the long-term one before the limit falls: 150 (1.5x) by default.
	TolerancePercent int
	// SmoothingPercent is the share of each window's new estimate taken
	// into the limit: 20 by default (at most a 10% fall per window).
	SmoothingPercent int
	// QueueSize is the headroom added to the estimate each window, which
	// is what lets the limit probe upward: 4 (at most Max) by default.
	QueueSize int
	// LongWindow is the span, in windows, of the long-term latency's
	// exponential average: 600 by default.
	LongWindow int
	// WindowSamples and WindowMin: a window closes (and the limit moves)
	// once it holds WindowSamples samples and WindowMin has passed on the
	// clock since it opened; 10 samples and 10ms by default. WindowMax
	// closes a window with fewer samples: 1s by default.
	WindowSamples        int
	WindowMin, WindowMax time.Duration
}

// withDefaults fills zero fields.
func (c GradientConfig) withDefaults() GradientConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Min, 1)
	def(&c.Max, 1000)
	def(&c.Initial, c.Max)
	def(&c.TolerancePercent, 150)
	def(&c.SmoothingPercent, 20)
	def(&c.QueueSize, min(4, c.Max))
	def(&c.LongWindow, 600)
	def(&c.WindowSamples, 10)
	if c.WindowMin == 0 {
		c.WindowMin = 10 * time.Millisecond
	}
	if c.WindowMax == 0 {
		c.WindowMax = time.Second
	}
	return c
}

// Validate reports the first field out of range, after defaults.
func (c GradientConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Min < 1 || c.Max < c.Min || c.Max > 1_000_000:
		return fmt.Errorf("admission: limit bounds %d..%d; need 1 <= Min <= Max <= 1000000", c.Min, c.Max)
	case c.Initial < c.Min || c.Initial > c.Max:
		return fmt.Errorf("admission: initial limit %d outside %d..%d", c.Initial, c.Min, c.Max)
	case c.TolerancePercent < 100 || c.TolerancePercent > 1000:
		return fmt.Errorf("admission: tolerance %d%%; need 100..1000", c.TolerancePercent)
	case c.SmoothingPercent < 1 || c.SmoothingPercent > 100:
		return fmt.Errorf("admission: smoothing %d%%; need 1..100", c.SmoothingPercent)
	case c.QueueSize < 0 || c.QueueSize > c.Max:
		return fmt.Errorf("admission: queue size %d; need 0..Max", c.QueueSize)
	case c.LongWindow < 1 || c.LongWindow > 100_000:
		return fmt.Errorf("admission: long window %d; need 1..100000", c.LongWindow)
	case c.WindowSamples < 1 || c.WindowMin < 0 || c.WindowMax < c.WindowMin:
		return fmt.Errorf("admission: window %d samples, %v..%v; need >= 1 sample and 0 <= WindowMin <= WindowMax", c.WindowSamples, c.WindowMin, c.WindowMax)
	}
	return nil
}

// Gradient is a Gradient2-style adaptive concurrency limit (Netflix
// concurrency-limits): it compares the short-term latency (the average
// over a window of samples) with a long-term exponential average of those
// windows. While the short term stays within Tolerance of the long term
// the service is not queueing, and the limit grows by QueueSize per busy
// window; when it rises above, the limit is scaled by
// gradient = clamp(Tolerance·long/short, 0.5, 1), smoothed. So the limit
// follows what the backend can take now, without a fixed latency target:
// a brownout that doubles latency halves the concurrency let through, and
// the limit grows back as latency falls.
//
// One rule from Gradient2 keeps the long term honest: while it exceeds
// twice the short term (latency fell after a long overload) it decays 5%
// per window instead of waiting for the average. A window with a backend
// overload reply (dropped) takes the steepest gradient, 0.5.
//
// Two rules depart from Gradient2, each because the overload experiment
// in this package's tests (a flood at three times a service-time queue's
// capacity, in the simulator) showed p99 running away without it:
//
//   - While the service queues (short above Tolerance·long), the long term
//     follows at a tenth of its rate. Gradient2's long term absorbs the
//     queueing it is meant to detect: the limit settles where short is
//     Tolerance·long, long creeps up by a factor 1+1/LongWindow per window,
//     and a 10 s flood at ~80 windows/s let p99 reach 20x the service time.
//     A lasting slowdown of the backend is still absorbed, ten times
//     slower.
//   - A window whose requests stayed under half the limit (app-limited)
//     does not leave the limit alone, as Gradient2 does, but drifts it down
//     (smoothed) toward twice the demand seen. Otherwise a limit that
//     started at Max, or grew during a busy spell, stays there while the
//     service idles, and the next flood is admitted up to it: with a 400
//     limit the onset of the flood queued 400 requests and they alone were
//     above the p99. Twice the demand leaves room for bursts, and the
//     limit grows back by QueueSize per busy window.
//
// Everything is integer: latencies in nanoseconds, the limit and ratios in
// thousandths.
type Gradient struct {
	cfg   GradientConfig
	clock Clock

	limit int64 // thousandths

	long     int64 // long-term latency, ns; 0 until the first window
	longSeen int   // windows averaged so far, up to the warm-up

	// the open window
	start       time.Duration
	samples     int
	sum         int64 // ns
	maxInflight int
	dropped     bool
}

// warmup is the number of windows the long term averages plainly before it
// turns exponential, as Gradient2's ExpAvgMeasurement does.
const warmup = 10

// NewGradient returns a Gradient on clock. It panics on an invalid cfg
// (run Validate first to report it).
func NewGradient(clock Clock, cfg GradientConfig) *Gradient {
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	cfg = cfg.withDefaults()
	return &Gradient{cfg: cfg, clock: clock, limit: int64(cfg.Initial) * milli, start: clock.Monotonic()}
}

// Limit implements Algorithm.
func (g *Gradient) Limit() int { return int(g.limit / milli) }

// LongRTT is the long-term latency (0 before the first window closes).
func (g *Gradient) LongRTT() time.Duration { return time.Duration(g.long) }

// Sample implements Algorithm.
func (g *Gradient) Sample(rtt time.Duration, inflight int, dropped bool) int {
	if rtt < 0 {
		rtt = 0
	}
	g.samples++
	g.sum += int64(rtt)
	g.maxInflight = max(g.maxInflight, inflight)
	g.dropped = g.dropped || dropped
	now := g.clock.Monotonic()
	open := now - g.start
	if open < g.cfg.WindowMin || g.samples < g.cfg.WindowSamples && open < g.cfg.WindowMax {
		return g.Limit()
	}
	short := max(g.sum/int64(g.samples), 1)
	g.update(short, g.maxInflight, g.dropped)
	g.start, g.samples, g.sum, g.maxInflight, g.dropped = now, 0, 0, 0, false
	return g.Limit()
}

// update closes a window whose average latency was short.
func (g *Gradient) update(short int64, inflight int, dropped bool) {
	switch {
	case g.longSeen < warmup:
		g.longSeen++
		g.long += (short - g.long) / int64(g.longSeen)
	case short*100 > int64(g.cfg.TolerancePercent)*g.long:
		// Queueing: follow at a tenth of the rate (see the type's doc).
		g.long += (short - g.long) * 2 / int64(10*g.cfg.LongWindow+1)
	default:
		g.long += (short - g.long) * 2 / int64(g.cfg.LongWindow+1)
	}
	g.long = max(g.long, 1)
	if g.long > 2*short {
		g.long = g.long * 95 / 100
	}
	s := int64(g.cfg.SmoothingPercent)
	if !dropped && int64(inflight)*2*milli < g.limit {
		// App-limited: drift down toward twice the demand seen, so that
		// a sudden flood meets a limit near what the service was just
		// doing rather than Max (see the type's doc).
		next := (g.limit*(100-s) + int64(2*inflight)*milli*s) / 100
		g.limit = min(max(next, int64(g.cfg.Min)*milli), int64(g.cfg.Max)*milli)
		return
	}
	grad := int64(milli / 2)
	if !dropped {
		grad = min(max(int64(g.cfg.TolerancePercent)*g.long*(milli/100)/short, milli/2), milli)
	}
	est := g.limit*grad/milli + int64(g.cfg.QueueSize)*milli
	next := (g.limit*(100-s) + est*s) / 100
	g.limit = min(max(next, int64(g.cfg.Min)*milli), int64(g.cfg.Max)*milli)
}
