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

	"github.com/fencesim/fencesim/scenarios"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "", "built-in scenario `name` (see simrun list)")
	seed := fs.Uint64("seed", 1, "root `seed` of the run")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	out := fs.String("out", "", "write trace.txt, history.json and result.json into `dir`")
	trace := fs.Bool("trace", false, "print the readable trace to stderr")
	twice := fs.Bool("check-twice", false, "run the seed twice and fail with exit 4 if the trace hashes differ")
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
	repro := reproLine(spec.Name, *seed)

	// The seed and every option first, so that even a crash reproduces.
	if !*asJSON {
		opts, _ := json.Marshal(spec)
		fmt.Fprintf(stdout, "scenario=%s seed=%d\noptions=%s\n", spec.Name, *seed, opts)
	}

	var traceBuf strings.Builder
	var traceW io.Writer
	switch {
	case *out != "":
		traceW = &traceBuf
	case *trace:
		traceW = stderr
	}
	res, err := scenarios.Run(spec, *seed, scenarios.RunOptions{Trace: traceW})
	if err != nil {
		fmt.Fprintf(stderr, "simrun run: %v\n", err)
		return exitUsage
	}
	if *out != "" && *trace {
		io.WriteString(stderr, traceBuf.String())
	}
	code := exitCode(res.Verdict)
	if *twice {
		again, err := scenarios.Run(spec, *seed, scenarios.RunOptions{})
		if err != nil || again.TraceHash != res.TraceHash {
			fmt.Fprintf(stderr, "simrun run: NONDETERMINISM: seed %d gave trace hashes %016x and %016x\n", *seed, res.TraceHash, again.TraceHash)
			code = exitNondeterminism
		}
	}

	j := toJSON(spec, res)
	if *out != "" {
		if err := writeRunDir(*out, res, j, traceBuf.String()); err != nil {
			fmt.Fprintf(stderr, "simrun run: %v\n", err)
			return exitUsage
		}
	}
	if *asJSON {
		b, _ := json.Marshal(j)
		fmt.Fprintf(stdout, "%s\n", b)
		return code
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
	fmt.Fprintf(w, "trace_hash=%s events=%d sim_seconds=%.3f wall_seconds=%.4f sim/wall=%.0f\n",
		j.TraceHash, j.Events, j.SimSeconds, j.WallSeconds, j.Speedup)
	if code != exitPass {
		fmt.Fprintf(w, "reproduce: %s\n", repro)
	}
	return code
}

// writeRunDir writes a run's artefacts: the readable trace, the history the
// checker saw, and the result.
func writeRunDir(dir string, res scenarios.Result, j runJSON, trace string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create -out directory: %w", err)
	}
	hist, err := json.MarshalIndent(res.History, "", " ")
	if err != nil {
		return err
	}
	result, err := json.MarshalIndent(j, "", " ")
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "trace.txt"), []byte(trace), 0o644),
		os.WriteFile(filepath.Join(dir, "history.json"), append(hist, '\n'), 0o644),
		os.WriteFile(filepath.Join(dir, "result.json"), append(result, '\n'), 0o644),
	)
}
