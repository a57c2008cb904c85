package simrun

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fencesim/fencesim/scenarios"
)

// cmdShrink reduces a failing run — a built-in scenario and seed, or a
// replay file — to the fewest faults, clients and replicas that still
// violate the same property, and writes the smaller run's replay file.
func cmdShrink(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun shrink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "", "built-in `scenario` to shrink (with -seed)")
	specFile := fs.String("spec", "", "shrink a run of the scenario spec in `file.json` (with -seed)")
	design := designFlag(fs)
	seed := fs.Uint64("seed", 0, "`seed` of the failing run (with -scenario)")
	outFile := fs.String("o", "", "write the shrunk run's replay file to `file` (default failures/SCENARIO-seedN-shrunk.json)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var plan scenarios.Plan
	switch {
	case (*name != "" || *specFile != "") && fs.NArg() == 0:
		spec, err := chooseSpec(*name, *specFile)
		if err == nil {
			spec, err = withDesign(spec, *design)
		}
		if err != nil {
			fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
			return exitUsage
		}
		p, err := scenarios.NewPlan(spec, *seed)
		if err != nil {
			fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
			return exitUsage
		}
		plan = p
	case *name == "" && *specFile == "" && *design == "" && fs.NArg() == 1:
		b, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
			return exitUsage
		}
		r, err := parseReplay(fs.Arg(0), b)
		if err != nil {
			fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
			return exitUsage
		}
		plan = r.Plan()
	case *design != "" && fs.NArg() == 1:
		fmt.Fprintln(stderr, "simrun shrink: a replay file runs on its own design; -design goes with -scenario or -spec")
		return exitUsage
	default:
		fs.Usage()
		return exitUsage
	}
	fmt.Fprintf(stdout, "shrinking %s seed %d: %s\n", plan.Spec.Name, plan.Seed, scenarios.SizesOf(plan))
	got, err := scenarios.Shrink(plan, scenarios.RunOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
		return exitUsage
	}
	path := *outFile
	if path == "" {
		path = filepath.Join(failuresDir, fmt.Sprintf("%s-seed%d-shrunk.json", plan.Spec.Name, plan.Seed))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
		return exitUsage
	}
	if err := os.WriteFile(path, scenarios.NewReplay(got.Result).Marshal(), 0o644); err != nil {
		fmt.Fprintf(stderr, "simrun shrink: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "property %s still fails after %d runs\nbefore: %s\nafter:  %s\n", got.Property, got.Runs, got.Before, got.After)
	for _, op := range got.Result.Plan.Schedule {
		fmt.Fprintf(stdout, "  at %v: %s\n", time.Duration(op.At), op)
	}
	fmt.Fprintf(stdout, "replay file: %s (%s replay %s)\n", path, progFor(got.Result.Plan.Spec), shellQuote(path))
	return exitViolation
}
