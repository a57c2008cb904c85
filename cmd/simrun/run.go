package main

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

	"github.com/fencesim/fencesim/report"
	"github.com/fencesim/fencesim/scenarios"
)

// failuresDir is where failing runs leave their replay files by default.
const failuresDir = "failures"

// outputFlags are the flags run and replay share.
type outputFlags struct {
	asJSON, trace, twice bool
	out                  string
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of text")
	fs.StringVar(&o.out, "out", "", "write the HTML report (index.html), trace.txt, history.json, result.json and replay.json into `dir`")
	fs.BoolVar(&o.trace, "trace", false, "print the readable trace to stderr")
	fs.BoolVar(&o.twice, "check-twice", false, "run twice and fail with exit 4 if the trace hashes differ")
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "", "built-in scenario `name` (see simrun list)")
	seed := fs.Uint64("seed", 1, "root `seed` of the run")
	mutant := fs.String("mutant", "", "plant this bug (see simrun list -mutants)")
	var o outputFlags
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *name == "" {
		fmt.Fprintf(stderr, "simrun run: -scenario is required; built-in scenarios: %s\n", strings.Join(scenarios.Names(), ", "))
		return exitUsage
	}
	spec, ok := scenarios.Lookup(*name)
	if !ok {
		fmt.Fprintf(stderr, "simrun run: unknown scenario %q; built-in scenarios: %s\n", *name, strings.Join(scenarios.Names(), ", "))
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
	_, code := execute("simrun run", plan, o, true, stdout, stderr)
	return code
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
		fmt.Fprintf(stdout, "faults: %d operations\n", len(plan.Schedule))
	}
	var traceBuf strings.Builder
	var traceW io.Writer
	switch {
	case o.out != "":
		traceW = &traceBuf
	case o.trace:
		traceW = stderr
	}
	res, err := plan.Run(scenarios.RunOptions{Trace: traceW})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return res, exitUsage
	}
	if o.out != "" && o.trace {
		io.WriteString(stderr, traceBuf.String())
	}
	code := exitCode(res.Verdict)
	if o.twice {
		again, err := plan.Run(scenarios.RunOptions{})
		if err != nil || again.TraceHash != res.TraceHash {
			fmt.Fprintf(stderr, "%s: NONDETERMINISM: seed %d gave trace hashes %016x and %016x\n", cmd, plan.Seed, res.TraceHash, again.TraceHash)
			code = exitNondeterminism
		}
	}
	j := toJSON(spec, res)
	var replayPath string
	switch {
	case o.out != "":
		if err := writeRunDir(o.out, res, j, traceBuf.String()); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
			return res, exitUsage
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
	m := res.Verdict.Metrics.BeliefOverlap
	fmt.Fprintf(w, "belief overlap (a metric, not a failure: fencing is what makes it harmless): %d windows, %v in all, longest %v\n", m.Windows, m.Total, m.Longest)
	fmt.Fprintf(w, "trace_hash=%s events=%d sim_seconds=%.3f wall_seconds=%.4f sim/wall=%.0f\n",
		j.TraceHash, j.Events, j.SimSeconds, j.WallSeconds, j.Speedup)
	if res.Crash != nil {
		fmt.Fprintf(w, "stack of the panic (seed %d):\n%s\n", plan.Seed, indent(res.Crash.Stack))
	}
	if code != exitPass {
		fmt.Fprintf(w, "reproduce: %s\n", j.Repro)
	}
	if replayPath != "" {
		fmt.Fprintf(w, "replay file: %s (simrun replay %s)\n", replayPath, replayPath)
	}
	return res, code
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
	if _, err := report.Write(dir, reportInput(res), trace); err != nil {
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
		Faults: res.Plan.Schedule, Nodes: res.Nodes, SimEnd: res.SimTime, Repro: reproLine(spec, res.Seed),
	}
	if res.Plan.Options != nil {
		in.Options = res.Plan.Options.String()
	}
	return in
}
