package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/fencesim/fencesim/bench"
)

// TestGoalsCountRoundsThatMeetTheBar: each goal is checked per round on
// the ratio of two rows of that round, and a round below the bar is
// counted as missed (the canary: node at 1.5× etcd in round 2).
func TestGoalsCountRoundsThatMeetTheBar(t *testing.T) {
	row := func(sys string, round int, mode string, workers int, cps, p99 float64) bench.Result {
		return bench.Result{System: names[sys], Round: round, Mode: mode, Workers: workers, Cycles: 10, CyclesPerSec: cps, P99us: p99}
	}
	rs := []bench.Result{
		row("node", 1, bench.PerWorker, 64, 4000, 30e3), row("etcd", 1, bench.PerWorker, 64, 1900, 70e3),
		row("node", 2, bench.PerWorker, 64, 3000, 80e3), row("etcd", 2, bench.PerWorker, 64, 2000, 70e3),
		row("lockd", 1, bench.PerWorker, 64, 4000, 30e3), row("redis", 1, bench.PerWorker, 64, 12000, 9e3),
		row("lockd", 2, bench.PerWorker, 64, 6000, 30e3), row("redis", 2, bench.PerWorker, 64, 11000, 9e3),
		row("node", 1, bench.Shared, 64, 1500, 60e3), row("etcd", 1, bench.Shared, 64, 140, 480e3),
		row("node", 2, bench.Shared, 64, 900, 90e3), // etcd's round-2 shared cell failed:
		{System: names["etcd"], Round: 2, Mode: bench.Shared, Workers: 64, Err: "down"},
	}
	o := options{modes: []string{bench.PerWorker, bench.Shared}, workers: []int{64}}
	got := map[string]GoalCheck{}
	for _, c := range checkGoals(rs, o) {
		got[c.Goal+" "+c.Mode+" "+c.Bound] = c
	}
	for _, want := range []struct {
		key         string
		met, rounds int
		median      float64
	}{
		{"fencesim-node ≥ 2× etcd's cycles/s per-worker cycles/s ≥ 2×", 1, 2, (4000.0/1900 + 1.5) / 2},
		{"fencesim-node's p99 ≤ etcd's per-worker p99 ≤ 1×", 1, 2, (30.0/70 + 80.0/70) / 2},
		{"fencesim-node ≥ 10× etcd's cycles/s on a shared lock shared cycles/s ≥ 10×", 1, 1, 1500.0 / 140},
		{"fencesim-node's p99 ≤ etcd's shared p99 ≤ 1×", 1, 1, 60.0 / 480},
		{"fencesim-lockd's p99 ≤ etcd's at 64 workers per-worker p99 ≤ 1×", 2, 2, 30.0 / 70},
		{"fencesim-lockd's p99 ≤ etcd's at 64 workers shared p99 ≤ 1×", 0, 0, 0}, // no lockd row on a shared lock: absent
		{"fencesim-lockd ≥ 50 % of raw Redis's cycles/s per-worker cycles/s ≥ 0.5×", 1, 2, (4000.0/12000 + 6000.0/11000) / 2},
	} {
		c, ok := got[want.key]
		if want.rounds == 0 {
			if ok {
				t.Errorf("%s: checked %+v, but no round has both rows", want.key, c)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: not checked; have %v", want.key, got)
			continue
		}
		if c.Met != want.met || c.Rounds != want.rounds || c.Ratio.Median < want.median-1e-9 || c.Ratio.Median > want.median+1e-9 {
			t.Errorf("%s: met %d of %d, median %v; want %d of %d, %v", want.key, c.Met, c.Rounds, c.Ratio.Median, want.met, want.rounds, want.median)
		}
	}
	if md := goalsMarkdown(checkGoals(rs, o)); !strings.Contains(md, "| fencesim-node ≥ 2× etcd's cycles/s | per-worker 64 | cycles/s ≥ 2× | 1.80× [1.50–2.11] | **1 of 2** |") {
		t.Errorf("goals table:\n%s", md)
	}
}

// TestRoundsSmoke: -rounds 2 runs every cell twice, numbers the rounds,
// and reports a summary row per system and cell and the lockd goal.
func TestRoundsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("serves lockd")
	}
	mr := miniredis.RunT(t)
	args := []string{"-only", "lockd,redis", "-modes", "per-worker", "-workers", "1", "-duration", "100ms", "-warmup", "10ms",
		"-rounds", "2", "-redis-addr", mr.Addr(), "-data", t.TempDir()}
	rep := runJSON(t, args)
	rounds := map[string][]int{}
	for _, r := range rep.Results {
		rounds[r.System] = append(rounds[r.System], r.Round)
	}
	for _, sys := range []string{"fencesim-lockd", names["redis"]} {
		if got := rounds[sys]; len(got) != 2 || got[0] != 1 || got[1] != 2 {
			t.Errorf("%s ran in rounds %v, want [1 2]", sys, got)
		}
	}
	if rep.Machine.Rounds != 2 || len(rep.Summary) != 2 || rep.Summary[0].CyclesPerSec.N != 2 {
		t.Errorf("summary %+v (rounds %d): want a row per system, each of 2 rounds", rep.Summary, rep.Machine.Rounds)
	}
	if len(rep.Goals) != 1 || rep.Goals[0].Rounds != 2 {
		t.Errorf("goals %+v: want lockd's share of raw Redis over 2 rounds", rep.Goals)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(out.String(), "Medians over 2 rounds") ||
		!strings.Contains(out.String(), "| fencesim-lockd ≥ 50 % of raw Redis's cycles/s | per-worker 1 |") {
		t.Errorf("exit %d, table:\n%s", code, out.String())
	}
}
