package simrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/scenarios"
)

// guidedJSON is one line of `sweep -guided -json`: a run's line with where
// its plan came from.
type guidedJSON struct {
	runJSON
	Run    int    `json:"run"`              // position in the search, from 1
	Origin string `json:"origin"`           // "fresh" or the mutations applied
	Parent int    `json:"parent,omitempty"` // the corpus run (1-based) it was derived from
	Corpus string `json:"corpus,omitempty"` // why the run joined the corpus
}

// guidedSweep is `sweep -guided`: a coverage-guided search of one swarm
// spec, runs lo..hi standing for hi-lo+1 runs from root seed lo.
type guidedSweep struct {
	spec         scenarios.Spec
	lo, hi       uint64
	workers      int
	budget       time.Duration
	asJSON       bool
	withCoverage bool
	branches     bool // -branches: Go's coverage counters in the signal
	corpusDir    string
	progress     string // as sweep's -progress
	kept         *keeper
}

func (g guidedSweep) run(ctx context.Context, stdout, stderr io.Writer) int {
	if g.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.budget)
		defer cancel()
	}
	runs := int(min(g.hi-g.lo, 1<<40)) + 1
	fmt.Fprintf(stderr, "sweep -guided: %s, %d runs from root seed %d on %d worker(s)\n", g.spec.Name, runs, g.lo, g.workers)
	bar := newProgress(g.progress, runs, stderr)
	start := time.Now()
	sum := &scenarios.Summary{Scenario: g.spec.Name, Expect: g.spec.Expect}
	var unknowns unknownTally
	var failures []string
	unlisted := 0
	enc := json.NewEncoder(stdout)
	st, err := scenarios.Guided(ctx, g.spec, scenarios.GuidedOptions{Root: g.lo, Runs: runs, Workers: g.workers, Branches: g.branches}, func(gr scenarios.GuidedRun) bool {
		r := gr.Job()
		r.Job.Spec = g.spec // judged by the spec's expectation, named by the spec
		sum.Add(r)
		unknowns.add(r)
		if g.asJSON {
			j := guidedJSON{runJSON: toJSON(g.spec, gr.Result), Run: gr.Index + 1, Origin: gr.Origin, Corpus: gr.Why}
			if gr.Parent >= 0 {
				j.Parent = gr.Parent + 1
			}
			if !g.withCoverage {
				j.Marks = nil
			}
			if gr.Err != nil {
				j.runJSON = runJSON{Scenario: g.spec.Name, Seed: r.Job.Seed, Verdict: "error", Error: gr.Err.Error()}
			}
			enc.Encode(j)
		}
		if gr.Err != nil || !gr.Result.Met(g.spec) {
			line := fmt.Sprintf("MISS %s guided run %d (%s): ", g.spec.Name, gr.Index+1, gr.Origin)
			if gr.Err != nil {
				line += gr.Err.Error()
			} else {
				v := gr.Result.Verdict
				what := v.Kind.String()
				if p := v.Property(); p != "" {
					what += " " + p
				}
				p, err := writeGuidedReplay(failuresDir, gr)
				if err != nil {
					p = "cannot write the replay file: " + err.Error()
				}
				line += fmt.Sprintf("got %s, want %s — replay: simrun replay %s\n     %s", what, g.spec.Expect, p, g.kept.keep(gr.Result))
			}
			if len(failures) < maxFailureLines {
				failures = append(failures, line)
			} else {
				unlisted++
			}
		}
		bar.step(r)
		return true
	})
	bar.finish()
	if err != nil {
		fmt.Fprintf(stderr, "simrun sweep: -guided: %v\n", err)
		return exitUsage
	}
	elapsed := time.Since(start)
	out := stdout
	if g.asJSON {
		out = stderr
	}
	printSummary(out, []scenarios.Spec{g.spec}, map[string]*scenarios.Summary{g.spec.Name: sum}, elapsed, g.workers)
	unknowns.print(out)
	printGuided(out, st)
	if g.withCoverage {
		printCoverage(out, &st.Tally)
	}
	if g.corpusDir != "" {
		if err := os.MkdirAll(g.corpusDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "simrun sweep: -corpus: %v\n", err)
			return exitUsage
		}
		for _, e := range st.Corpus {
			p := filepath.Join(g.corpusDir, fmt.Sprintf("%s-run%d.json", g.spec.Name, e.Index+1))
			if err := os.WriteFile(p, e.Replay.Marshal(), 0o644); err != nil {
				fmt.Fprintf(stderr, "simrun sweep: -corpus: %v\n", err)
				return exitUsage
			}
		}
		fmt.Fprintf(out, "corpus: %d replay files written under %s/ (simrun replay runs each)\n", len(st.Corpus), g.corpusDir)
	}
	for _, f := range failures {
		fmt.Fprintln(out, f)
	}
	if unlisted > 0 {
		fmt.Fprintf(out, "… and %d more misses, not listed (-json prints every run)\n", unlisted)
	}
	if st.Runs < runs {
		fmt.Fprintf(out, "stopped: %d of %d runs finished (%d stopped in flight)\n", st.Runs, runs, st.Interrupted)
	}
	code := worse(exitPass, sum)
	if st.Runs < runs && code == exitPass && ctx.Err() != context.DeadlineExceeded {
		return exitInterrupted
	}
	if st.Runs == 0 && code == exitPass {
		fmt.Fprintln(out, "no run finished: nothing was checked (exit 5); give the sweep a longer -budget")
		return exitUnknown
	}
	return code
}

// printGuided prints the corpus and when each mark was first reached.
func printGuided(w io.Writer, st scenarios.GuidedStats) {
	whys := map[string]int{}
	for _, e := range st.Corpus {
		why := e.Why
		for _, kind := range []string{"new mark", "new branch"} {
			if strings.HasPrefix(why, kind+" ") {
				why = kind
			}
		}
		whys[why]++
	}
	fmt.Fprintf(w, "corpus: %d plans (%s)\n", len(st.Corpus), counts(whys))
	last, reached := 0, 0
	for _, m := range coverage.All() {
		if n := st.FirstHit[m]; n > 0 {
			reached++
			last = max(last, n)
		}
	}
	fmt.Fprintf(w, "marks reached: %d of %d, the last first reached at run %d\n", reached, len(coverage.All()), last)
	if st.Features > 0 {
		of := ""
		if st.AllBlocks > 0 {
			of = fmt.Sprintf(" of %d (%.1f %%)", st.AllBlocks, 100*float64(st.Blocks)/float64(st.AllBlocks))
		}
		fmt.Fprintf(w, "branch coverage: %d blocks%s of the covered code reached, %d block×hit-count features\n", st.Blocks, of, st.Features)
	}
}

// writeGuidedReplay writes a guided run's replay file, named by its run
// index (a mutated plan may share its world seed with its parent).
func writeGuidedReplay(dir string, gr scenarios.GuidedRun) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-guided-run%d.json", gr.Result.Scenario, gr.Index+1))
	return p, os.WriteFile(p, scenarios.NewReplay(gr.Result).Marshal(), 0o644)
}

// guidedSpec is the spec a guided hunt searches: the one given, else the
// swarm (with a planted bug's design, as the hunt sets it).
func guidedSpec(fixed *scenarios.Spec) scenarios.Spec {
	if fixed != nil {
		return *fixed
	}
	s, _ := scenarios.Lookup("swarm")
	return s
}

// printGuidedTable prints the detection table of `hunt -all -guided`: per
// mutant, what caught it and after how many guided runs, then the median
// and maximum.
func printGuidedTable(w io.Writer, rows []huntJSON) {
	desc := map[string]string{}
	for _, m := range mutants.Mutants() {
		desc[string(m.Name)] = m.Description
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| mutant\t| scenario\t| caught by\t| guided runs\t| wall\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|")
	var n []int
	missed := 0
	for _, r := range rows {
		name := "`" + r.Mutant + "`"
		if d := desc[r.Mutant]; d != "" {
			name += " — " + d
		}
		if !r.Detected {
			missed++
			fmt.Fprintf(tw, "| %s\t| %s\t| **not detected**\t| > %d\t| %.2f s\t|\n", name, r.Scenario, r.SeedsTried, r.WallSeconds)
			continue
		}
		n = append(n, r.SeedsTried)
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %d\t| %.2f s\t|\n", name, r.Scenario, r.Property, r.SeedsTried, r.WallSeconds)
	}
	tw.Flush()
	if missed > 0 {
		fmt.Fprintf(w, "\nGuided: %d of %d mutants not detected.\n", missed, len(rows))
		return
	}
	if len(n) > 0 {
		slices.Sort(n)
		fmt.Fprintf(w, "\nGuided: median %d runs, max %d (%d mutants).\n", n[len(n)/2], n[len(n)-1], len(n))
	}
}
