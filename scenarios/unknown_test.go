package scenarios

import (
	"testing"

	"github.com/fencesim/fencesim/checker"
)

func TestUnknownCause(t *testing.T) {
	unknown := func(cut, why string) Result {
		return Result{Cut: cut, Verdict: checker.Verdict{Kind: checker.VerdictUnknown, Unknown: why}}
	}
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Verdict: checker.Verdict{Kind: checker.VerdictPass}}, ""},
		{Result{Cut: "the step limit of 9 events ran out at t=1s", Verdict: checker.Verdict{Kind: checker.VerdictViolation}}, ""},
		{unknown("the step limit of 9 events ran out at t=1s", "the run was cut short"), "cut: step limit"},
		{unknown("the limit of 100000 pending events was reached at step 7, t=2s", "the run was cut short"), "cut: pending events limit"},
		{unknown("", "the linearizability search of the 9 lock ops on resource \"x\" ran out of its budget of 5 model steps (Options.Steps) before deciding"), "check: search steps"},
		{unknown("", "the linearizability search … (Options.SearchBytes) before deciding"), "check: search memory"},
		{unknown("", "no lock was granted in the run: nothing was tested, so it cannot pass"), "nothing granted"},
		{unknown("", "something new"), "other"},
	} {
		if got := UnknownCause(c.r); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.r, got, c.want)
		}
	}
}
