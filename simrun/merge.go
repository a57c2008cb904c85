package simrun

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/scenarios"
)

// sweepTrailer is the last line of a `sweep -json` output: what the sweep
// was (program, scenarios, planted bug, seed range, shard) and whether it
// ran all of it, so that merge can tell a whole sweep from a partial one.
type sweepTrailer struct {
	Program   string   `json:"program"`
	Scenarios []string `json:"scenarios"`
	Mutant    string   `json:"mutant,omitempty"`
	SeedFrom  uint64   `json:"seed_from"`
	SeedTo    uint64   `json:"seed_to"`
	Shard     int      `json:"shard"`
	Shards    int      `json:"shards"`
	Runs      int      `json:"runs"` // run lines before the trailer
	// Complete: every run of the shard reached a verdict. A budget or
	// SIGINT (Stopped) leaves a shard incomplete.
	Complete bool   `json:"complete"`
	Stopped  string `json:"stopped,omitempty"`
}

// sweepLine is one line of `sweep -json` output: a run, or the trailer.
type sweepLine struct {
	runJSON
	Sweep *sweepTrailer `json:"sweep,omitempty"`
}

// String names a shard for messages: "shard 2/4 of seeds 1..1000".
func (t sweepTrailer) String() string {
	return fmt.Sprintf("shard %d/%d of seeds %d..%d", t.Shard, t.Shards, t.SeedFrom, t.SeedTo)
}

// sameSweep reports whether two trailers are shards of one sweep.
func (t sweepTrailer) sameSweep(u sweepTrailer) bool {
	return t.Program == u.Program && slices.Equal(t.Scenarios, u.Scenarios) && t.Mutant == u.Mutant &&
		t.SeedFrom == u.SeedFrom && t.SeedTo == u.SeedTo && t.Shards == u.Shards
}

// jobs is the work the trailer's shard stands for.
func (t sweepTrailer) jobs() scenarios.JobSet {
	return scenarios.JobSet{Specs: make([]scenarios.Spec, len(t.Scenarios)), Lo: t.SeedFrom, Hi: t.SeedTo, Shard: t.Shard, Shards: t.Shards}
}

// holds reports whether the run belongs to the trailer's shard.
func (t sweepTrailer) holds(j runJSON) bool {
	return slices.Contains(t.Scenarios, j.Scenario) && j.Seed >= t.SeedFrom && j.Seed <= t.SeedTo &&
		int(j.Seed%uint64(t.Shards))+1 == t.Shard
}

// shardFile is a trailer and where it was read.
type shardFile struct {
	sweepTrailer
	where string // FILE:LINE
}

// cmdMerge reads the JSON lines of several `sweep -json` runs (the shards of
// a CI matrix), checks that they are every shard of one sweep, each once and
// complete, and that they do not disagree, and prints one summary with the
// exit code the whole sweep would have had.
func cmdMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	partial := fs.Bool("partial", false, "merge what there is: missing, duplicate, incomplete or mismatched shards are reported, not refused")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simrun merge [-partial] FILE...   (each FILE holds `simrun sweep -json` output: one or more shards, each closed by its trailer line)")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	type key struct {
		scenario string
		seed     uint64
	}
	seen := map[key]runJSON{}
	sums := map[string]*scenarios.Summary{}
	var order, failures, problems []string
	var shards []shardFile
	// tally sums the runs' coverage marks, printed when any run carried
	// some (shards swept with -coverage).
	var tally coverage.Tally
	withMarks := false
	// take merges runs, once their shard is known to hold them (a foreign
	// run is a shard's problem, not a second run of a seed); after printing
	// why, it returns exitNondeterminism if a run disagrees with an earlier
	// one, exitUsage if a run names an unknown mark, else exitPass.
	take := func(runs []segmentRun) int {
		for _, r := range runs {
			j := r.runJSON
			k := key{j.Scenario, j.Seed}
			if prev, dup := seen[k]; dup {
				if prev.TraceHash != j.TraceHash || prev.Verdict != j.Verdict {
					fmt.Fprintf(stderr, "simrun merge: NONDETERMINISM: %s seed %d appears twice with hashes %s and %s (the second at %s)\n", j.Scenario, j.Seed, prev.TraceHash, j.TraceHash, r.where)
					return exitNondeterminism
				}
				continue // the same run twice (a duplicate shard, reported below): count it once
			}
			seen[k] = j
			c, err := coverage.CountsFromMap(j.Marks)
			if err != nil {
				fmt.Fprintf(stderr, "simrun merge: %s: %v (a line of another program version?)\n", r.where, err)
				return exitUsage
			}
			withMarks = withMarks || len(j.Marks) > 0
			tally.Add(c)
			s := sums[j.Scenario]
			if s == nil {
				s = &scenarios.Summary{Scenario: j.Scenario}
				if spec, ok := scenarios.Lookup(j.Scenario); ok {
					s.Expect = spec.Expect
				}
				sums[j.Scenario] = s
				order = append(order, j.Scenario)
			}
			s.AddVerdict(j.Verdict, j.Property, j.Met, seconds(j.SimSeconds), seconds(j.WallSeconds), j.Events)
			if !j.Met {
				failures = append(failures, fmt.Sprintf("MISS %s seed %d: got %s %s, want %s — reproduce: %s", j.Scenario, j.Seed, j.Verdict, j.Property, j.Expected, j.Repro))
			}
		}
		return exitPass
	}
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "simrun merge: %v\n", err)
			return exitUsage
		}
		var segment []segmentRun // runs read since the last trailer
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		line := 1
		for ; sc.Scan(); line++ {
			var l sweepLine
			err := json.Unmarshal(sc.Bytes(), &l)
			if err == nil && l.Sweep != nil {
				t := shardFile{*l.Sweep, fmt.Sprintf("%s:%d", path, line)}
				own, ps := checkShard(t, segment)
				problems = append(problems, ps...)
				if code := take(own); code != exitPass {
					f.Close()
					return code
				}
				shards = append(shards, t)
				segment = segment[:0]
				continue
			}
			j := l.runJSON
			if err != nil || j.Scenario == "" || j.Verdict == "" {
				why := "missing scenario or verdict"
				if err != nil {
					why = err.Error()
				}
				f.Close()
				fmt.Fprintf(stderr, "simrun merge: %s:%d: not a line of `simrun sweep -json` output: %s\n", path, line, why)
				return exitUsage
			}
			segment = append(segment, segmentRun{j, fmt.Sprintf("%s:%d", path, line)})
		}
		f.Close()
		if err := sc.Err(); err != nil {
			fmt.Fprintf(stderr, "simrun merge: %s: %v\n", path, err)
			return exitUsage
		}
		if len(segment) > 0 {
			problems = append(problems, fmt.Sprintf("%s: the last %d runs have no trailer line: the sweep did not finish (killed?) or the file was cut short", path, len(segment)))
			if code := take(segment); code != exitPass {
				return code
			}
		}
	}
	problems = append(problems, checkShards(shards)...)
	if len(problems) > 0 && !*partial {
		for _, p := range problems {
			fmt.Fprintf(stderr, "simrun merge: %s\n", p)
		}
		fmt.Fprintln(stderr, "simrun merge: refusing to merge an incomplete sweep (exit 2); -partial merges what there is")
		return exitUsage
	}

	var specs []scenarios.Spec
	if len(shards) > 0 { // the sweep's order, even for a scenario without runs
		for _, name := range shards[0].Scenarios {
			if !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		slices.SortStableFunc(order, func(a, b string) int {
			return slices.Index(shards[0].Scenarios, a) - slices.Index(shards[0].Scenarios, b)
		})
	}
	for _, name := range order {
		specs = append(specs, scenarios.Spec{Name: name})
	}
	var wall time.Duration
	for _, s := range sums {
		wall += s.Wall
	}
	printSummary(stdout, specs, sums, wall, 1)
	if withMarks {
		printCoverage(stdout, &tally)
	}
	for _, f := range failures {
		fmt.Fprintln(stdout, f)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "PARTIAL: this merge is not the whole sweep:\n  %s\n", strings.Join(problems, "\n  "))
	} else {
		fmt.Fprintf(stdout, "merged every shard of seeds %d..%d (%d shards), each complete\n", shards[0].SeedFrom, shards[0].SeedTo, shards[0].Shards)
	}
	code := exitPass
	for _, s := range sums {
		code = worse(code, s)
	}
	return code
}

// segmentRun is a run line and where it was read.
type segmentRun struct {
	runJSON
	where string // FILE:LINE
}

// checkShard checks one shard against the runs read before its trailer:
// complete, with as many runs as the trailer says (as many as the shard
// holds if complete), each one of its own. It returns the runs that are
// its own, to merge: it runs before the check for a seed seen twice, so
// that a line edited to another shard's seed is named as foreign, not
// taken for nondeterminism.
func checkShard(t shardFile, runs []segmentRun) ([]segmentRun, []string) {
	if t.Shards < 1 || t.Shard < 1 || t.Shard > t.Shards || t.SeedFrom > t.SeedTo || len(t.Scenarios) == 0 {
		return nil, []string{fmt.Sprintf("%s: not a valid trailer (%s, %d scenarios)", t.where, t, len(t.Scenarios))}
	}
	var problems []string
	if !t.Complete {
		why := "stopped"
		if t.Stopped != "" {
			why = "stopped by " + t.Stopped
		}
		problems = append(problems, fmt.Sprintf("%s: %s did not complete (%s after %d runs)", t.where, t, why, t.Runs))
	}
	if len(runs) != t.Runs {
		problems = append(problems, fmt.Sprintf("%s: %s says %d runs, but %d run lines precede it (lines lost or added)", t.where, t, t.Runs, len(runs)))
	} else if want := t.jobs().Len(); t.Complete && uint64(t.Runs) != want {
		problems = append(problems, fmt.Sprintf("%s: %s says it is complete with %d runs, but it holds %d", t.where, t, t.Runs, want))
	}
	var own []segmentRun
	for _, r := range runs {
		if !t.holds(r.runJSON) {
			problems = append(problems, fmt.Sprintf("%s: %s seed %d is not a run of the %s its trailer (%s) names", r.where, r.Scenario, r.Seed, t, t.where))
			continue
		}
		own = append(own, r)
	}
	return own, problems
}

// checkShards checks that the shards are those of one sweep, each exactly
// once.
func checkShards(shards []shardFile) []string {
	if len(shards) == 0 {
		return []string{"no trailer line in any file: not the output of `simrun sweep -json` by this version, or no sweep finished"}
	}
	var problems []string
	first := shards[0]
	seen := map[int]string{}
	for _, s := range shards {
		if !s.sameSweep(first.sweepTrailer) {
			problems = append(problems, fmt.Sprintf("%s (%s) and %s (%s) are shards of different sweeps: %s",
				first.where, first.describe(), s.where, s.describe(), first.difference(s.sweepTrailer)))
			continue
		}
		if prev, dup := seen[s.Shard]; dup {
			problems = append(problems, fmt.Sprintf("shard %d/%d appears twice: %s and %s", s.Shard, s.Shards, prev, s.where))
		}
		seen[s.Shard] = s.where
	}
	for i := 1; i <= first.Shards; i++ {
		if _, ok := seen[i]; !ok {
			problems = append(problems, fmt.Sprintf("shard %d/%d of seeds %d..%d is missing", i, first.Shards, first.SeedFrom, first.SeedTo))
		}
	}
	return problems
}

// describe names what a trailer's sweep is.
func (t sweepTrailer) describe() string {
	d := fmt.Sprintf("%s, %d scenario(s), %s", t, len(t.Scenarios), t.Program)
	if t.Mutant != "" {
		d += ", mutant " + t.Mutant
	}
	return d
}

// difference names the first field in which two sweeps differ.
func (t sweepTrailer) difference(u sweepTrailer) string {
	switch {
	case t.Program != u.Program:
		return "program " + t.Program + " vs " + u.Program
	case !slices.Equal(t.Scenarios, u.Scenarios):
		return "scenario sets differ"
	case t.Mutant != u.Mutant:
		return fmt.Sprintf("mutant %q vs %q", t.Mutant, u.Mutant)
	case t.SeedFrom != u.SeedFrom || t.SeedTo != u.SeedTo:
		return fmt.Sprintf("seeds %d..%d vs %d..%d", t.SeedFrom, t.SeedTo, u.SeedFrom, u.SeedTo)
	}
	return fmt.Sprintf("%d shards vs %d", t.Shards, u.Shards)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
