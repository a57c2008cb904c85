package simrun

import (
	"fmt"
	"strings"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/scenarios"
)

// runJSON is the object `run -json` prints, and each line of `sweep -json`.
type runJSON struct {
	Scenario    string   `json:"scenario"`
	Seed        uint64   `json:"seed"`
	Verdict     string   `json:"verdict"`
	Property    string   `json:"property"`
	Expected    string   `json:"expected"`
	Met         bool     `json:"met"`
	TraceHash   string   `json:"trace_hash"`
	Events      uint64   `json:"events"`
	SimSeconds  float64  `json:"sim_seconds"`
	WallSeconds float64  `json:"wall_seconds"`
	Speedup     float64  `json:"sim_per_wall"`
	Detail      []string `json:"detail,omitempty"`
	// Cut says why the run stopped before its end (the step limit or a
	// run limit), if it did.
	Cut string `json:"cut,omitempty"`
	// Cause is why an unknown verdict is unknown, in a few words
	// (scenarios.UnknownCause): what a sweep counts unknowns by.
	Cause string `json:"cause,omitempty"`
	// Crash is the panic of a crashed run, with its step, node and virtual
	// time; Stack is its stack, which depends on the build and the
	// machine (never compared).
	Crash string `json:"crash,omitempty"`
	Stack string `json:"stack,omitempty"`
	Error string `json:"error,omitempty"`
	Repro string `json:"repro"`
	// Marks are the run's coverage marks hit at least once, by name
	// (package coverage): always in `run -json`, in `sweep -json` with
	// -coverage.
	Marks map[string]uint64 `json:"marks,omitempty"`
}

// reproLine is the one command that reproduces a run of a built-in
// scenario (with its planted bug, if any).
func reproLine(spec scenarios.Spec, seed uint64) string {
	if src, ok := sourceOf(spec.Name); ok {
		return specReproLine(src.file, spec, seed)
	}
	return reproWith("-scenario "+spec.Name, spec, seed)
}

// specReproLine is reproLine for a spec read from file (run -spec).
func specReproLine(file string, spec scenarios.Spec, seed uint64) string {
	return reproWith("-spec "+shellQuote(file), spec, seed)
}

// reproWith is the repro line of a run whose scenario is chosen by what.
func reproWith(what string, spec scenarios.Spec, seed uint64) string {
	line := fmt.Sprintf("%s run %s -seed %d", progFor(spec), what, seed)
	if own, ok := ownDesign(spec.Name); ok && spec.Design != own {
		line += " -design " + spec.Design
	}
	if spec.Mutant != "" {
		line += " -mutant " + spec.Mutant
	}
	return line
}

// ownDesign is the design the scenario name was written for: its -spec
// file's or the built-in's. A scenario known by neither (a replay file's)
// says false.
func ownDesign(name string) (string, bool) {
	if src, ok := sourceOf(name); ok {
		return src.design, true
	}
	if s, ok := scenarios.Lookup(name); ok {
		return s.Design, true
	}
	return "", false
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// toJSON flattens a run's result for printing.
func toJSON(spec scenarios.Spec, res scenarios.Result) runJSON {
	j := runJSON{
		Scenario: spec.Name, Seed: res.Seed, Verdict: res.Verdict.Kind.String(), Property: spec.Expect.Headline(res.Verdict),
		Expected: spec.Expect.String(), Met: res.Met(spec), TraceHash: fmt.Sprintf("%016x", res.TraceHash),
		Events: res.Events, SimSeconds: res.SimTime.Seconds(), WallSeconds: res.Wall.Seconds(),
		Speedup: res.SimTime.Seconds() / max(res.Wall.Seconds(), 1e-9), Repro: reproLine(spec, res.Seed),
	}
	if res.Marks != nil {
		j.Marks = res.Marks.Map()
	}
	for _, v := range res.Verdict.Violations {
		j.Detail = append(j.Detail, fmt.Sprintf("%s at %v (step %d): %s", v.Property, v.At, v.Step, v.Detail))
	}
	if res.Verdict.Unknown != "" {
		j.Detail = append(j.Detail, "unknown: "+res.Verdict.Unknown)
	}
	if l := res.Verdict.Liveness; l != nil {
		j.Detail = append(j.Detail, fmt.Sprintf("%s at %v: %s", l.Property, l.At, l.Detail))
	}
	if res.Cut != "" && res.Verdict.Kind != checker.VerdictUnknown { // the unknown line says it already
		j.Detail = append(j.Detail, "the run was cut short: "+res.Cut+"; the history up to the cut was checked")
	}
	j.Cut, j.Cause = res.Cut, scenarios.UnknownCause(res)
	if c := res.Crash; c != nil {
		j.Crash, j.Stack = c.String(), c.Stack
		j.Detail = append(j.Detail, "crash: "+c.String())
	}
	return j
}

// exitCode maps a verdict to simrun's exit code.
func exitCode(v checker.Verdict) int {
	switch v.Kind {
	case checker.VerdictPass:
		return exitPass
	case checker.VerdictViolation:
		return exitViolation
	case checker.VerdictLiveness:
		return exitLiveness
	case checker.VerdictCrash:
		return exitCrash
	default:
		return exitUnknown
	}
}
