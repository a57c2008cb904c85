package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRunCountsOnlyTheWindow: a cycle of two ≥1ms attempts on 4 workers
// completes at most 200 cycles in a 100ms window; the 200ms warm-up's
// (as many again, twice over) are not counted, and held attempts are
// counted as attempts, not cycles.
func TestRunCountsOnlyTheWindow(t *testing.T) {
	// One counter per worker (each touched only by its own worker), so
	// every worker alternates held, granted exactly: a counter shared by
	// the workers lets one of them draw "held" several times in a row
	// on a loaded machine, and the attempts-per-cycle figure drifts.
	var calls [4]int
	r := Run(context.Background(), "fake", Cell{Mode: PerWorker, Workers: 4, Warmup: 200 * time.Millisecond, Duration: 100 * time.Millisecond},
		func(ctx context.Context, w int, resource string) (bool, error) {
			time.Sleep(time.Millisecond)
			calls[w]++
			return calls[w]%2 == 0, nil // every other attempt finds the lock held
		})
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	// 4 workers × 100ms / (2 attempts × ≥1ms) ≤ 200 cycles; a busy
	// machine sleeps longer, so only the ceiling and a floor are firm.
	if r.Cycles < 1 || r.Cycles > 200 {
		t.Errorf("cycles %d: want 1..200 (the warm-up's must not count)", r.Cycles)
	}
	if r.Attempts != 2*r.Cycles {
		t.Errorf("attempts %d for %d cycles: want exactly 2 per cycle", r.Attempts, r.Cycles)
	}
	if r.P50us < 1000 || r.P99us < r.P50us {
		t.Errorf("p50 %vµs p99 %vµs: want p50 ≥ 1ms and p99 ≥ p50", r.P50us, r.P99us)
	}
	if want := float64(r.Cycles) / 0.1; r.CyclesPerSec != want {
		t.Errorf("cycles/s %v, want %v", r.CyclesPerSec, want)
	}
}

// TestRunStopsAtTheFirstError: a failing cycle ends the cell with its
// error instead of spinning until the window closes.
func TestRunStopsAtTheFirstError(t *testing.T) {
	start := time.Now()
	r := Run(context.Background(), "fake", Cell{Mode: Shared, Workers: 8, Duration: 5 * time.Second},
		func(ctx context.Context, w int, resource string) (bool, error) {
			if resource != "shared-8" {
				return false, errors.New("wrong resource " + resource)
			}
			return false, errors.New("backend down")
		})
	if r.Err != "backend down" {
		t.Errorf("error %q, want backend down", r.Err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v: the error did not stop the cell", el)
	}
}

func TestMarkdownRatiosToTheBaseline(t *testing.T) {
	rs := []Result{
		{System: "a", Mode: Shared, Workers: 8, Cycles: 100, Attempts: 300, CyclesPerSec: 1000, P50us: 500, P99us: 2000, MaxUs: 3000},
		{System: "etcd", Mode: Shared, Workers: 8, Cycles: 10, Attempts: 10, CyclesPerSec: 80, P50us: 100000, P99us: 110000, MaxUs: 120000},
		{System: "a", Mode: PerWorker, Workers: 1, Cycles: 5, Attempts: 5, CyclesPerSec: 50, P50us: 20, P99us: 30, MaxUs: 40},
		{System: "b", Mode: Shared, Workers: 8, Err: "down"},
		{System: "c", Mode: Shared, Workers: 8, Cycles: 1, Attempts: 64, CyclesPerSec: 4, P50us: 1.5e6, P99us: 2.675e6, MaxUs: 3e6},
	}
	got := Markdown(rs, "etcd")
	for _, want := range []string{
		"| a | shared | 8 | 1,000 | 500 µs | 2.00 ms | 3.00 ms | 3.0 | 12.50× | 0.02× |",
		"| etcd | shared | 8 | 80 | 100 ms | 110 ms | 120 ms | 1.0 | 1.00× | 1.00× |",
		"| a | per-worker | 1 | 50 | 20 µs | 30 µs | 40 µs | 1.0 | – | – |",
		"| b | shared | 8 | failed: down |",
		"| c | shared | 8 | 4.0 | 1.50 s | 2.67 s | 3.00 s | 64.0 | 0.05× | 24.32× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestRunTimesAStarvedWorker: a worker whose one cycle outlasts the
// window (starved of a shared lock) is not a cycle of the window, but its
// wait is in the latencies: it must not vanish from max.
func TestRunTimesAStarvedWorker(t *testing.T) {
	r := Run(context.Background(), "fake", Cell{Mode: Shared, Workers: 2, Duration: 100 * time.Millisecond},
		func(ctx context.Context, w int, resource string) (bool, error) {
			if w == 1 {
				time.Sleep(150 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			return true, nil
		})
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	if r.MaxUs < 150e3 {
		t.Errorf("max %vµs: the starved worker's 150ms cycle is missing", r.MaxUs)
	}
	if r.Cycles < 5 || r.Cycles > 100 {
		t.Errorf("cycles %d: want worker 0's 5..100 only", r.Cycles)
	}
}
