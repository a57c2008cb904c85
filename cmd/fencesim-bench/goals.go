package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencesim/fencesim/bench"
)

// goal is one of the bars that ../shared/anchors/lock-services.md and
// issue 23 set for our services, checked cell by cell within each round
// (a ratio of two rows of the same round, as the anchors measure them).
type goal struct {
	name             string
	system, baseline string   // keys of names
	modes            []string // the cells it asks about: nil, every mode
	workers          []int    // nil: every count
	atLeast          float64  // cycles/s ÷ baseline's must be at least this (0: unchecked)
	p99AtMost        float64  // p99 ÷ baseline's must be at most this (0: unchecked)
}

var goals = []goal{
	{name: "fencesim-node ≥ 2× etcd's cycles/s", system: "node", baseline: "etcd", modes: []string{bench.PerWorker}, atLeast: 2},
	{name: "fencesim-node ≥ 10× etcd's cycles/s on a shared lock", system: "node", baseline: "etcd", modes: []string{bench.Shared}, workers: []int{8, 64}, atLeast: 10},
	{name: "fencesim-node's p99 ≤ etcd's", system: "node", baseline: "etcd", p99AtMost: 1},
	{name: "fencesim-lockd's p99 ≤ etcd's at 64 workers", system: "lockd", baseline: "etcd", workers: []int{64}, p99AtMost: 1},
	{name: "fencesim-lockd ≥ 50 % of raw Redis's cycles/s", system: "lockd", baseline: "redis", atLeast: 0.5},
}

// GoalCheck is one goal in one cell over the rounds of a run: in how
// many of the rounds that measured the baseline the ratio met its bound.
// A round in which the goal's own system failed there counts as missed.
type GoalCheck struct {
	Goal    string       `json:"goal"`
	Mode    string       `json:"mode"`
	Workers int          `json:"workers"`
	Bound   string       `json:"bound"`  // e.g. "cycles/s ≥ 2×", "p99 ≤ 1×"
	Ratio   bench.Spread `json:"ratio"`  // of the rounds that measured both rows
	Met     int          `json:"met"`    // rounds meeting the bound
	Rounds  int          `json:"rounds"` // rounds that measured the baseline
}

// bound is one side of a goal: a ratio of two rows and the test it must
// pass.
type bound struct {
	label string
	ratio func(r, base bench.Result) float64
	meets func(v float64) bool
}

// bounds are the ratios g bounds (one or both).
func (g goal) bounds() []bound {
	var bs []bound
	if g.atLeast > 0 {
		bs = append(bs, bound{fmt.Sprintf("cycles/s ≥ %g×", g.atLeast),
			func(r, b bench.Result) float64 { return r.CyclesPerSec / b.CyclesPerSec },
			func(v float64) bool { return v >= g.atLeast }})
	}
	if g.p99AtMost > 0 {
		bs = append(bs, bound{fmt.Sprintf("p99 ≤ %g×", g.p99AtMost),
			func(r, b bench.Result) float64 { return r.P99us / b.P99us },
			func(v float64) bool { return v <= g.p99AtMost }})
	}
	return bs
}

// asks reports whether g is about the cell (mode, workers).
func (g goal) asks(mode string, workers int) bool {
	return (g.modes == nil || slices.Contains(g.modes, mode)) && (g.workers == nil || slices.Contains(g.workers, workers))
}

// checkGoals checks every goal in every cell of the run that it asks
// about and in which both of its systems ran, in the table's cell order.
func checkGoals(results []bench.Result, o options) []GoalCheck {
	idx := bench.ByRound(results)
	var checks []GoalCheck
	for _, g := range goals {
		for _, mode := range o.modes {
			for _, w := range o.workers {
				if !g.asks(mode, w) {
					continue
				}
				for _, b := range g.bounds() {
					c := GoalCheck{Goal: g.name, Mode: mode, Workers: w, Bound: b.label}
					var ratios []float64
					for _, r := range results {
						if r.System != names[g.system] || r.Mode != mode || r.Workers != w {
							continue
						}
						base, ok := idx.Peer(r, names[g.baseline])
						if !ok {
							continue // no baseline this round: nothing to hold r to
						}
						c.Rounds++
						if !bench.Measured(r) {
							continue // the system failed where its baseline ran: missed
						}
						v := b.ratio(r, base)
						ratios = append(ratios, v)
						if b.meets(v) {
							c.Met++
						}
					}
					if c.Rounds > 0 {
						c.Ratio = bench.SpreadOf(ratios)
						checks = append(checks, c)
					}
				}
			}
		}
	}
	return checks
}

// goalsMarkdown renders checks as one table.
func goalsMarkdown(checks []GoalCheck) string {
	var b strings.Builder
	b.WriteString("| goal | cell | bound | ratio | met in rounds |\n|---|---|---|---|---|\n")
	for _, c := range checks {
		met := fmt.Sprintf("%d of %d", c.Met, c.Rounds)
		if c.Met < c.Rounds {
			met = "**" + met + "**"
		}
		fmt.Fprintf(&b, "| %s | %s %d | %s | %s | %s |\n", c.Goal, c.Mode, c.Workers, c.Bound, bench.RatioSpread(c.Ratio), met)
	}
	return b.String()
}
