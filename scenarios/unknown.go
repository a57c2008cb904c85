package scenarios

import (
	"strings"

	"github.com/fencesim/fencesim/checker"
)

// UnknownCause names in a few words why a run ended unknown, so that a
// sweep can count its unknowns by cause and a hunt can say what stopped it:
// "cut: step limit", "cut: <limit> limit" (a run cut by one of its Limits,
// e.g. pending events after a storm of rejected appends), "check: search
// steps" or "check: search memory" (a linearizability search out of its
// budget), "nothing granted" (a run that tested nothing), else "other". It
// returns "" for a run whose verdict is not unknown.
func UnknownCause(r Result) string {
	v := r.Verdict
	if v.Kind != checker.VerdictUnknown {
		return ""
	}
	switch {
	case strings.HasPrefix(r.Cut, "the step limit"):
		return "cut: step limit"
	case strings.HasPrefix(r.Cut, "the limit of "):
		// "the limit of N <what> was reached at …"
		rest := strings.TrimPrefix(r.Cut, "the limit of ")
		if _, after, ok := strings.Cut(rest, " "); ok {
			if what, _, ok := strings.Cut(after, " was reached"); ok {
				return "cut: " + what + " limit"
			}
		}
		return "cut: limit"
	case r.Cut != "":
		return "cut: other"
	case strings.Contains(v.Unknown, "Options.Steps"):
		return "check: search steps"
	case strings.Contains(v.Unknown, "Options.SearchBytes"):
		return "check: search memory"
	case strings.HasPrefix(v.Unknown, "no lock was granted"):
		return "nothing granted"
	}
	return "other"
}
