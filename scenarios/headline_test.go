package scenarios

import (
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// TestHeadline: the expected property heads the verdict when it fired,
// wherever the checker ordered it; otherwise the verdict's first does.
func TestHeadline(t *testing.T) {
	v := checker.Verdict{Kind: checker.VerdictViolation, Violations: []checker.Violation{{Property: "S2"}, {Property: "S3"}}}
	cases := []struct {
		expect Expectation
		want   string
	}{
		{Expectation{Verdict: "violation", Property: "S3"}, "S3"},
		{Expectation{Verdict: "violation", Property: "S8"}, "S2"},
		{Expectation{Verdict: "violation"}, "S2"},
		{Expectation{Verdict: "pass"}, "S2"},
	}
	for _, c := range cases {
		if got := c.expect.Headline(v); got != c.want {
			t.Errorf("%s.Headline = %q, want %q", c.expect, got, c.want)
		}
	}
	// The sweep's summary counts runs by their headline.
	spec, _ := Lookup("redlock-gc-pause")
	var s Summary
	s.Add(JobResult{Job: Job{Spec: spec}, Result: Result{Verdict: v}})
	if s.Violations["S3"] != 1 || len(s.Violations) != 1 {
		t.Errorf("summary counts %v, want S3:1", s.Violations)
	}
}
