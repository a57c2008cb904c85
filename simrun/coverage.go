package simrun

import (
	"fmt"
	"io"
	"strings"

	"github.com/fencesim/fencesim/coverage"
)

// printCoverage prints a sweep's coverage table: per mark, where it is
// hit, its hits over every run and the fraction of runs (seeds) hitting
// it; then the marks no run hit, which the search did not reach.
func printCoverage(w io.Writer, t *coverage.Tally) {
	fmt.Fprintf(w, "coverage over %d runs:\n", t.Runs)
	fmt.Fprintf(w, "  %-38s %-9s %10s %7s %8s\n", "mark", "where", "hits", "seeds", "fraction")
	var missed []string
	for _, m := range coverage.All() {
		fmt.Fprintf(w, "  %-38s %-9s %10d %7d %8.3f\n", m, m.Where(), t.Hits(m), t.RunsHit(m), t.Fraction(m))
		if t.RunsHit(m) == 0 {
			missed = append(missed, m.String())
		}
	}
	if len(missed) > 0 {
		fmt.Fprintf(w, "never hit (%d): %s\n", len(missed), strings.Join(missed, ", "))
	}
}

// marksLine is `simrun run`'s line of the run's coverage marks: each mark
// it hit with its count, in the list's order.
func marksLine(c *coverage.Counts) string {
	var parts []string
	for _, m := range coverage.All() {
		if n := c.Get(m); n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", m, n))
		}
	}
	if len(parts) == 0 {
		return "marks: none"
	}
	return "marks: " + strings.Join(parts, " ")
}
