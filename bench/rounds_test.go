package bench

import (
	"strings"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{3}, Spread{Median: 3, Min: 3, Max: 3, N: 1}},
		{[]float64{5, 1, 3}, Spread{Median: 3, Min: 1, Max: 5, N: 3}},
		{[]float64{4, 1, 2, 10}, Spread{Median: 3, Min: 1, Max: 10, N: 4}},
	} {
		if got := SpreadOf(c.in); got != c.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestSummarizeTakesRatiosWithinARound: a ratio pairs the two rows of one
// round. Here the node is twice etcd in round 1 and level in round 2,
// while the machine ran three times faster in round 2: the median of the
// within-round ratios is 1.5×, where the ratio of the two medians would
// be 200 ÷ 175. A failed round counts as failed and pairs with nothing.
func TestSummarizeTakesRatiosWithinARound(t *testing.T) {
	rs := []Result{
		{System: "node", Round: 1, Mode: PerWorker, Workers: 64, Cycles: 100, CyclesPerSec: 100, P99us: 1000},
		{System: "etcd", Round: 1, Mode: PerWorker, Workers: 64, Cycles: 50, CyclesPerSec: 50, P99us: 4000},
		{System: "node", Round: 2, Mode: PerWorker, Workers: 64, Cycles: 300, CyclesPerSec: 300, P99us: 1000},
		{System: "etcd", Round: 2, Mode: PerWorker, Workers: 64, Cycles: 300, CyclesPerSec: 300, P99us: 1000},
		{System: "node", Round: 3, Mode: PerWorker, Workers: 64, Err: "down"},
		{System: "etcd", Round: 3, Mode: PerWorker, Workers: 64, Cycles: 9, CyclesPerSec: 9, P99us: 9},
		{System: "node", Round: 1, Mode: Shared, Workers: 1, Cycles: 7, CyclesPerSec: 7, P99us: 7},
	}
	rows := Summarize(rs, "etcd")
	if len(rows) != 3 {
		t.Fatalf("%d rows, want node and etcd per-worker 64 and node shared 1: %+v", len(rows), rows)
	}
	node := rows[0]
	if node.System != "node" || node.Mode != PerWorker || node.Workers != 64 {
		t.Fatalf("first row %+v", node)
	}
	if node.Failed != 1 || node.CyclesPerSec != (Spread{Median: 200, Min: 100, Max: 300, N: 2}) {
		t.Errorf("node: failed %d, cycles/s %+v; want 1 failed, median 200 of 2", node.Failed, node.CyclesPerSec)
	}
	if node.Ratio != (Spread{Median: 1.5, Min: 1, Max: 2, N: 2}) {
		t.Errorf("node ÷ etcd %+v, want the within-round ratios 2 and 1", node.Ratio)
	}
	if node.P99Ratio != (Spread{Median: 0.625, Min: 0.25, Max: 1, N: 2}) {
		t.Errorf("node p99 ÷ etcd %+v", node.P99Ratio)
	}
	if etcd := rows[1]; etcd.Ratio.N != 3 || etcd.Ratio.Median != 1 {
		t.Errorf("etcd ÷ etcd %+v, want 1 in each of 3 rounds", etcd.Ratio)
	}
	if alone := rows[2]; alone.Ratio.N != 0 || alone.CyclesPerSec.N != 1 {
		t.Errorf("a cell without etcd: %+v", alone)
	}
	md := MarkdownSummary(rows, "etcd")
	for _, want := range []string{
		"| node | per-worker | 64 | 2 (1 failed) | 200 [100–300] | 1.00 ms [1.00 ms–1.00 ms] | 1.50× [1.00–2.00] | 0.62× [0.25–1.00] |",
		"| node | shared | 1 | 1 | 7.0 [7.0–7.0] | 7 µs [7 µs–7 µs] | – | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}
