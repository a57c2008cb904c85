package lockapi_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
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
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			http.Post(base+"/v1/locks/stuck/acquire", "application/json", strings.NewReader(`{"client":"a","ttl_ms":1000,"request_id":"q"}`))
		}()
	}
	for range 4 {
		<-blk.arrived
	}
	defer func() { close(blk.release); wg.Wait() }()
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
