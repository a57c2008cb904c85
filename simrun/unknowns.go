package simrun

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/fencesim/fencesim/scenarios"
)

// unknownTally counts a sweep's unknown verdicts by cause
// (scenarios.UnknownCause), keeping the first run of each to reproduce:
// an unknown is a run the harness could not judge, a finding to look at
// rather than a number in a column.
type unknownTally struct {
	count map[string]int
	first map[string]string // cause → the first such run's scenario, seed and repro line
}

func (t *unknownTally) add(r scenarios.JobResult) {
	cause := ""
	if r.Err == nil {
		cause = scenarios.UnknownCause(r.Result)
	}
	if cause == "" {
		return
	}
	if t.count == nil {
		t.count, t.first = map[string]int{}, map[string]string{}
	}
	if t.count[cause] == 0 {
		t.first[cause] = fmt.Sprintf("first %s seed %d — reproduce: %s", r.Job.Spec.Name, r.Job.Seed, reproLine(r.Job.Spec, r.Job.Seed))
	}
	t.count[cause]++
}

// print writes one line per cause, most frequent first (ties by name).
func (t *unknownTally) print(w io.Writer) {
	if len(t.count) == 0 {
		return
	}
	causes := slices.Sorted(maps.Keys(t.count))
	slices.SortStableFunc(causes, func(a, b string) int { return t.count[b] - t.count[a] })
	fmt.Fprintln(w, "unknown by cause:")
	for _, c := range causes {
		fmt.Fprintf(w, "  %-28s %6d  %s\n", c, t.count[c], t.first[c])
	}
}
