package lockapi

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter is bounded ingress: at most Limit() requests in flight, and a
// request over the limit is shed at once (never queued: a queue in front of
// a lock service only turns overload into timeouts that look like lost
// leases). The limit adapts AIMD-style on latency: it grows by 1/limit per
// request that finishes under Target while the limit was in use, and shrinks
// by Backoff (at most once per Target window) when a request takes longer
// or the backend reports overload. With Min == Max it is a static limit.
//
// Hand-rolled rather than a library (failsafe-go's adaptivelimiter,
// platinummonkey/go-concurrency-limits): the decision here must be one
// atomic add on the shedding path, and both libraries queue or block by
// default and bring their own dependency trees for ~80 lines of policy.
type Limiter struct {
	inflight atomic.Int64
	limit    atomic.Int64 // the current integer limit, read on the fast path

	mu       sync.Mutex
	cfg      LimiterConfig
	flimit   float64
	lastDrop time.Time
}

// LimiterConfig bounds and tunes a Limiter.
type LimiterConfig struct {
	Min, Max int // bounds of the limit; the limit starts at Max
	// Target is the latency above which a request counts as a sign of
	// overload (and the shortest time between two decreases).
	Target time.Duration
	// Backoff is the multiplicative decrease, in (0,1); 0 means 0.9.
	Backoff float64
}

// NewLimiter returns a limiter starting at cfg.Max.
func NewLimiter(cfg LimiterConfig) *Limiter {
	if cfg.Min < 1 {
		cfg.Min = 1
	}
	if cfg.Max < cfg.Min {
		cfg.Max = cfg.Min
	}
	if cfg.Backoff <= 0 || cfg.Backoff >= 1 {
		cfg.Backoff = 0.9
	}
	l := &Limiter{cfg: cfg, flimit: float64(cfg.Max)}
	l.limit.Store(int64(cfg.Max))
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

// Done ends an admitted request that took latency; overloaded says the
// backend itself pushed back.
func (l *Limiter) Done(latency time.Duration, overloaded bool) {
	inflight := l.inflight.Add(-1) + 1 // counting this one
	if l.cfg.Min == l.cfg.Max {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case overloaded || latency > l.cfg.Target:
		if now.Sub(l.lastDrop) < l.cfg.Target {
			return // one decrease per window: a burst of slow replies is one signal
		}
		l.lastDrop = now
		l.flimit = math.Max(float64(l.cfg.Min), l.flimit*l.cfg.Backoff)
	case float64(inflight) >= l.flimit/2:
		// Grow only while the limit is in use: an idle service proves
		// nothing about what it can take.
		l.flimit = math.Min(float64(l.cfg.Max), l.flimit+1/l.flimit)
	default:
		return
	}
	l.limit.Store(int64(l.flimit))
}

// Limit is the current concurrency limit.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// InFlight is the number of admitted requests not yet done.
func (l *Limiter) InFlight() int { return int(l.inflight.Load()) }
