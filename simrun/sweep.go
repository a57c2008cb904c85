package simrun

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/scenarios"
)

// defaultSeeds is the main job's range: every built-in scenario over it
// takes about a minute on 2 cores.
const defaultSeeds = "1..1000"

// exitInterrupted: SIGINT stopped the sweep before every job ran.
const exitInterrupted = 130

// maxFailureLines bounds the MISS lines a sweep prints (a planted bug can
// miss on every one of a million seeds); the rest are counted.
const maxFailureLines = 100

func cmdSweep(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("scenario", "", "sweep only this built-in `scenario` (default: every one)")
	specFile := fs.String("spec", "", "sweep only the scenario spec in `file.json` (one of yours, e.g. naming your design)")
	all := fs.Bool("all", false, "sweep every built-in scenario (the default)")
	seeds := fs.String("seeds", defaultSeeds, "seed `range` A..B, inclusive")
	workers := fs.Int("workers", runtime.NumCPU(), "simulations run at once")
	shard := fs.String("shard", "1/1", "run only shard `i/n` of the seeds (for CI matrices)")
	budget := fs.Duration("budget", 0, "stop the sweep after this wall `duration`, runs in flight included, and summarize what finished (0: no limit)")
	asJSON := fs.Bool("json", false, "print one JSON object per seed per line on stdout, nothing else")
	withCoverage := fs.Bool("coverage", false, "tally the coverage marks (protocol corners, see simrun list -marks): hits and the fraction of seeds hitting each, after the summary; with -json each line carries its run's marks")
	mutant := fs.String("mutant", "", "plant this bug in every scenario (see simrun list -mutants)")
	design := designFlag(fs)
	progress := fs.String("progress", "auto", "progress display: auto (a bar on a terminal, lines elsewhere), bar, lines, none")
	keepDirs := fs.Int("keep", defaultKeep, "write the report directories of at most `n` misses under failures/ (every miss still gets its MISS line)")
	keepCap, traceCap := size(defaultKeepCap), size(defaultTraceCap)
	fs.Var(&keepCap, "keep-cap", "stop writing report directories once they take this `size` in all")
	fs.Var(&traceCap, "trace-cap", "keep a miss's trace.txt only if it is at most this `size` (0: no cap of its own, within -keep-cap and the spec's limits.trace_bytes)")
	guided := fs.Bool("guided", false, "coverage-guided search of one swarm scenario (default: swarm): -seeds A..B makes B-A+1 runs from root seed A, mutating the plans that reach rare marks (see docs/guided-search.md)")
	corpusDir := fs.String("corpus", "", "with -guided, write the final corpus as replay files under `dir`")
	withBranches := fs.Bool("branches", false, "with -guided, steer by Go's coverage counters of the protocol code too (needs a binary built with -cover -covermode=atomic; see docs/guided-search.md)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun sweep: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *guided && *name == "" && *specFile == "" {
		*name = "swarm" // guided search mutates one swarm's plans
	}
	if *guided && (*all || *shard != "1/1") || (*corpusDir != "" || *withBranches) && !*guided {
		fmt.Fprintln(stderr, "simrun sweep: -guided searches one swarm scenario (no -all, no -shard); -corpus and -branches go with -guided")
		return exitUsage
	}
	specs := scenarios.Builtin()
	if *name != "" || *specFile != "" {
		if *all {
			fmt.Fprintln(stderr, "simrun sweep: -scenario or -spec and -all exclude each other")
			return exitUsage
		}
		spec, err := chooseSpec(*name, *specFile)
		if err != nil {
			fmt.Fprintf(stderr, "simrun sweep: %v\n", err)
			return exitUsage
		}
		specs = []scenarios.Spec{spec}
	}
	for i := range specs {
		var err error
		specs[i], err = withDesign(specs[i], *design)
		if err == nil && *design != "" {
			_, err = scenarios.NewPlan(specs[i], 1) // a fault naming another design's node
		}
		if err != nil {
			fmt.Fprintf(stderr, "simrun sweep: %s: %v\n", specs[i].Name, err)
			return exitUsage
		}
	}
	if *mutant != "" {
		if _, err := mutants.ParseMutant(*mutant); err != nil {
			fmt.Fprintf(stderr, "simrun sweep: -mutant: %v\n", err)
			return exitUsage
		}
		for i := range specs {
			specs[i].Mutant = *mutant
			if d := mutants.Design(lockservice.Mutant(*mutant)); d != "" && *design == "" {
				var err error
				if specs[i], err = withDesign(specs[i], d); err != nil {
					fmt.Fprintf(stderr, "simrun sweep: %v\n", err)
					return exitUsage
				}
			}
		}
	}
	lo, hi, err := parseSeeds(*seeds)
	if err != nil {
		fmt.Fprintf(stderr, "simrun sweep: -seeds: %v\n", err)
		return exitUsage
	}
	si, sn, err := parseShard(*shard)
	if err != nil {
		fmt.Fprintf(stderr, "simrun sweep: -shard: %v\n", err)
		return exitUsage
	}
	if *workers < 1 {
		fmt.Fprintf(stderr, "simrun sweep: -workers must be at least 1, got %d\n", *workers)
		return exitUsage
	}
	if *budget < 0 {
		fmt.Fprintf(stderr, "simrun sweep: -budget must be a positive duration (e.g. 30s) or 0 for none, got %v\n", *budget)
		return exitUsage
	}
	if *keepDirs < 0 {
		fmt.Fprintf(stderr, "simrun sweep: -keep must be 0 or more, got %d\n", *keepDirs)
		return exitUsage
	}
	if !slices.Contains([]string{"auto", "bar", "lines", "none"}, *progress) {
		fmt.Fprintf(stderr, "simrun sweep: -progress must be auto, bar, lines or none, got %q\n", *progress)
		return exitUsage
	}

	// SIGINT is caught from here on: the header below says the sweep runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first SIGINT, a second one kills at once
	if *guided {
		if !specs[0].Swarm {
			fmt.Fprintf(stderr, "simrun sweep: -guided: %v\n", scenarios.ErrNotSwarm)
			return exitUsage
		}
		return guidedSweep{spec: specs[0], lo: lo, hi: hi, workers: *workers, budget: *budget, asJSON: *asJSON, withCoverage: *withCoverage, branches: *withBranches,
			corpusDir: *corpusDir, progress: *progress, kept: &keeper{maxDirs: *keepDirs, maxBytes: int64(keepCap), traceMax: int64(traceCap), stop: func() bool { return ctx.Err() != nil }}}.run(ctx, stdout, stderr)
	}
	jobs := scenarios.JobSet{Specs: specs, Lo: lo, Hi: hi, Shard: si, Shards: sn}
	total := jobs.Len()
	fmt.Fprintf(stderr, "sweep: %d scenario(s) × seeds %d..%d, shard %d/%d: %d runs on %d worker(s)\n",
		len(specs), lo, hi, si, sn, total, *workers)
	bar := newProgress(*progress, int(min(total, math.MaxInt)), stderr)
	start := time.Now()
	sums := map[string]*scenarios.Summary{}
	var failures []string
	unlisted := 0 // misses beyond maxFailureLines
	kept := &keeper{maxDirs: *keepDirs, maxBytes: int64(keepCap), traceMax: int64(traceCap), stop: func() bool {
		return ctx.Err() != nil || (*budget > 0 && time.Since(start) > *budget)
	}}
	enc := json.NewEncoder(stdout)
	var tally coverage.Tally
	var unknowns unknownTally
	st := scenarios.Sweep(ctx, jobs.All(), scenarios.SweepOptions{Workers: *workers, Budget: *budget}, func(r scenarios.JobResult) {
		s := sums[r.Job.Spec.Name]
		if s == nil {
			s = &scenarios.Summary{Scenario: r.Job.Spec.Name, Expect: r.Job.Spec.Expect}
			sums[r.Job.Spec.Name] = s
		}
		s.Add(r)
		unknowns.add(r)
		if *withCoverage {
			tally.Add(r.Result.Marks)
		}
		if *asJSON {
			j := toJSON(r.Job.Spec, r.Result)
			if !*withCoverage {
				j.Marks = nil
			}
			if r.Err != nil {
				j = runJSON{Scenario: r.Job.Spec.Name, Seed: r.Job.Seed, Verdict: "error", Error: r.Err.Error(), Repro: reproLine(r.Job.Spec, r.Job.Seed)}
			}
			enc.Encode(j)
		}
		if r.Err != nil || !r.Result.Met(r.Job.Spec) {
			line := failureLine(r)
			if r.Err == nil {
				line += "\n     " + kept.keep(r.Result)
			}
			if len(failures) < maxFailureLines {
				failures = append(failures, line)
			} else {
				unlisted++
			}
		}
		bar.step(r)
	})
	bar.finish()
	elapsed := time.Since(start)
	if *asJSON {
		t := sweepTrailer{Program: scenarios.ProgramVersion, Mutant: *mutant, SeedFrom: lo, SeedTo: hi,
			Shard: si, Shards: sn, Runs: st.Emitted, Complete: st.Complete()}
		for _, s := range specs {
			t.Scenarios = append(t.Scenarios, s.Name)
		}
		if !t.Complete {
			t.Stopped = "interrupt"
			if st.BudgetSpent {
				t.Stopped = "budget"
			}
		}
		enc.Encode(struct {
			Sweep sweepTrailer `json:"sweep"`
		}{t})
	}

	out := stdout
	if *asJSON {
		out = stderr // stdout carries JSON only
	}
	printSummary(out, specs, sums, elapsed, *workers)
	unknowns.print(out)
	if *withCoverage {
		printCoverage(out, &tally)
	}
	for _, f := range failures {
		fmt.Fprintln(out, f)
	}
	if unlisted > 0 {
		fmt.Fprintf(out, "… and %d more misses, not listed (-json prints every run)\n", unlisted)
	}
	if k := kept.summary(); k != "" {
		fmt.Fprintln(out, k)
	}
	if !st.Complete() {
		why := "interrupted"
		if st.BudgetSpent {
			why = "budget spent"
		}
		fmt.Fprintf(out, "%s: %d of %d runs finished, %d stopped in flight (dropped: no verdict), %d not started; the summary covers the finished ones\n",
			why, st.Emitted, total, st.Interrupted, total-uint64(st.Emitted+st.Interrupted))
	}
	code := exitPass
	for _, s := range sums {
		code = worse(code, s)
	}
	if !st.Complete() && !st.BudgetSpent && code == exitPass {
		return exitInterrupted
	}
	if st.Emitted == 0 && total > 0 && code == exitPass {
		// Nothing was judged: a gate whose budget is too short to finish
		// one run must not read as a pass.
		fmt.Fprintln(out, "no run finished: nothing was checked (exit 5); give the sweep a longer -budget")
		return exitUnknown
	}
	return code
}

// worse returns the more severe of code and what summary s warrants: a
// violation where a pass was expected, or a canary that passed, is 1 and
// dominates; a run that could not start is a usage error; otherwise the
// highest exit code of the verdict kinds that missed (liveness 3, unknown
// 5, and any kind the checker adds, through exitCode).
func worse(code int, s *scenarios.Summary) int {
	if s.Misses == 0 {
		return code
	}
	c := exitPass
	switch {
	case s.Missed["error"] > 0:
		c = exitUsage
	case s.Missed["violation"] > 0 || s.Missed["pass"] > 0:
		c = exitViolation
	default:
		for kind := range s.Missed { // the maximum: order does not matter
			c = max(c, kindExitCode(kind))
		}
	}
	if code == exitPass || c == exitViolation {
		return c
	}
	return code
}

// kindExitCode is the exit code of a verdict kind given as its word (as
// JSON lines carry it); a word this build does not know is an unknown.
func kindExitCode(kind string) int {
	var k checker.VerdictKind
	if k.UnmarshalText([]byte(kind)) != nil {
		return exitUnknown
	}
	return exitCode(checker.Verdict{Kind: k})
}

func failureLine(r scenarios.JobResult) string {
	if r.Err != nil {
		return fmt.Sprintf("ERROR %s seed %d: %v", r.Job.Spec.Name, r.Job.Seed, r.Err)
	}
	v := r.Result.Verdict
	what := v.Kind.String()
	if p := v.Property(); p != "" {
		what += " " + p
	}
	return fmt.Sprintf("MISS %s seed %d: got %s, want %s — reproduce: %s", r.Job.Spec.Name, r.Job.Seed, what, r.Job.Spec.Expect, reproLine(r.Job.Spec, r.Job.Seed))
}

// printSummary writes one row per scenario.
func printSummary(w io.Writer, specs []scenarios.Spec, sums map[string]*scenarios.Summary, elapsed time.Duration, workers int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\texpect\tseeds\tpass\tviolations\tliveness\tunknown\tother\tmissed\tseeds/s\tsim/wall\t")
	for _, spec := range specs {
		s := sums[spec.Name]
		if s == nil {
			continue
		}
		other := maps.Clone(s.Kinds)
		for _, k := range []string{"pass", "violation", "liveness", "unknown"} {
			delete(other, k)
		}
		// Per-scenario rate from its own summed run time, scaled to the
		// workers that ran in parallel.
		rate := float64(s.Seeds) / max(s.Wall.Seconds(), 1e-9) * float64(workers)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%d\t%.0f\t%.0f\t\n", s.Scenario, s.Expect, s.Seeds, s.Kinds["pass"], counts(s.Violations),
			s.Kinds["liveness"], s.Kinds["unknown"], counts(other), s.Misses, rate, s.SimTime.Seconds()/max(s.Wall.Seconds(), 1e-9))
	}
	tw.Flush()
	total := 0
	for _, s := range sums {
		total += s.Seeds
	}
	fmt.Fprintf(w, "%d runs in %.1fs wall (%.0f runs/s on %d workers)\n", total, elapsed.Seconds(), float64(total)/max(elapsed.Seconds(), 1e-9), workers)
}

// counts writes m as "k:n k:n" in key order, or "-" when empty.
func counts(m map[string]int) string {
	var vs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		vs = append(vs, fmt.Sprintf("%s:%d", k, m[k]))
	}
	if len(vs) == 0 {
		return "-"
	}
	return strings.Join(vs, " ")
}

// parseSeeds reads "A..B" (or a single seed "N").
func parseSeeds(s string) (uint64, uint64, error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		b = a
	}
	lo, err1 := strconv.ParseUint(a, 10, 64)
	hi, err2 := strconv.ParseUint(b, 10, 64)
	if err := errors.Join(err1, err2); err != nil || hi < lo {
		return 0, 0, fmt.Errorf("want A..B with A ≤ B (e.g. 1..500), got %q", s)
	}
	return lo, hi, nil
}

// parseShard reads "i/n" with 1 ≤ i ≤ n.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("want i/n with 1 ≤ i ≤ n (e.g. 2/4), got %q", s)
	}
	return i, n, nil
}

// progress shows how far a sweep is: a bar with rate and ETA on a
// terminal, a plain line every few seconds elsewhere (CI logs).
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	lines bool
	total int
	done  int
	start time.Time
	last  time.Time
}

func newProgress(mode string, total int, w io.Writer) *progress {
	p := &progress{w: w, total: total, start: time.Now(), last: time.Now()}
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	switch {
	case mode == "bar" || (mode == "auto" && tty):
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("sweep"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("seeds"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	case mode == "lines" || mode == "auto":
		p.lines = true
	}
	return p
}

func (p *progress) step(scenarios.JobResult) {
	p.done++
	if p.bar != nil {
		p.bar.Add(1)
		return
	}
	if p.lines && (time.Since(p.last) >= 5*time.Second || p.done == p.total) {
		p.last = time.Now()
		el := time.Since(p.start).Seconds()
		rate := float64(p.done) / max(el, 1e-9)
		eta := float64(p.total-p.done) / max(rate, 1e-9)
		fmt.Fprintf(p.w, "progress: %d/%d runs, %.0f runs/s, eta %.0fs\n", p.done, p.total, rate, eta)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
