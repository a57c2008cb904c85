package admission

import (
	"fmt"
	"time"
)

// AIMDConfig tunes an AIMD limit.
type AIMDConfig struct {
	Min, Max int // bounds of the limit; it starts at Max
	// Target is the latency above which a request counts as a sign of
	// overload, and the shortest time between two decreases.
	Target time.Duration
	// BackoffPercent is the multiplicative decrease: the limit keeps this
	// share of itself; 90 by default.
	BackoffPercent int
}

// Validate reports the first field out of range, after defaults.
func (c AIMDConfig) Validate() error {
	switch {
	case c.Min < 1 || c.Max < c.Min || c.Max > 1_000_000:
		return fmt.Errorf("admission: limit bounds %d..%d; need 1 <= Min <= Max <= 1000000", c.Min, c.Max)
	case c.Target <= 0:
		return fmt.Errorf("admission: AIMD target %v; need > 0", c.Target)
	case c.BackoffPercent < 0 || c.BackoffPercent >= 100:
		return fmt.Errorf("admission: backoff %d%%; need 1..99 (0: 90)", c.BackoffPercent)
	}
	return nil
}

// AIMD is a latency-target limit: additive increase of 1/limit per request
// that finishes under Target while the limit is in use (in flight at least
// half of it), multiplicative decrease (at most once per Target) when a
// request takes longer or the backend pushes back. Unlike Gradient it
// needs the latency target set by hand: too low and it sheds a healthy
// service, too high and it lets a queue build before reacting.
type AIMD struct {
	cfg      AIMDConfig
	clock    Clock
	limit    int64 // thousandths
	lastDrop time.Duration
	dropped  bool // a decrease has happened (lastDrop is meaningful)
}

// NewAIMD returns an AIMD limit on clock starting at cfg.Max. It panics on
// an invalid cfg (run Validate first to report it).
func NewAIMD(clock Clock, cfg AIMDConfig) *AIMD {
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	if cfg.BackoffPercent == 0 {
		cfg.BackoffPercent = 90
	}
	return &AIMD{cfg: cfg, clock: clock, limit: int64(cfg.Max) * milli}
}

// Limit implements Algorithm.
func (a *AIMD) Limit() int { return int(a.limit / milli) }

// Sample implements Algorithm.
func (a *AIMD) Sample(rtt time.Duration, inflight int, dropped bool) int {
	switch {
	case dropped || rtt > a.cfg.Target:
		now := a.clock.Monotonic()
		if a.dropped && now-a.lastDrop < a.cfg.Target {
			break // one decrease per window: a burst of slow replies is one signal
		}
		a.dropped, a.lastDrop = true, now
		a.limit = max(int64(a.cfg.Min)*milli, a.limit*int64(a.cfg.BackoffPercent)/100)
	case int64(inflight)*2*milli >= a.limit:
		a.limit = min(int64(a.cfg.Max)*milli, a.limit+milli*milli/a.limit)
	}
	return a.Limit()
}
