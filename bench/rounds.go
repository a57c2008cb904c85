package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Spread is one figure over the rounds of a run: its median (of an even
// count, the mean of the two middle values), lowest and highest, and how
// many rounds gave it.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// SpreadOf summarizes vs (zero Spread for none).
func SpreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// SummaryRow is one system in one cell over every round of a run.
// CyclesPerSec and P99us are the system's own figures; Ratio and P99Ratio
// are its cycles/s and p99 divided by the baseline's in the same round and
// cell: the two rows of a round run minutes apart at most, so a slow spell
// of a shared machine tends to reach both, where the rows of different
// rounds need not. A ratio's N counts the rounds in which both rows were
// measured.
type SummaryRow struct {
	System       string `json:"system"`
	Mode         string `json:"mode"`
	Workers      int    `json:"workers"`
	CyclesPerSec Spread `json:"cycles_per_sec"`
	P99us        Spread `json:"p99_us"`
	Ratio        Spread `json:"ratio"`     // cycles/s ÷ the baseline's
	P99Ratio     Spread `json:"p99_ratio"` // p99 ÷ the baseline's
	Failed       int    `json:"failed"`    // rounds in which the cell (or its system's start) failed, or completed no cycle
}

// Measured reports whether r has figures: it did not fail and completed
// a cycle.
func Measured(r Result) bool { return r.Err == "" && r.Cycles > 0 }

// RoundIndex finds a system's measured result in a given round and cell,
// to take a ratio within one round.
type RoundIndex map[roundCell]Result

type roundCell struct {
	round        int
	system, mode string
	workers      int
}

// ByRound indexes the measured results by round, system and cell.
func ByRound(results []Result) RoundIndex {
	idx := RoundIndex{}
	for _, r := range results {
		if Measured(r) {
			idx[roundCell{r.Round, r.System, r.Mode, r.Workers}] = r
		}
	}
	return idx
}

// Peer returns system's measured result in r's round and cell.
func (idx RoundIndex) Peer(r Result, system string) (Result, bool) {
	p, ok := idx[roundCell{r.Round, system, r.Mode, r.Workers}]
	return p, ok
}

// Summarize folds the rounds of a run into a row per system and cell, in
// the order the rows first appear in results.
func Summarize(results []Result, baseline string) []SummaryRow {
	idx := ByRound(results)
	type acc struct {
		row                   SummaryRow
		cps, p99, ratio, p99r []float64
	}
	type cell struct {
		system, mode string
		workers      int
	}
	var order []cell
	accs := map[cell]*acc{}
	for _, r := range results {
		k := cell{r.System, r.Mode, r.Workers}
		a := accs[k]
		if a == nil {
			a = &acc{row: SummaryRow{System: r.System, Mode: r.Mode, Workers: r.Workers}}
			accs[k] = a
			order = append(order, k)
		}
		if !Measured(r) {
			a.row.Failed++
			continue
		}
		a.cps = append(a.cps, r.CyclesPerSec)
		a.p99 = append(a.p99, r.P99us)
		if b, ok := idx.Peer(r, baseline); ok {
			a.ratio = append(a.ratio, r.CyclesPerSec/b.CyclesPerSec)
			a.p99r = append(a.p99r, r.P99us/b.P99us)
		}
	}
	rows := make([]SummaryRow, 0, len(order))
	for _, k := range order {
		a := accs[k]
		a.row.CyclesPerSec, a.row.P99us = SpreadOf(a.cps), SpreadOf(a.p99)
		a.row.Ratio, a.row.P99Ratio = SpreadOf(a.ratio), SpreadOf(a.p99r)
		rows = append(rows, a.row)
	}
	return rows
}

// MarkdownSummary renders rows as one table: each figure as its median
// over the rounds with the lowest and highest in brackets.
func MarkdownSummary(rows []SummaryRow, baseline string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| system | mode | workers | rounds | cycles/s | cycle p99 | cycles/s ÷ %s | p99 ÷ %s |\n", baseline, baseline)
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		rounds := fmt.Sprint(r.CyclesPerSec.N)
		if r.Failed > 0 {
			rounds += fmt.Sprintf(" (%d failed)", r.Failed)
		}
		if r.CyclesPerSec.N == 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | – | – | – | – |\n", r.System, r.Mode, r.Workers, rounds)
			continue
		}
		cps := fmt.Sprintf("%s [%s–%s]", thousands(r.CyclesPerSec.Median), thousands(r.CyclesPerSec.Min), thousands(r.CyclesPerSec.Max))
		p99 := fmt.Sprintf("%s [%s–%s]", Latency(us(r.P99us.Median)), Latency(us(r.P99us.Min)), Latency(us(r.P99us.Max)))
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", r.System, r.Mode, r.Workers, rounds, cps, p99,
			RatioSpread(r.Ratio), RatioSpread(r.P99Ratio))
	}
	return b.String()
}

// RatioSpread prints a ratio's median with its range, "–" for none.
func RatioSpread(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.2f×", s.Median)
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.Median, s.Min, s.Max)
}

func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
