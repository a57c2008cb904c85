package simrun

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/scenarios"
)

// sweepLines runs a sweep with -json and returns "scenario seed verdict hash"
// per line.
func sweepLines(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errs := simrun(append([]string{"sweep", "-json", "-progress", "none"}, args...)...)
	if code != exitPass {
		t.Fatalf("sweep %v: exit %d\n%s", args, code, errs)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var j sweepLine
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("stdout line is not JSON: %q", l)
		}
		if j.Sweep != nil {
			continue // the trailer
		}
		lines = append(lines, j.Scenario+" "+itoa(j.Seed)+" "+j.Verdict+" "+j.TraceHash)
	}
	return lines
}

func itoa(u uint64) string { b, _ := json.Marshal(u); return string(b) }

// TestSweepIdenticalForAnyWorkersAndShards is the acceptance check: per-seed
// verdicts and hashes do not depend on the worker count, and shards
// partition the whole.
func TestSweepIdenticalForAnyWorkersAndShards(t *testing.T) {
	one := sweepLines(t, "-seeds", "1..40", "-workers", "1")
	two := sweepLines(t, "-seeds", "1..40", "-workers", "2")
	if !slices.Equal(one, two) {
		t.Fatalf("-workers 1 and 2 differ:\n%v\n%v", one, two)
	}
	s1 := sweepLines(t, "-seeds", "1..40", "-shard", "1/2")
	s2 := sweepLines(t, "-seeds", "1..40", "-shard", "2/2")
	union := append(slices.Clone(s1), s2...)
	slices.Sort(union)
	whole := slices.Clone(one)
	slices.Sort(whole)
	if !slices.Equal(union, whole) || len(s1) == 0 || len(s2) == 0 {
		t.Fatalf("shards 1/2 (%d) + 2/2 (%d) do not equal the whole (%d)", len(s1), len(s2), len(whole))
	}
}

func TestSweepSummaryAndExit(t *testing.T) {
	code, out, _ := simrun("sweep", "-seeds", "1..5", "-progress", "none")
	if code != exitPass || !strings.Contains(out, "unfenced-gc-pause") || !strings.Contains(out, "S3:5") {
		t.Fatalf("exit %d, summary:\n%s", code, out)
	}
}

func TestSweepBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-seeds", "5..1"}, "want A..B"},
		{[]string{"-seeds", "x"}, "want A..B"},
		{[]string{"-shard", "3/2"}, "want i/n"},
		{[]string{"-shard", "0/1"}, "want i/n"},
		{[]string{"-workers", "0"}, "at least 1"},
		{[]string{"-budget", "-1s"}, "-budget must be a positive duration"},
		{[]string{"-scenario", "nope"}, "unknown scenario"},
		{[]string{"-scenario", "kleppmann-gc-pause", "-all"}, "exclude each other"},
		{[]string{"-progress", "fancy"}, "-progress must be"},
		{[]string{"stray"}, "unexpected argument"},
	}
	for _, c := range cases {
		code, _, errs := simrun(append([]string{"sweep"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: got exit %d, %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// writer returns a function that writes a file into a scratch directory
// and returns its path.
func writer(t *testing.T) func(name, body string) string {
	dir := t.TempDir()
	return func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// sweepJSON runs sweep -json with args, wants exit code want, and returns
// its stdout.
func sweepJSON(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errs := simrun(append([]string{"sweep", "-json", "-progress", "none"}, args...)...)
	if code != want {
		t.Fatalf("sweep %v: exit %d: %s", args, code, errs)
	}
	return out
}

func TestMerge(t *testing.T) {
	write := writer(t)
	sweep := func(name string, want int, args ...string) string {
		return write(name, sweepJSON(t, want, args...))
	}
	a, b := sweep("a.jsonl", exitPass, "-seeds", "1..10", "-shard", "1/2"), sweep("b.jsonl", exitPass, "-seeds", "1..10", "-shard", "2/2")
	code, out, errs := simrun("merge", a, b)
	if code != exitPass || !strings.Contains(out, "S3:10") || !strings.Contains(out, fmt.Sprintf("%d runs", 10*len(scenarios.Builtin()))) ||
		!strings.Contains(out, "merged every shard of seeds 1..10 (2 shards), each complete") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}

	// A line that disagrees with another copy of the same run is nondeterminism.
	lines := strings.SplitAfter(readFile(t, a), "\n")
	var j runJSON
	json.Unmarshal([]byte(lines[0]), &j)
	j.TraceHash = "0000000000000000"
	bad, _ := json.Marshal(j)
	c := write("c.jsonl", string(bad)+"\n"+strings.Join(lines[1:], ""))
	if code, _, errs := simrun("merge", a, c); code != exitNondeterminism || !strings.Contains(errs, "NONDETERMINISM") {
		t.Fatalf("got exit %d %q, want 4", code, errs)
	}

	// A missed expectation makes the merge fail like the sweep would.
	m1 := sweep("m1.jsonl", exitViolation, "-scenario", "kleppmann-gc-pause", "-mutant", "store-no-fence", "-seeds", "1..4", "-shard", "1/2")
	m2 := sweep("m2.jsonl", exitViolation, "-scenario", "kleppmann-gc-pause", "-mutant", "store-no-fence", "-seeds", "1..4", "-shard", "2/2")
	if code, out, _ := simrun("merge", m1, m2); code != exitViolation || !strings.Contains(out, "MISS kleppmann-gc-pause seed 3") {
		t.Fatalf("got exit %d\n%s", code, out)
	}

	for _, bad := range []string{"{\"x\":1}\n", "not json\n"} {
		p := write("bad.jsonl", bad)
		if code, _, errs := simrun("merge", p); code != exitUsage || !strings.Contains(errs, "bad.jsonl:1") {
			t.Errorf("%q: got exit %d %q", bad, code, errs)
		}
	}
	if code, _, _ := simrun("merge"); code != exitUsage {
		t.Errorf("merge without files: exit %d", code)
	}
}

// TestMergeRefusesIncompleteSweeps: merge knows what it merges. A missing,
// duplicated, interrupted, truncated or foreign shard is refused with exit 2
// and a message naming it, unless -partial, which merges what there is and
// says what is missing. (merge used to add up whatever lines it was given.)
func TestMergeRefusesIncompleteSweeps(t *testing.T) {
	write := writer(t)
	sweep := func(args ...string) string {
		return sweepJSON(t, exitPass, append([]string{"-scenario", "kleppmann-gc-pause"}, args...)...)
	}
	one, two := sweep("-seeds", "1..6", "-shard", "1/2"), sweep("-seeds", "1..6", "-shard", "2/2")
	a, b := write("a.jsonl", one), write("b.jsonl", two)
	lines := strings.SplitAfter(strings.TrimSuffix(two, "\n"), "\n")
	cases := []struct {
		name  string
		files []string
		want  string
	}{
		{"missing shard", []string{a}, "shard 2/2 of seeds 1..6 is missing"},
		{"duplicate shard", []string{a, b, a}, "shard 1/2 appears twice: " + a + ":4 and " + a + ":4"},
		{"interrupted shard", []string{a, write("i.jsonl", strings.Replace(two, `"complete":true`, `"complete":false,"stopped":"budget"`, 1))},
			"i.jsonl:4: shard 2/2 of seeds 1..6 did not complete (stopped by budget after 3 runs)"},
		{"lost line", []string{a, write("l.jsonl", lines[0]+lines[2]+lines[3])}, "says 3 runs, but 2 run lines precede it"},
		{"no trailer", []string{a, write("n.jsonl", strings.Join(lines[:3], ""))}, "n.jsonl: the last 3 runs have no trailer line"},
		{"other range", []string{a, write("o.jsonl", sweep("-seeds", "1..8", "-shard", "2/2"))}, "are shards of different sweeps: seeds 1..6 vs 1..8"},
		{"other scenarios", []string{a, write("s.jsonl", strings.ReplaceAll(two, `"kleppmann-gc-pause"`, `"late-release"`))}, "scenario sets differ"},
		{"bad trailer", []string{a, write("t.jsonl", strings.Replace(two, `"shard":2,`, `"shard":3,`, 1))}, "not a valid trailer (shard 3/2"},
		{"not its shard", []string{a, write("w.jsonl", strings.Replace(two, `"seed":1,`, `"seed":9,`, 1))}, "seed 9 is not a run of the shard 2/2"},
		// Seed 3 is shard 2's: a foreign seed, not a nondeterministic one.
		{"another shard's seed", []string{write("e.jsonl", strings.Replace(one, `"seed":2,`, `"seed":3,`, 1)), b},
			"e.jsonl:1: kleppmann-gc-pause seed 3 is not a run of the shard 1/2 of seeds 1..6 its trailer ("},
	}
	for _, c := range cases {
		code, out, errs := simrun(append([]string{"merge"}, c.files...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%s: got exit %d, %q; want exit 2 and %q", c.name, code, errs, c.want)
		}
		code, out, _ = simrun(append([]string{"merge", "-partial"}, c.files...)...)
		if code != exitPass || !strings.Contains(out, "PARTIAL: ") || !strings.Contains(out, c.want) {
			t.Errorf("%s with -partial: got exit %d\n%s", c.name, code, out)
		}
	}

	// A real budget leaves its shard incomplete: a billion seeds in 200 ms.
	code, out, _ := simrun("sweep", "-json", "-progress", "none", "-scenario", "kleppmann-gc-pause", "-seeds", "1..1000000000", "-budget", "200ms")
	if code != exitPass || !strings.Contains(out, `"complete":false,"stopped":"budget"`) {
		t.Fatalf("a budget-stopped sweep: exit %d, trailer %q", code, out[strings.LastIndex(out, "\n{"):])
	}
	if code, _, errs := simrun("merge", write("budget.jsonl", out)); code != exitUsage || !strings.Contains(errs, "did not complete (stopped by budget") {
		t.Fatalf("merging it: exit %d %q", code, errs)
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSweepHugeRangeWithBudget is the acceptance check of a streamed sweep:
// a billion seeds with a small budget runs, stops and summarizes (it used
// to list every job first and be killed for lack of memory).
func TestSweepHugeRangeWithBudget(t *testing.T) {
	code, out, errs := simrun("sweep", "-scenario", "kleppmann-gc-pause", "-seeds", "1..1000000000", "-budget", "500ms", "-progress", "none")
	if code != exitPass || !strings.Contains(out, "kleppmann-gc-pause") || !strings.Contains(out, "budget spent: ") ||
		!strings.Contains(errs, "1000000000 runs") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestSweepWithNothingFinishedIsNotAPass: a budget too short to finish a
// single run checked nothing, so the sweep exits 5 (unknown), not 0: a CI
// gate with a mis-set budget must not pass.
func TestSweepWithNothingFinishedIsNotAPass(t *testing.T) {
	code, out, errs := simrun("sweep", "-scenario", "swarm", "-seeds", "1..1000", "-budget", "1ns", "-progress", "none")
	if code != exitUnknown || !strings.Contains(out, "no run finished: nothing was checked") {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitUnknown, out, errs)
	}
}

// TestSweepAllInterleavesScenarios: a sweep of every scenario runs them
// seed-major, so a budget that stops it early has run each of them (it
// used to run the first scenario over the whole range, and only that).
func TestSweepAllInterleavesScenarios(t *testing.T) {
	code, out, errs := simrun("sweep", "-all", "-seeds", "1..1000000", "-budget", "1s", "-workers", "1", "-json", "-progress", "none")
	if code != exitPass || !strings.Contains(errs, "budget spent") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	specs := scenarios.Builtin()
	runs := 0
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var j runJSON
		if json.Unmarshal([]byte(l), &j) != nil || j.Scenario == "" {
			continue // not a run line
		}
		if want := specs[i%len(specs)].Name; j.Scenario != want || j.Seed != uint64(1+i/len(specs)) {
			t.Fatalf("line %d: %s seed %d, want %s seed %d", i, j.Scenario, j.Seed, want, 1+i/len(specs))
		}
		runs++
	}
	if runs == 0 {
		t.Fatalf("no run finished within the budget:\n%s", errs)
	}
}

// TestSweepStopsOnSIGINT: SIGINT stops a sweep of a billion seeds once runs
// are under way: the runs in flight are dropped, the summary covers what
// finished, and the exit code is 130. The bound on the wait only keeps a
// broken build from hanging the test.
func TestSweepStopsOnSIGINT(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "sweep", "-scenario", "kleppmann-gc-pause", "-seeds", "1..1000000000", "-json", "-progress", "none")
	cmd.Env = append(os.Environ(), "SIMRUN_AS_MAIN=1")
	cmd.Dir = t.TempDir()
	var summary strings.Builder
	cmd.Stderr = &summary
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan() // the first run's line: the sweep is under way
		cmd.Process.Signal(os.Interrupt)
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the sweep did not stop on SIGINT\n%s", summary.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted ||
		!strings.Contains(summary.String(), "interrupted: ") || !strings.Contains(summary.String(), "\nkleppmann-gc-pause ") {
		t.Fatalf("got %v, want exit %d and a summary:\n%s", err, exitInterrupted, summary.String())
	}
}

// TestWorseIsGenericOverVerdictKinds: the exit code of a sweep or a merge
// follows the verdict kinds that missed, whatever they are: a violation (or
// a canary that passed) is 1 and dominates, otherwise the highest code of
// the kinds, and a kind this build does not know counts as unknown.
func TestWorseIsGenericOverVerdictKinds(t *testing.T) {
	pass := scenarios.Expectation{Verdict: "pass"}
	canary := scenarios.Expectation{Verdict: "violation", Property: "S3"}
	cases := []struct {
		expect scenarios.Expectation
		kinds  []string // one run each, none met unless "pass" under pass
		want   int
	}{
		{pass, []string{"pass", "pass"}, exitPass},
		{pass, []string{"liveness"}, exitLiveness},
		{pass, []string{"liveness", "unknown"}, exitUnknown},
		{pass, []string{"unknown", "violation", "liveness"}, exitViolation},
		{pass, []string{"some-future-kind"}, exitUnknown},
		{pass, []string{"error", "violation"}, exitUsage},
		{canary, []string{"pass"}, exitViolation},
		{canary, []string{"liveness"}, exitLiveness},
	}
	for _, c := range cases {
		s := &scenarios.Summary{Expect: c.expect}
		for _, k := range c.kinds {
			s.AddVerdict(k, "", c.expect.Verdict == k, 0, 0, 0)
		}
		if got := worse(exitPass, s); got != c.want {
			t.Errorf("expect %s, kinds %v: exit %d, want %d", c.expect, c.kinds, got, c.want)
		}
	}
	// Across scenarios a violation wins whatever came first.
	s1 := &scenarios.Summary{Expect: pass}
	s1.AddVerdict("violation", "S3", false, 0, 0, 0)
	if got := worse(exitLiveness, s1); got != exitViolation {
		t.Errorf("liveness then violation: exit %d", got)
	}
}
