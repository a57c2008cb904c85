package lockapitest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cycle does one acquire→release cycle for worker w with request number
// n on resource; granted false means the lock was held (shared mode) and
// the attempt is repeated at once.
type Cycle func(ctx context.Context, w, n int, resource string) (granted bool, err error)

// RunCycles is the benchmark loop shared by the lock services' cycle
// benchmarks (lockd, nodesvc), so their figures are measured the same
// way and can be compared: workers goroutines share b.N cycles, each on
// its own lock ("bench-W") or, shared, all on one ("bench-shared"). It
// reports cycles/s and the p50/p99 latency of a completed cycle, failed
// attempts included; the first error fails the benchmark.
func RunCycles(b *testing.B, ctx context.Context, workers int, shared bool, cycle Cycle) {
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := "bench-" + strconv.Itoa(w)
			if shared {
				res = "bench-shared"
			}
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				t0 := time.Now()
				for attempt := 0; ; attempt++ {
					ok, err := cycle(ctx, w, int(n)*100+attempt%100, res)
					if err != nil {
						failed.Store(err)
						return
					}
					if ok {
						break
					}
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/el.Seconds(), "cycles/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
