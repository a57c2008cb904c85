package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
		var j runJSON
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("stdout line is not JSON: %q", l)
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

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, args ...string) string {
		code, out, errs := simrun(append([]string{"sweep", "-json", "-progress", "none", "-seeds", "1..10"}, args...)...)
		if code != exitPass {
			t.Fatalf("exit %d: %s", code, errs)
		}
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a.jsonl", "-shard", "1/2"), write("b.jsonl", "-shard", "2/2")
	code, out, errs := simrun("merge", a, b, a) // a twice: counted once
	if code != exitPass || !strings.Contains(out, "S3:10") || !strings.Contains(out, fmt.Sprintf("%d runs", 10*len(scenarios.Builtin()))) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}

	// A line that disagrees with another copy of the same run is nondeterminism.
	lines := strings.SplitN(readFile(t, a), "\n", 2)
	var j runJSON
	json.Unmarshal([]byte(lines[0]), &j)
	j.TraceHash = "0000000000000000"
	bad, _ := json.Marshal(j)
	c := dir + "/c.jsonl"
	os.WriteFile(c, append(bad, '\n'), 0o644)
	if code, _, errs := simrun("merge", a, c); code != exitNondeterminism || !strings.Contains(errs, "NONDETERMINISM") {
		t.Fatalf("got exit %d %q, want 4", code, errs)
	}

	// A missed expectation makes the merge fail like the sweep would.
	j.TraceHash, j.Seed, j.Verdict, j.Property, j.Met = "1", 999, "violation", "S2", false
	j.Scenario = "kleppmann-gc-pause"
	miss, _ := json.Marshal(j)
	d := dir + "/d.jsonl"
	os.WriteFile(d, append(miss, '\n'), 0o644)
	if code, out, _ := simrun("merge", a, d); code != exitViolation || !strings.Contains(out, "MISS kleppmann-gc-pause seed 999") {
		t.Fatalf("got exit %d\n%s", code, out)
	}

	for _, bad := range []string{"{\"x\":1}\n", "not json\n"} {
		p := dir + "/bad.jsonl"
		os.WriteFile(p, []byte(bad), 0o644)
		if code, _, errs := simrun("merge", p); code != exitUsage || !strings.Contains(errs, "bad.jsonl:1") {
			t.Errorf("%q: got exit %d %q", bad, code, errs)
		}
	}
	if code, _, _ := simrun("merge"); code != exitUsage {
		t.Errorf("merge without files: exit %d", code)
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
