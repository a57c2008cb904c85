package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/fencesim/fencesim/bench"
)

// TestGoalsCountRoundsThatMeetTheBar: each goal is checked per round on
// the ratio of two rows of that round, in just the cells it asks about
// and that ran both of its systems. A round below the bar is missed (the
// canary: node at 1.5× etcd in round 2), and so is a round in which the
// goal's system failed or completed nothing where its baseline ran; a
// round without the baseline does not count.
func TestGoalsCountRoundsThatMeetTheBar(t *testing.T) {
	row := func(sys string, round int, mode string, workers int, cps, p99 float64) bench.Result {
		return bench.Result{System: names[sys], Round: round, Mode: mode, Workers: workers, Cycles: 10, CyclesPerSec: cps, P99us: p99}
	}
	failed := func(sys string, round int, mode string, workers int) bench.Result {
		return bench.Result{System: names[sys], Round: round, Mode: mode, Workers: workers, Err: "did not start"}
	}
	rs := []bench.Result{
		row("node", 1, bench.PerWorker, 64, 4000, 30e3), row("etcd", 1, bench.PerWorker, 64, 1900, 70e3),
		row("node", 2, bench.PerWorker, 64, 3000, 80e3), row("etcd", 2, bench.PerWorker, 64, 2000, 70e3),
		failed("node", 3, bench.PerWorker, 64), row("etcd", 3, bench.PerWorker, 64, 2000, 70e3),
		row("lockd", 1, bench.PerWorker, 64, 4000, 30e3), row("redis", 1, bench.PerWorker, 64, 12000, 9e3),
		row("lockd", 2, bench.PerWorker, 64, 6000, 30e3), row("redis", 2, bench.PerWorker, 64, 11000, 9e3),
		// per-worker 1: node completed nothing in round 1, met the bars in round 2.
		{System: names["node"], Round: 1, Mode: bench.PerWorker, Workers: 1}, row("etcd", 1, bench.PerWorker, 1, 300, 9e3),
		row("node", 2, bench.PerWorker, 1, 700, 3e3), row("etcd", 2, bench.PerWorker, 1, 300, 9e3),
		// per-worker 8: etcd only; shared 1: node only.
		row("etcd", 1, bench.PerWorker, 8, 700, 25e3), row("node", 1, bench.Shared, 1, 700, 3e3),
		row("node", 1, bench.Shared, 64, 1500, 60e3), row("etcd", 1, bench.Shared, 64, 140, 480e3),
		row("node", 2, bench.Shared, 64, 900, 90e3), failed("etcd", 2, bench.Shared, 64), // no baseline in round 2
		// shared 8 is not asked by the lockd goals at 64 workers.
		row("lockd", 1, bench.Shared, 8, 1300, 10e3), row("etcd", 1, bench.Shared, 8, 77, 110e3),
	}
	o := options{modes: []string{bench.PerWorker, bench.Shared}, workers: []int{1, 8, 64}}
	got := map[string]GoalCheck{}
	for _, c := range checkGoals(rs, o) {
		got[c.Goal+" | "+c.Mode+" "+strconv.Itoa(c.Workers)+" | "+c.Bound] = c
	}
	type want struct {
		met, rounds int
		median      float64
	}
	wants := map[string]want{
		"fencesim-node ≥ 2× etcd's cycles/s | per-worker 1 | cycles/s ≥ 2×":                 {1, 2, 700.0 / 300},
		"fencesim-node ≥ 2× etcd's cycles/s | per-worker 64 | cycles/s ≥ 2×":                {1, 3, (4000.0/1900 + 1.5) / 2},
		"fencesim-node's p99 ≤ etcd's | per-worker 1 | p99 ≤ 1×":                            {1, 2, 3.0 / 9},
		"fencesim-node's p99 ≤ etcd's | per-worker 64 | p99 ≤ 1×":                           {1, 3, (30.0/70 + 80.0/70) / 2},
		"fencesim-node ≥ 10× etcd's cycles/s on a shared lock | shared 64 | cycles/s ≥ 10×": {1, 1, 1500.0 / 140},
		"fencesim-node's p99 ≤ etcd's | shared 64 | p99 ≤ 1×":                               {1, 1, 60.0 / 480},
		"fencesim-lockd's p99 ≤ etcd's at 64 workers | per-worker 64 | p99 ≤ 1×":            {2, 2, 30.0 / 70},
		"fencesim-lockd ≥ 50 % of raw Redis's cycles/s | per-worker 64 | cycles/s ≥ 0.5×":   {1, 2, (4000.0/12000 + 6000.0/11000) / 2},
	}
	for key, w := range wants {
		c, ok := got[key]
		if !ok {
			t.Errorf("%s: not checked", key)
			continue
		}
		if c.Met != w.met || c.Rounds != w.rounds || math.Abs(c.Ratio.Median-w.median) > 1e-9 {
			t.Errorf("%s: met %d of %d, median %v; want %d of %d, %v", key, c.Met, c.Rounds, c.Ratio.Median, w.met, w.rounds, w.median)
		}
	}
	for key := range got {
		if _, ok := wants[key]; !ok {
			t.Errorf("%s: checked, but no round has both of its rows in a cell it asks about", key)
		}
	}
	if md := goalsMarkdown(checkGoals(rs, o)); !strings.Contains(md, "| fencesim-node ≥ 2× etcd's cycles/s | per-worker 64 | cycles/s ≥ 2× | 1.80× [1.50–2.11] | **1 of 3** |") {
		t.Errorf("goals table:\n%s", md)
	}
}

// TestRoundOrderIsBalanced: over a full cycle of rounds each system runs
// equally often in each place and right after each other system.
func TestRoundOrderIsBalanced(t *testing.T) {
	for n := 1; n <= 5; n++ {
		systems := allSystems
		if n <= len(allSystems) {
			systems = allSystems[:n]
		} else {
			systems = append(slices.Clone(allSystems), "extra")
		}
		rows := n
		if n%2 == 1 {
			rows = 2 * n
		}
		places := map[[2]string]int{}
		pairs := map[[2]string]int{}
		for round := 1; round <= rows; round++ {
			order := roundOrder(systems, round)
			if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, slices.Sorted(slices.Values(systems))) {
				t.Fatalf("n %d round %d: %v is not an order of %v", n, round, order, systems)
			}
			for i, s := range order {
				places[[2]string{s, strconv.Itoa(i)}]++
				if i > 0 {
					pairs[[2]string{order[i-1], s}]++
				}
			}
			if again := roundOrder(systems, round+rows); !slices.Equal(again, order) {
				t.Errorf("n %d: round %d runs %v, round %d %v: not a cycle of %d", n, round, order, round+rows, again, rows)
			}
		}
		for k, c := range places {
			if c != rows/n {
				t.Errorf("n %d: %s in place %s %d times of %d rounds, want %d", n, k[0], k[1], c, rows, rows/n)
			}
		}
		if want := n * (n - 1); len(pairs) != want {
			t.Errorf("n %d: %d ordered neighbour pairs, want every one of %d", n, len(pairs), want)
		}
		for k, c := range pairs {
			if c != rows/n {
				t.Errorf("n %d: %s then %s %d times, want %d", n, k[0], k[1], c, rows/n)
			}
		}
	}
}

// TestUnmeasuredFillsTheCellsOfAFailedSystem: a system that failed to
// start, or part way, gets a failed row for every cell it did not measure.
func TestUnmeasuredFillsTheCellsOfAFailedSystem(t *testing.T) {
	o := options{modes: []string{bench.PerWorker, bench.Shared}, workers: []int{1, 64}}
	done := []bench.Result{{Mode: bench.PerWorker, Workers: 1, Cycles: 5}}
	rs := unmeasured(done, o, errors.New("cluster down"))
	if len(rs) != 4 || rs[0].Err != "" {
		t.Fatalf("%+v: want the measured cell kept and three failed ones", rs)
	}
	for _, r := range rs[1:] {
		if r.Err != "cluster down" {
			t.Errorf("%+v: want the error", r)
		}
	}
	if rows := bench.Summarize(append(rs, bench.Result{Mode: bench.Shared, Workers: 64, Round: 2, Cycles: 1, CyclesPerSec: 1}), "etcd"); rows[len(rows)-1].Failed != 1 {
		t.Errorf("summary %+v: the failed round is not counted", rows)
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
