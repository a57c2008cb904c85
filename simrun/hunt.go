package simrun

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/fencesim/fencesim/coverage/branches"
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
	// Unknown: the hunt of the build as it is stopped at Seed, whose run
	// ended unknown for Cause (scenarios.UnknownCause).
	Unknown bool   `json:"unknown,omitempty"`
	Cause   string `json:"cause,omitempty"`
	// Unknowns counts a mutant's runs that ended unknown (the hunt sweeps
	// past them); FirstUnknown is the first of them.
	Unknowns     int    `json:"unknowns,omitempty"`
	FirstUnknown uint64 `json:"first_unknown,omitempty"`
	// Guided: the hunt was a guided search; SeedsTried counts its runs and
	// Replay is the finding's replay file (its plan was mutated, so the
	// seed alone does not reproduce it).
	Guided bool `json:"guided,omitempty"`
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
	guided := fs.Bool("guided", false, "hunt by coverage-guided search of the swarm (or the -scenario/-spec swarm given): -seeds A..B allows B-A+1 runs from root seed A")
	withBranches := fs.Bool("branches", false, "with -guided, steer by Go's coverage counters of the protocol code too (needs a binary built with -cover -covermode=atomic; see docs/guided-search.md)")
	table := fs.String("table", "", "print the detection table from `file.jsonl`, the saved output of hunt -all -json (and of hunt -all -scenario swarm -json, concatenated), and hunt nothing")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun hunt: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *table != "" {
		return printTableFile(*table, stdout, stderr)
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
	if *withBranches {
		if !*guided {
			fmt.Fprintln(stderr, "simrun hunt: -branches goes with -guided")
			return exitUsage
		}
		if err := branches.Available(); err != nil {
			fmt.Fprintf(stderr, "simrun hunt: -branches: %v\n", err)
			return exitUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var rows []huntJSON
	enc := json.NewEncoder(stdout)
	missed, unknown := false, false
	type job struct {
		m        lockservice.Mutant
		scenario string
	}
	var jobs []job
	for _, m := range targets {
		best := scenarios.HuntScenario(m)
		if *guided {
			best = guidedSpec(fixed).Name
		}
		jobs = append(jobs, job{m, best})
		if *all && fixed == nil && best != "swarm" && !*guided {
			jobs = append(jobs, job{m, "swarm"}) // the table's second column: the swarm alone
		}
	}
	for _, j := range jobs {
		m := j.m
		var s scenarios.Spec
		if fixed != nil {
			s = *fixed
		} else {
			s, _ = scenarios.Lookup(j.scenario)
		}
		if *guided && !s.Swarm {
			fmt.Fprintf(stderr, "simrun hunt: -guided: %s: %v\n", s.Name, scenarios.ErrNotSwarm)
			return exitUsage
		}
		d := designFor(*design, m)
		s, err = withDesign(s, d)
		if err == nil && d != "" {
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
		var h scenarios.Hunted
		if *guided {
			start := time.Now()
			h, err = scenarios.HuntGuidedWith(ctx, s, scenarios.GuidedOptions{Root: lo, Runs: int(min(hi-lo, 1<<40)) + 1, Workers: *workers, Branches: *withBranches})
			if err != nil {
				fmt.Fprintf(stderr, "simrun hunt: %s: %v\n", s.Name, err)
				return exitUsage
			}
			h.Wall = time.Since(start)
		} else {
			h = scenarios.Hunt(ctx, s, lo, hi, *workers)
		}
		row := huntJSON{Guided: *guided, Mutant: string(m), Scenario: s.Name, Detected: h.Detected, Property: h.Property,
			SeedsTried: h.SeedsTried, WallSeconds: h.Wall.Seconds(), Seed: h.Seed,
			Unknown: h.Unknown, Cause: h.Cause, Unknowns: h.Unknowns, FirstUnknown: h.FirstUnknown}
		if !h.Detected && h.Unknowns > 0 {
			row.Cause, row.Repro = h.FirstCause, reproLine(s, h.FirstUnknown)
		}
		if h.Detected || h.Unknown {
			row.Repro = reproLine(s, h.Seed)
			if *guided {
				res := h.Result
				res.Plan.Spec.Expect = expect
				p, err := writeReplay(failuresDir, res)
				if err != nil {
					fmt.Fprintf(stderr, "simrun hunt: cannot write the replay file: %v\n", err)
				}
				row.Replay, row.Repro = p, "simrun replay "+p
			} else if m == "" {
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
		}
		switch {
		case h.Unknown:
			unknown = true
		case !h.Detected:
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
		if *guided {
			printGuidedTable(stdout, rows)
		} else {
			printDetectionTable(stdout, rows)
		}
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case missed:
		return exitViolation // the bug went unnoticed: the harness failed
	case unknown:
		return exitUnknown // a run the harness could not judge: a finding
	}
	return exitPass
}

func printHunt(w io.Writer, r huntJSON, lo, hi uint64) {
	unit := "seeds"
	if r.Guided {
		unit = "guided runs"
	}
	if r.Mutant == "" {
		if r.Unknown {
			fmt.Fprintf(w, "hunt %s: unknown (%s) at seed %d after %d %s, %.2fs wall: a run the checker could not judge\nreproduce: %s\n", r.Scenario, r.Cause, r.Seed, r.SeedsTried, unit, r.WallSeconds, r.Repro)
			if r.Replay != "" {
				fmt.Fprintf(w, "replay file: %s\n", r.Replay)
			}
			return
		}
		if !r.Detected {
			fmt.Fprintf(w, "hunt %s: no failure in seeds %d..%d (%d %s, %.2fs wall)\n", r.Scenario, lo, hi, r.SeedsTried, unit, r.WallSeconds)
			return
		}
		fmt.Fprintf(w, "hunt %s: failed %s at seed %d after %d %s, %.2fs wall\nreproduce: %s\n", r.Scenario, r.Property, r.Seed, r.SeedsTried, unit, r.WallSeconds, r.Repro)
		if r.Replay != "" {
			fmt.Fprintf(w, "replay file: %s\n", r.Replay)
		}
		return
	}
	if !r.Detected {
		fmt.Fprintf(w, "mutant %s: NOT detected in seeds %d..%d of %s (%d %s, %.2fs wall)\n", r.Mutant, lo, hi, r.Scenario, r.SeedsTried, unit, r.WallSeconds)
		if r.Unknowns > 0 {
			fmt.Fprintf(w, "  %d of them ended unknown, the first at seed %d (%s) — reproduce: %s\n", r.Unknowns, r.FirstUnknown, r.Cause, r.Repro)
		}
		return
	}
	fmt.Fprintf(w, "mutant %s: detected by %s at seed %d of %s after %d %s, %.2fs wall\nreproduce: %s\n",
		r.Mutant, r.Property, r.Seed, r.Scenario, r.SeedsTried, unit, r.WallSeconds, r.Repro)
}

// printTableFile prints the detection table from a file of hunt -json
// lines.
func printTableFile(path string, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "simrun hunt: -table: %v\n", err)
		return exitUsage
	}
	var rows []huntJSON
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r huntJSON
		if err := json.Unmarshal(line, &r); err != nil || r.Mutant == "" || r.Scenario == "" {
			fmt.Fprintf(stderr, "simrun hunt: -table: %s line %d is not a line of hunt -all -json (%v): save the output of hunt -all -json and pass that\n", path, i+1, err)
			return exitUsage
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "simrun hunt: -table: %s holds no hunt rows\n", path)
		return exitUsage
	}
	printDetectionTable(stdout, rows)
	return exitPass
}

// printDetectionTable prints the README's detection table: per mutant, in
// the catalogue's order, its hunt in the scenario that tells its story (the
// first row of another scenario than the swarm, or the swarm) and its hunt
// by the swarm alone, then the swarm's median and maximum.
func printDetectionTable(w io.Writer, rows []huntJSON) {
	cell := func(r *huntJSON) string {
		switch {
		case r == nil:
			return "-\t| -\t| -"
		case !r.Detected:
			return fmt.Sprintf("**not detected**\t| > %d\t| %.2f s", r.SeedsTried, r.WallSeconds)
		}
		return fmt.Sprintf("%s\t| %d\t| %.2f s", r.Property, r.SeedsTried, r.WallSeconds)
	}
	var order []string
	best, swarm := map[string]*huntJSON{}, map[string]*huntJSON{}
	for i := range rows {
		r := &rows[i]
		if best[r.Mutant] == nil && swarm[r.Mutant] == nil {
			order = append(order, r.Mutant)
		}
		if r.Scenario == "swarm" {
			swarm[r.Mutant] = r
		}
		if b := best[r.Mutant]; b == nil || b.Scenario == "swarm" && r.Scenario != "swarm" {
			best[r.Mutant] = r
		}
	}
	desc := map[string]string{}
	for _, m := range mutants.Mutants() {
		desc[string(m.Name)] = m.Description
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| mutant\t| best scenario\t| caught by\t| seeds\t| wall\t| swarm alone: caught by\t| seeds\t| wall\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	var seeds []int
	var slowest float64
	for _, m := range order {
		name := "`" + m + "`"
		if d := desc[m]; d != "" {
			name += " — " + d
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t|\n", name, best[m].Scenario, cell(best[m]), cell(swarm[m]))
		if r := swarm[m]; r != nil {
			n := r.SeedsTried
			if !r.Detected {
				n = -1
			}
			seeds = append(seeds, n)
			slowest = max(slowest, r.WallSeconds)
		}
	}
	tw.Flush()
	if len(seeds) == 0 {
		return
	}
	slices.Sort(seeds)
	missed := 0
	for _, n := range seeds {
		if n < 0 {
			missed++
		}
	}
	if missed > 0 {
		fmt.Fprintf(w, "\nSwarm alone: %d of %d mutants not detected; slowest hunt %.2f s.\n", missed, len(seeds), slowest)
		return
	}
	fmt.Fprintf(w, "\nSwarm alone: median %d seeds, max %d, slowest hunt %.2f s (%d mutants).\n", seeds[len(seeds)/2], seeds[len(seeds)-1], slowest, len(seeds))
}
