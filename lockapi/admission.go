package lockapi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/admission"
)

// Limiter is bounded ingress: at most Limit() requests in flight (a
// holder's renewal or release may go up to twice that: TryAcquireHolder),
// and a request over the limit is shed at once (never queued: a queue in front of
// a lock service only turns overload into timeouts that look like lost
// leases). The shedding decision is one atomic add and one atomic load,
// whatever the algorithm; only an admitted request's completion (Done)
// takes a mutex, to feed the algorithm that moves the limit:
//
//   - gradient (the default): admission.Gradient, Gradient2-style; the
//     limit follows the ratio of long-term to short-term latency, so it
//     needs no latency target and tracks a backend whose speed changes;
//   - aimd: admission.AIMD, additive increase / multiplicative decrease
//     around a hand-set latency Target;
//   - static: the limit stays at Max (also any algorithm with Min == Max).
//
// The algorithms are fencesim's own (package admission) rather than a
// library (failsafe-go's adaptivelimiter, platinummonkey/go-concurrency-
// limits): both libraries queue or block by default, bring their own
// dependency trees, and read the machine's clock, while these are integer
// state machines on a clock interface that the simulator drives too.
type Limiter struct {
	inflight atomic.Int64
	limit    atomic.Int64 // the current integer limit, read on the fast path

	mu  sync.Mutex
	alg admission.Algorithm // nil: static
}

// Limiter algorithms.
const (
	AlgorithmGradient = "gradient"
	AlgorithmAIMD     = "aimd"
	AlgorithmStatic   = "static"
)

// Algorithms lists the accepted LimiterConfig.Algorithm values.
var Algorithms = []string{AlgorithmGradient, AlgorithmAIMD, AlgorithmStatic}

// LimiterConfig bounds and tunes a Limiter.
type LimiterConfig struct {
	// Algorithm is gradient, aimd or static; empty means gradient.
	Algorithm string
	// Min and Max bound the limit. It starts at Max (Gradient.Initial
	// can say otherwise), so a service never sheds before it has seen
	// overload; with Min == Max the limit is static.
	Min, Max int
	// Target (aimd only) is the latency above which a request counts as
	// a sign of overload, and the shortest time between two decreases.
	Target time.Duration
	// Gradient tunes the gradient algorithm beyond Min and Max (which
	// override its own); zero fields take admission's defaults.
	Gradient admission.GradientConfig
	// Clock is what the algorithm measures its windows with; nil means
	// the machine's monotonic clock.
	Clock admission.Clock
}

// Validate reports what is wrong with c.
func (c LimiterConfig) Validate() error {
	switch c.Algorithm {
	case "", AlgorithmGradient:
		g := c.Gradient
		g.Min, g.Max = c.Min, c.Max
		return g.Validate()
	case AlgorithmAIMD:
		return admission.AIMDConfig{Min: c.Min, Max: c.Max, Target: c.Target}.Validate()
	case AlgorithmStatic:
		if c.Max < 1 {
			return fmt.Errorf("lockapi: static limit %d; need >= 1", c.Max)
		}
		return nil
	default:
		return fmt.Errorf("lockapi: limiter algorithm %q; want one of %v", c.Algorithm, Algorithms)
	}
}

// machineClock is the machine's monotonic clock (time.Since reads it).
type machineClock struct{ origin time.Time }

func (c machineClock) Monotonic() time.Duration { return time.Since(c.origin) }

// NewLimiter returns a limiter starting at cfg.Max (or cfg.Gradient's
// Initial). Out-of-range bounds are clamped (Min to at least 1, Max to at
// least Min); any other invalid setting panics (run Validate first).
func NewLimiter(cfg LimiterConfig) *Limiter {
	cfg.Min = max(cfg.Min, 1)
	cfg.Max = max(cfg.Max, cfg.Min)
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	if cfg.Clock == nil {
		cfg.Clock = machineClock{origin: time.Now()}
	}
	l := &Limiter{}
	switch {
	case cfg.Min == cfg.Max || cfg.Algorithm == AlgorithmStatic:
	case cfg.Algorithm == AlgorithmAIMD:
		l.alg = admission.NewAIMD(cfg.Clock, admission.AIMDConfig{Min: cfg.Min, Max: cfg.Max, Target: cfg.Target})
	default:
		g := cfg.Gradient
		g.Min, g.Max = cfg.Min, cfg.Max
		l.alg = admission.NewGradient(cfg.Clock, g)
	}
	if l.alg != nil {
		l.limit.Store(int64(l.alg.Limit()))
	} else {
		l.limit.Store(int64(cfg.Max))
	}
	return l
}

// TryAcquire admits a request if fewer than Limit() are in flight. On true
// the caller must call Done exactly once.
func (l *Limiter) TryAcquire() bool {
	if l.inflight.Add(1) > l.limit.Load() {
		l.inflight.Add(-1)
		return false
	}
	return true
}

// TryAcquireHolder admits a holder's request (a renewal or a release) if
// fewer than twice Limit() are in flight: holders come first. Shedding a
// release keeps a lock held that its holder is done with, and shedding a
// renewal takes the lease of a holder at work; either lengthens the
// contention that filled the limit (the replica's ingress sheds the same
// way: reference.Replica.shed). Twice the limit keeps it a limit. On true
// the caller must call Done exactly once.
func (l *Limiter) TryAcquireHolder() bool {
	if l.inflight.Add(1) > 2*l.limit.Load() {
		l.inflight.Add(-1)
		return false
	}
	return true
}

// Done ends an admitted request that took latency; overloaded says the
// backend itself pushed back.
func (l *Limiter) Done(latency time.Duration, overloaded bool) {
	inflight := l.inflight.Add(-1) + 1 // counting this one
	if l.alg == nil {
		return
	}
	l.mu.Lock()
	l.limit.Store(int64(l.alg.Sample(latency, int(inflight), overloaded)))
	l.mu.Unlock()
}

// Leave ends an admitted request without a latency sample: a waiting
// acquire gives its slot back before it waits, since its latency is the
// holder's, not the backend's, and a waiter must not keep the holder's
// release out.
func (l *Limiter) Leave() { l.inflight.Add(-1) }

// Limit is the current concurrency limit.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight is the number of admitted requests not yet done.
func (l *Limiter) InFlight() int { return int(l.inflight.Load()) }
