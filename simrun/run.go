package simrun

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/report"
	"github.com/fencesim/fencesim/scenarios"
)

// failuresDir is where failing runs leave their replay files by default.
const failuresDir = "failures"

// outputFlags are the flags run and replay share.
type outputFlags struct {
	asJSON, trace, twice bool
	out                  string
	traceCap             size
	// specFile is the -spec file the plan's spec came from ("" for a
	// built-in): the repro line names it.
	specFile string
	// replayFile is the replay file the plan came from ("" for run): the
	// repro line of a spec that is no built-in names it.
	replayFile string
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of text")
	fs.StringVar(&o.out, "out", "", "write the HTML report (index.html), trace.txt, history.json, result.json and replay.json into `dir`")
	fs.BoolVar(&o.trace, "trace", false, "print the readable trace to stderr")
	fs.BoolVar(&o.twice, "check-twice", false, "run twice and fail with exit 4 if the trace hashes differ")
	o.traceCap = defaultTraceCap
	fs.Var(&o.traceCap, "trace-cap", "with -out, keep trace.txt only if it is at most this `size`, e.g. 64MB (0: no cap of its own; the spec's limits.trace_bytes still ends the trace)")
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "", "built-in scenario `name` (see simrun list)")
	specFile := fs.String("spec", "", "run the scenario spec in `file.json` instead of a built-in (the format of scenarios/builtin/*.json)")
	seed := fs.Uint64("seed", 1, "root `seed` of the run")
	mutant := fs.String("mutant", "", "plant this bug (see simrun list -mutants)")
	design := designFlag(fs)
	var o outputFlags
	o.register(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	spec, err := chooseSpec(*name, *specFile)
	if err == nil {
		spec, err = withDesign(spec, designFor(*design, lockservice.Mutant(*mutant)))
	}
	if err != nil {
		fmt.Fprintf(stderr, "simrun run: %v\n", err)
		return exitUsage
	}
	if *mutant != "" {
		spec.Mutant = *mutant
	}
	plan, err := scenarios.NewPlan(spec, *seed)
	if err != nil {
		fmt.Fprintf(stderr, "simrun run: %v\n", err)
		return exitUsage
	}
	o.specFile = *specFile
	_, code := execute("simrun run", plan, o, true, stdout, stderr)
	return code
}

// chooseSpec returns the built-in scenario name, or the spec in file. The
// two exclude each other: a file's spec carries its own name, and running
// it under a built-in's name would make its repro line lie.
func chooseSpec(name, file string) (scenarios.Spec, error) {
	builtins := "built-in scenarios: " + strings.Join(scenarios.Names(), ", ")
	switch {
	case name != "" && file != "":
		return scenarios.Spec{}, fmt.Errorf("-scenario and -spec exclude each other: -scenario names a built-in, -spec a file of your own")
	case file != "":
		return readSpec(file)
	case name == "":
		return scenarios.Spec{}, fmt.Errorf("-scenario is required (or -spec FILE.json); %s", builtins)
	}
	spec, ok := scenarios.Lookup(name)
	if !ok {
		return scenarios.Spec{}, fmt.Errorf("unknown scenario %q; %s", name, builtins)
	}
	return spec, nil
}

// readSpec reads a user-written scenario spec with the validation the
// built-ins get (scenarios.Parse: unknown fields, bad values and faults
// that name no node are errors), naming the file in every error.
func readSpec(file string) (scenarios.Spec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return scenarios.Spec{}, fmt.Errorf("-spec: %w", err)
	}
	spec, err := scenarios.Parse(b)
	if err != nil {
		return scenarios.Spec{}, fmt.Errorf("-spec %s: %w", file, err)
	}
	if _, builtin := scenarios.Lookup(spec.Name); !builtin {
		specSources.Lock()
		specSources.m[spec.Name] = specSource{file: file, design: spec.Design}
		specSources.Unlock()
	}
	return spec, nil
}

// specSource is where a scenario read with -spec came from.
type specSource struct {
	file   string
	design string // the file's design, which -design may have replaced
}

// specSources maps the name of every scenario read with -spec to its file,
// so that a repro line made far from the flag (a sweep's MISS line, a
// JSON line) names the file rather than a built-in that does not exist.
// A file that reuses a built-in's name is not recorded (its lines name
// the built-in, as before).
var specSources = struct {
	sync.Mutex
	m map[string]specSource
}{m: map[string]specSource{}}

// sourceOf is where the scenario name was read from, if from a -spec file.
func sourceOf(name string) (specSource, bool) {
	specSources.Lock()
	defer specSources.Unlock()
	src, ok := specSources.m[name]
	return src, ok
}

// designFlag registers -design, shared by run, sweep, shrink and hunt.
func designFlag(fs *flag.FlagSet) *string {
	return fs.String("design", "", "run the scenario on this `design` instead of its own (e.g. yours, registered with simrun.Main); "+
		"its replica count is kept if the design takes it, else the design's default")
}

// withDesign returns spec on the named design ("" leaves it alone). The
// replica count stays if the design takes it; otherwise the design's own
// count (replicas 0) is used, so a one-server design runs a scenario
// written for three replicas. Faults that name another design's nodes
// rather than roles are refused later, by the plan's validation.
func withDesign(spec scenarios.Spec, name string) (scenarios.Spec, error) {
	if name == "" || name == spec.Design {
		return spec, nil
	}
	d, ok := scenarios.LookupDesign(name)
	if !ok {
		var known []string
		for _, i := range scenarios.Designs() {
			known = append(known, i.Name)
		}
		return spec, fmt.Errorf("-design: unknown design %q; designs: %s", name, strings.Join(known, ", "))
	}
	spec.Design = name
	if _, err := d.Nodes(spec.Replicas); err != nil {
		if _, err0 := d.Nodes(0); err0 != nil {
			return spec, fmt.Errorf("-design %s: %v", name, err)
		}
		spec.Replicas = 0
	}
	return spec, nil
}

// designFor is the design a run takes: the one -design names, else the
// one a mutant planted outside the reference lives in (lockd's), else the
// scenario's own ("").
func designFor(design string, m lockservice.Mutant) string {
	if design != "" {
		return design
	}
	return mutants.Design(m)
}

// execute runs a plan and reports it: the seed and every option first (so
// that even a crash of the run reproduces), then the verdict, the figures
// and, for a failure, the line that reproduces it and — with keepFailure —
// its replay file under failures/.
func execute(cmd string, plan scenarios.Plan, o outputFlags, keepFailure bool, stdout, stderr io.Writer) (scenarios.Result, int) {
	spec := plan.Spec
	if !o.asJSON {
		opts, _ := json.Marshal(spec)
		fmt.Fprintf(stdout, "scenario=%s seed=%d\noptions=%s\n", spec.Name, plan.Seed, opts)
		if plan.Options != nil {
			fmt.Fprintf(stdout, "swarm options (drawn from the seed):\n%s\n", indent(plan.Options.String()))
		}
		fmt.Fprintf(stdout, "faults: %s\n", scenarios.Count(len(plan.Schedule), "operation"))
	}
	// The trace streams to stderr with -trace; -out keeps it in memory for
	// trace.txt only up to -trace-cap.
	outTrace := &cappedTrace{max: int64(o.traceCap)}
	var traceW io.Writer
	switch {
	case o.out != "" && o.trace:
		traceW = io.MultiWriter(stderr, outTrace)
	case o.out != "":
		traceW = outTrace
	case o.trace:
		traceW = stderr
	}
	res, err := scenarios.RunPlan(plan, scenarios.RunOptions{Trace: traceW})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return res, exitUsage
	}
	code := exitCode(res.Verdict)
	if o.twice {
		again, err := scenarios.RunPlan(plan, scenarios.RunOptions{})
		if err != nil || again.TraceHash != res.TraceHash {
			fmt.Fprintf(stderr, "%s: NONDETERMINISM: seed %d gave trace hashes %016x and %016x\n", cmd, plan.Seed, res.TraceHash, again.TraceHash)
			code = exitNondeterminism
		}
	}
	j := toJSON(spec, res)
	switch {
	case o.specFile != "":
		j.Repro = specReproLine(o.specFile, spec, plan.Seed)
	case o.replayFile != "" && !scenarios.IsBuiltin(spec): // run -scenario would run another spec
		j.Repro = progFor(spec) + " replay " + shellQuote(o.replayFile)
	}
	var replayPath string
	switch {
	case o.out != "":
		note, err := writeRun(o.out, res, j, outTrace)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
			return res, exitUsage
		}
		if note != "" {
			fmt.Fprintf(stderr, "%s: %s\n", cmd, note)
		}
		replayPath = filepath.Join(o.out, "replay.json")
	case keepFailure && res.Verdict.Kind.String() != "pass":
		p, err := writeReplay(failuresDir, res)
		if err != nil {
			fmt.Fprintf(stderr, "%s: cannot write the replay file: %v\n", cmd, err)
		}
		replayPath = p
	}
	if o.asJSON {
		b, _ := json.Marshal(j)
		fmt.Fprintf(stdout, "%s\n", b)
		return res, code
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	fmt.Fprintf(w, "verdict=%s", j.Verdict)
	if j.Property != "" {
		fmt.Fprintf(w, " property=%s", j.Property)
	}
	fmt.Fprintf(w, " expected=%q met=%v\n", j.Expected, j.Met)
	for _, d := range j.Detail {
		fmt.Fprintf(w, "  %s\n", d)
	}
	fmt.Fprintln(w, beliefOverlapLine(spec, res.Verdict.Metrics.BeliefOverlap))
	fmt.Fprintf(w, "trace_hash=%s events=%d sim_seconds=%.3f wall_seconds=%.4f sim/wall=%.0f\n",
		j.TraceHash, j.Events, j.SimSeconds, j.WallSeconds, j.Speedup)
	fmt.Fprintln(w, marksLine(res.Marks))
	if res.Crash != nil {
		fmt.Fprintf(w, "stack of the panic (seed %d):\n%s\n", plan.Seed, indent(res.Crash.Stack))
	}
	if code != exitPass {
		fmt.Fprintf(w, "reproduce: %s\n", j.Repro)
	}
	if replayPath != "" {
		fmt.Fprintf(w, "replay file: %s (%s replay %s)\n", replayPath, progFor(spec), shellQuote(replayPath))
	}
	return res, code
}

// beliefOverlapLine reports the belief-overlap metric. Overlap is harmless
// only where the store fences writes by ordered tokens; for the other
// designs (Redlock, unfenced stores) the line says so instead of crediting
// fencing the run did not have.
func beliefOverlapLine(spec scenarios.Spec, m checker.OverlapStats) string {
	why := "a metric, not a failure: fencing is what makes it harmless"
	if !spec.Fenced() {
		why = "a metric; this design's store does not fence writes by ordered tokens, so nothing stops both believed holders from writing"
	}
	return fmt.Sprintf("belief overlap (%s): %s, %v in all, longest %v", why, scenarios.Count(m.Windows, "window"), m.Total, m.Longest)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// writeReplay writes res's replay file into dir as SCENARIO-seedN.json.
func writeReplay(dir string, res scenarios.Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-seed%d.json", res.Scenario, res.Seed))
	return p, os.WriteFile(p, scenarios.NewReplay(res).Marshal(), 0o644)
}

// writeRunDir writes a run's artefacts: the HTML report (index.html, with
// the history the checker saw and the readable trace beside it), the result
// and the replay file.
func writeRunDir(dir string, res scenarios.Result, j runJSON, trace string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create -out directory: %w", err)
	}
	in := reportInput(res)
	in.Repro = j.Repro
	if _, err := report.Write(dir, in, trace); err != nil {
		return err
	}
	result, err := json.MarshalIndent(j, "", " ")
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "result.json"), append(result, '\n'), 0o644),
		os.WriteFile(filepath.Join(dir, "replay.json"), scenarios.NewReplay(res).Marshal(), 0o644),
	)
}

// reportInput gathers what the HTML report shows of a run.
func reportInput(res scenarios.Result) report.Input {
	spec := res.Plan.Spec
	in := report.Input{
		Scenario: spec.Name, Seed: res.Seed, Description: spec.Description, Expect: spec.Expect.String(),
		TraceHash: fmt.Sprintf("%016x", res.TraceHash), Verdict: res.Verdict, History: res.History,
		Faults: res.Faults(), Nodes: res.Nodes, SimEnd: res.SimTime, Repro: reproLine(spec, res.Seed),
	}
	if res.Plan.Options != nil {
		in.Options = res.Plan.Options.String()
	}
	for _, p := range res.Picks {
		in.Picks = append(in.Picks, report.Pick{At: p.At, Selector: p.Selector, Node: p.Node})
	}
	return in
}
