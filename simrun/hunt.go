package simrun

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"text/tabwriter"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/scenarios"
)

// huntJSON is one line of `hunt -json`.
type huntJSON struct {
	Mutant      string  `json:"mutant,omitempty"` // "" for a hunt of the build as it is
	Scenario    string  `json:"scenario"`
	Detected    bool    `json:"detected"`
	Property    string  `json:"property,omitempty"`
	SeedsTried  int     `json:"seeds_tried"`
	WallSeconds float64 `json:"wall_seconds"`
	Seed        uint64  `json:"seed,omitempty"`
	Repro       string  `json:"repro,omitempty"`
	Replay      string  `json:"replay,omitempty"` // the failing run's replay file (a hunt of the build as it is)
}

// cmdHunt sweeps a scenario until the first failing run: with -mutant, the
// proof that the harness catches that planted bug, and how fast; without,
// the same question for the build as it is — a bug you patched into your
// own design (or ours) by hand.
func cmdHunt(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun hunt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mutant := fs.String("mutant", "", "planted bug to hunt (see simrun list -mutants); without it (and -all) hunt the build as it is")
	all := fs.Bool("all", false, "hunt every mutant and print the detection table")
	name := fs.String("scenario", "", "built-in `scenario` to sweep (with -mutant, default: the one that catches each mutant fastest, mostly swarm)")
	specFile := fs.String("spec", "", "sweep the scenario spec in `file.json` (one of yours, e.g. naming your design)")
	design := designFlag(fs)
	seeds := fs.String("seeds", "1..200", "seed `range` A..B to try, in order")
	workers := fs.Int("workers", runtime.NumCPU(), "simulations run at once")
	asJSON := fs.Bool("json", false, "one JSON object per mutant per line on stdout")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun hunt: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var targets []lockservice.Mutant
	switch {
	case *all && *mutant != "":
		fmt.Fprintln(stderr, "simrun hunt: -mutant and -all exclude each other")
		return exitUsage
	case *all && *specFile != "":
		fmt.Fprintln(stderr, "simrun hunt: -all hunts the planted bugs in built-in scenarios; -spec goes with -mutant or alone")
		return exitUsage
	case *all:
		for _, m := range mutants.Mutants() {
			targets = append(targets, m.Name)
		}
	case *mutant != "":
		m, err := mutants.ParseMutant(*mutant)
		if err != nil {
			fmt.Fprintf(stderr, "simrun hunt: -mutant: %v\n", err)
			return exitUsage
		}
		targets = []lockservice.Mutant{m}
	case *name == "" && *specFile == "":
		fmt.Fprintln(stderr, "simrun hunt: -mutant NAME, -all, or (to hunt the build as it is) -scenario NAME or -spec FILE is required (see simrun list -mutants)")
		return exitUsage
	default:
		targets = []lockservice.Mutant{""} // the build as it is
	}
	var fixed *scenarios.Spec // the scenario to hunt in, if given
	if *name != "" || *specFile != "" {
		spec, err := chooseSpec(*name, *specFile)
		if err != nil {
			fmt.Fprintf(stderr, "simrun hunt: %v\n", err)
			return exitUsage
		}
		fixed = &spec
	}
	lo, hi, err := parseSeeds(*seeds)
	if err != nil {
		fmt.Fprintf(stderr, "simrun hunt: -seeds: %v\n", err)
		return exitUsage
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "simrun hunt: -workers must be at least 1, got %d\n", *workers)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var rows []huntJSON
	enc := json.NewEncoder(stdout)
	missed := false
	for _, m := range targets {
		var s scenarios.Spec
		if fixed != nil {
			s = *fixed
		} else {
			s, _ = scenarios.Lookup(scenarios.HuntScenario(m))
		}
		s, err = withDesign(s, *design)
		if err == nil && *design != "" {
			_, err = scenarios.NewPlan(s, lo) // a fault naming another design's node
		}
		if err != nil {
			fmt.Fprintf(stderr, "simrun hunt: %s: %v\n", s.Name, err)
			return exitUsage
		}
		expect := s.Expect
		if m != "" {
			s.Mutant = string(m)
		} else {
			// The build as it is fails when a run violates a property or
			// loses liveness, whatever the scenario expects: a scenario
			// written to show a bug (expecting a violation) is hunted for
			// that bug.
			s.Expect = scenarios.Expectation{Verdict: "pass"}
		}
		h := scenarios.Hunt(ctx, s, lo, hi, *workers)
		row := huntJSON{Mutant: string(m), Scenario: s.Name, Detected: h.Detected, Property: h.Property,
			SeedsTried: h.SeedsTried, WallSeconds: h.Wall.Seconds(), Seed: h.Seed}
		if h.Detected {
			row.Repro = reproLine(s, h.Seed)
			if m == "" {
				// The file keeps the scenario's own expectation: it replays
				// as `run -spec` or `run -scenario` would have run it.
				res := h.Result
				res.Plan.Spec.Expect = expect
				p, err := writeReplay(failuresDir, res)
				if err != nil {
					fmt.Fprintf(stderr, "simrun hunt: cannot write the replay file: %v\n", err)
				}
				row.Replay = p
			}
		} else {
			missed = true
		}
		rows = append(rows, row)
		if *asJSON {
			enc.Encode(row)
		} else if !*all {
			printHunt(stdout, row, lo, hi)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if *all && !*asJSON {
		printDetectionTable(stdout, rows)
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case missed:
		return exitViolation // the bug went unnoticed: the harness failed
	}
	return exitPass
}

func printHunt(w io.Writer, r huntJSON, lo, hi uint64) {
	if r.Mutant == "" {
		if !r.Detected {
			fmt.Fprintf(w, "hunt %s: no failure in seeds %d..%d (%d seeds, %.2fs wall)\n", r.Scenario, lo, hi, r.SeedsTried, r.WallSeconds)
			return
		}
		fmt.Fprintf(w, "hunt %s: failed %s at seed %d after %d seeds, %.2fs wall\nreproduce: %s\n", r.Scenario, r.Property, r.Seed, r.SeedsTried, r.WallSeconds, r.Repro)
		if r.Replay != "" {
			fmt.Fprintf(w, "replay file: %s\n", r.Replay)
		}
		return
	}
	if !r.Detected {
		fmt.Fprintf(w, "mutant %s: NOT detected in seeds %d..%d of %s (%d seeds, %.2fs wall)\n", r.Mutant, lo, hi, r.Scenario, r.SeedsTried, r.WallSeconds)
		return
	}
	fmt.Fprintf(w, "mutant %s: detected by %s at seed %d of %s after %d seeds, %.2fs wall\nreproduce: %s\n",
		r.Mutant, r.Property, r.Seed, r.Scenario, r.SeedsTried, r.WallSeconds, r.Repro)
}

// printDetectionTable prints the README's detection table.
func printDetectionTable(w io.Writer, rows []huntJSON) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "| mutant\t| caught by\t| seeds to detection\t| wall\t| seed\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		if r.Detected {
			fmt.Fprintf(tw, "| `%s`\t| %s\t| %d\t| %.2f s\t| %d\t|\n", r.Mutant, r.Property, r.SeedsTried, r.WallSeconds, r.Seed)
		} else {
			fmt.Fprintf(tw, "| `%s`\t| **not detected**\t| > %d\t| %.2f s\t| -\t|\n", r.Mutant, r.SeedsTried, r.WallSeconds)
		}
	}
	tw.Flush()
}
