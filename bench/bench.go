// Package bench measures lock services the way the benchmark
// asks: acquire→release cycles per second and per-cycle latency, with a
// fixed number of concurrent workers, each either on its own lock
// ("per-worker") or all on one ("shared"). It knows no lock service: a
// system plugs in as a Cycle, so the same harness times fencesim-node,
// fencesim-lockd and, from its own module (bench/etcd), etcd's mutex — the
// figures of one run are comparable because only the Cycle differs.
//
// It imports nothing of fencesim (internal/detlint holds it to that), so
// the etcd driver module can import it without building the rest.
package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Modes are the two lock layouts of a cell.
const (
	PerWorker = "per-worker" // one lock per worker: throughput of independent locks
	Shared    = "shared"     // one lock for every worker: the contended handoff
)

// Cycle acquires resource for worker w, releases it and reports whether it
// was granted. granted false with a nil error means the lock was held and
// the attempt is to be repeated (a client that polls); a client that
// waits (etcd's mutex) simply returns once it held and released the lock.
// An error ends the cell.
type Cycle func(ctx context.Context, w int, resource string) (granted bool, err error)

// Cell is one measurement: a mode, a number of workers and the times.
type Cell struct {
	Mode     string
	Workers  int
	Warmup   time.Duration // cycles ending before it are not counted
	Duration time.Duration // the measured window after the warm-up
	// Prefix makes resource names unique to a run and a cell, so that
	// cells on one long-lived cluster do not meet each other's locks.
	Prefix string
}

// Result is one cell's figures. Cycles (and cycles/s, attempts) count the
// cycles that started after the warm-up and ended inside the window.
// Latencies are of every cycle that started inside the window, however
// late it ended — from its first attempt to its release, held-and-retried
// attempts included — so a worker starved of a shared lock for the whole
// window still shows in p99 and max instead of vanishing from them.
type Result struct {
	System       string  `json:"system"`
	Round        int     `json:"round,omitempty"` // of a run of several (fencesim-bench -rounds), from 1
	Mode         string  `json:"mode"`
	Workers      int     `json:"workers"`
	Cycles       int     `json:"cycles"`   // completed inside the window
	Attempts     int     `json:"attempts"` // acquire attempts of those cycles, granted or held
	Seconds      float64 `json:"seconds"`  // the window
	CyclesPerSec float64 `json:"cycles_per_sec"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	Err          string  `json:"error,omitempty"`
}

// P50 and P99 are the percentiles as durations.
func (r Result) P50() time.Duration { return time.Duration(r.P50us * float64(time.Microsecond)) }
func (r Result) P99() time.Duration { return time.Duration(r.P99us * float64(time.Microsecond)) }

// Max is the slowest cycle.
func (r Result) Max() time.Duration { return time.Duration(r.MaxUs * float64(time.Microsecond)) }

// Resource is worker w's lock name in cell c.
func (c Cell) Resource(w int) string {
	if c.Mode == Shared {
		return c.Prefix + "shared-" + strconv.Itoa(c.Workers)
	}
	return c.Prefix + c.Mode + "-" + strconv.Itoa(c.Workers) + "-w" + strconv.Itoa(w)
}

// Run runs cycle on c.Workers goroutines for c.Warmup+c.Duration and
// measures as Result says. A worker finishes the cycle it is in when the
// window closes (never abandoning a held lock mid-cycle, and timing the
// wait of one still queued); ctx bounds that tail. The
// first error, if any, is in Result.Err, and the figures then cover what
// completed before it.
func Run(ctx context.Context, system string, c Cell, cycle Cycle) Result {
	res := Result{System: system, Mode: c.Mode, Workers: c.Workers, Seconds: c.Duration.Seconds()}
	if c.Workers < 1 || c.Duration <= 0 || (c.Mode != PerWorker && c.Mode != Shared) {
		res.Err = fmt.Sprintf("bench: invalid cell %+v", c)
		return res
	}
	start := time.Now()
	from, to := start.Add(c.Warmup), start.Add(c.Warmup+c.Duration)
	lat := make([][]time.Duration, c.Workers)
	attempts, cycles := make([]int, c.Workers), make([]int, c.Workers)
	var stop atomic.Bool
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Go(func() {
			name := c.Resource(w)
			for !stop.Load() {
				t0 := time.Now()
				if t0.After(to) {
					return
				}
				tries := 0
				for {
					ok, err := cycle(ctx, w, name)
					tries++
					if err == nil && ctx.Err() != nil {
						err = ctx.Err()
					}
					if err != nil {
						once.Do(func() { first = err })
						stop.Store(true)
						return
					}
					if ok {
						break
					}
					if stop.Load() {
						return
					}
				}
				end := time.Now()
				if t0.Before(from) {
					continue
				}
				lat[w] = append(lat[w], end.Sub(t0))
				if !end.After(to) {
					cycles[w]++
					attempts[w] += tries
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		res.Err = first.Error()
		if errors.Is(first, context.DeadlineExceeded) {
			res.Err = "bench: the cell's time ran out: " + res.Err
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	for w := range c.Workers {
		res.Cycles += cycles[w]
		res.Attempts += attempts[w]
	}
	res.CyclesPerSec = float64(res.Cycles) / c.Duration.Seconds()
	if len(all) > 0 {
		res.P50us = micros(all[len(all)/2])
		res.P99us = micros(all[min(len(all)-1, len(all)*99/100)])
		res.MaxUs = micros(all[len(all)-1])
	}
	return res
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
