package lockapi_test

import (
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// BenchmarkShedDecision is the admission decision alone at the limit: one
// atomic add and one atomic load, then the undo.
func BenchmarkShedDecision(b *testing.B) {
	l := lockapi.NewLimiter(lockapi.LimiterConfig{Min: 1, Max: 1})
	l.TryAcquire()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.TryAcquire() {
				b.Fatal("admitted over the limit")
			}
		}
	})
}

// BenchmarkShedHTTP is what a shed client sees: the round trip of a 429
// on loopback while the limit is taken by requests stuck in the backend,
// with its p99.
func BenchmarkShedHTTP(b *testing.B) {
	m := lockapitest.NewMem()
	blk := newBlocker(m)
	_, base := lockapitest.Serve(b, m, lockapi.Config{Limiter: lockapi.LimiterConfig{Min: 4, Max: 4}})
	defer blk.fill(b, base, 4)()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c := &http.Client{Transport: tr}
	lat := make([]time.Duration, 0, b.N)
	body := `{"client":"b","ttl_ms":1000,"request_id":"q"}`
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		resp, err := c.Post(base+"/v1/locks/x/acquire", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 {
			b.Fatalf("status %d, want 429", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// hammer runs goroutines that each make n admission decisions on l as fast
// as they can: an admitted request yields the processor once (so others
// find the limit taken) and reports its latency with Done, which feeds the
// algorithm under its mutex while the rest are being shed. It returns the
// duration of every shed decision, sorted, and of every admitted one, and
// the most requests it saw admitted at once.
func hammer(l *lockapi.Limiter, goroutines, n int) (shed, admitted []time.Duration, peak int64) {
	type out struct{ shed, admitted []time.Duration }
	outs := make([]out, goroutines)
	var held, top atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := out{shed: make([]time.Duration, 0, n)}
			for range n {
				t0 := time.Now()
				ok := l.TryAcquire()
				d := time.Since(t0)
				if !ok {
					o.shed = append(o.shed, d)
					continue
				}
				o.admitted = append(o.admitted, d)
				if h := held.Add(1); h > top.Load() {
					top.Store(h) // racy max: may miss a peak, never invents one
				}
				runtime.Gosched()
				held.Add(-1)
				l.Done(time.Since(t0), false)
			}
			outs[g] = o
		}()
	}
	wg.Wait()
	for _, o := range outs {
		shed = append(shed, o.shed...)
		admitted = append(admitted, o.admitted...)
	}
	slices.Sort(shed)
	slices.Sort(admitted)
	return shed, admitted, top.Load()
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/1000)]
}

// BenchmarkShedDecisionOverload is the shedding decision under overload,
// as a caller times it: 256 goroutines hammer a gradient limiter whose
// limit (8..32) is far below them, the admitted ones feeding the algorithm
// (under its mutex) while the others are shed. It reports the p50, p99
// and p99.9 of the shed decisions and the share shed; the budget (seed
// 003) is a p99 under 0.1 ms.
//
//	go test -run '^$' -bench ShedDecisionOverload -benchtime 2000000x ./lockapi
func BenchmarkShedDecisionOverload(b *testing.B) {
	l := lockapi.NewLimiter(lockapi.LimiterConfig{Algorithm: lockapi.AlgorithmGradient, Min: 8, Max: 32})
	const goroutines = 256
	b.ResetTimer()
	shed, admitted, _ := hammer(l, goroutines, max(b.N/goroutines, 1))
	b.StopTimer()
	b.ReportMetric(float64(pct(shed, 500).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(pct(shed, 990).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(pct(shed, 999).Nanoseconds()), "p99.9-ns")
	b.ReportMetric(100*float64(len(shed))/float64(len(shed)+len(admitted)), "shed-%")
}
