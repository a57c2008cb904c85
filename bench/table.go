package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Markdown renders results as one table, a row per system and cell, in
// the order given, with each row's cycles/s and p99 as ratios to the
// baseline system's row of the same cell ("–" when that cell has no
// baseline figure). attempts/cycle counts acquire attempts per completed
// cycle: above 1 when a polling client found the shared lock held (etcd's
// mutex waits instead, so its figure stays 1). A failed cell shows its
// error.
func Markdown(results []Result, baseline string) string {
	base := map[[2]string]Result{}
	for _, r := range results {
		if r.System == baseline && r.Err == "" && r.Cycles > 0 {
			base[key(r)] = r
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| system | mode | workers | cycles/s | cycle p50 | cycle p99 | cycle max | attempts/cycle | cycles/s ÷ %s | p99 ÷ %s |\n", baseline, baseline)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | failed: %s | | | | | | |\n", r.System, r.Mode, r.Workers, strings.ReplaceAll(r.Err, "|", "/"))
			continue
		}
		ratio, p99 := "–", "–"
		if br, ok := base[key(r)]; ok && r.Cycles > 0 {
			ratio = fmt.Sprintf("%.2f×", r.CyclesPerSec/br.CyclesPerSec)
			p99 = fmt.Sprintf("%.2f×", r.P99us/br.P99us)
		}
		per := "–"
		if r.Cycles > 0 {
			per = strconv.FormatFloat(float64(r.Attempts)/float64(r.Cycles), 'f', 1, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.System, r.Mode, r.Workers,
			thousands(r.CyclesPerSec), Latency(r.P50()), Latency(r.P99()), Latency(r.Max()), per, ratio, p99)
	}
	return b.String()
}

func key(r Result) [2]string { return [2]string{r.Mode, strconv.Itoa(r.Workers)} }

// Latency prints d with about three significant digits: µs below 1 ms,
// s from 1 s, ms between.
func Latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// thousands prints a rate rounded to a whole number, with thousands
// separated by commas (one decimal below 10).
func thousands(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ParseWorkers reads a comma-separated list of worker counts ("1,8,64").
func ParseWorkers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("worker count %q: must be 1..4096", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseModes reads a comma-separated list of modes (per-worker, shared).
func ParseModes(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f != PerWorker && f != Shared {
			return nil, fmt.Errorf("mode %q: must be %s or %s", f, PerWorker, Shared)
		}
		out = append(out, f)
	}
	return out, nil
}
