package detlint

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencesim/fencesim/detlint"
)

// simPackages are the directories, relative to the module root, that must
// be deterministic. Each is checked recursively, so subpackages such as
// lockservice/raft are covered as soon as they appear. process is the
// contract every process is written against: it runs inside the loop in the
// simulator, so it must be deterministic too (realclock, its real-time
// implementation, must not be, and is not listed). scenarios/workload is
// the client workload, run inside the loop over the lock client. admission
// holds the concurrency-limit algorithms, which the simulator runs on
// virtual time as well as the HTTP API for real. coverage counts the
// protocol corners a run hits, from inside the loop. history is the
// clients' recorder, called from inside the loop (and, under a lock, by
// the live runner). scenario/cycle is the workload's decisions, which
// scenarios/workload runs inside the loop (and the live runner outside).
var simPackages = []string{"sim", "fakeclock", "lockservice", "nemesis", "process", "scenarios/workload", "scenario/cycle", "admission", "coverage", "history"}

// loopDirs are the directories whose files run inside the event loop, or
// prepare or replay it, all but a few: package scenarios (the runner, the
// recorder, the observers that wrap it, pick, stop, …) and package
// scenario (the plan drawn from a seed, the swarm's draws, the replay
// file).
var loopDirs = []string{"scenarios", "scenario"}

// scenariosExempt are the files of loopDirs (paths relative to the module)
// that run outside the event loop and need what the loop forbids; every
// other non-test file of loopDirs is linted.
// A new file is linted unless it is added here, with the reason, in review.
// An exemption that is no longer needed fails the gate, so the list only
// shrinks.
var scenariosExempt = map[string]string{
	"scenarios/sweep.go":    "the sweep runs whole simulations on a pool of worker goroutines (channels, select, WaitGroup, a wall-clock deadline); each run inside is single-threaded",
	"scenarios/hunt.go":     "measures a hunt's wall time across a sweep, for the report; no run reads it",
	"scenario/registry.go":  "the design registry is a RWMutex-guarded map, read by concurrent sweep workers before their runs start",
	"scenarios/branches.go": "one mutex that lets one run at a time own the process's coverage counters (RunOptions.Branches), taken before a run's world is built and released after its loop; nothing inside a run reads it",
	"scenarios/wall.go":     "the stopwatch: Result.Wall and CheckWall, measured around the loop for the report, never read by it",
}

// recursive turns directories into go-style patterns for them and
// everything below.
func recursive(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, d+"/...")
	}
	return out
}

// simPaths are the simulation packages plus the in-loop files of scenarios
// under root, and what is wrong with the exemptions: an exempt file that no
// longer exists or no longer needs its exemption.
func simPaths(root string) (paths, stale []string, err error) {
	seen := map[string]bool{}
	paths = recursive(simPackages)
	for _, dir := range loopDirs {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			name := dir + "/" + filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			seen[name] = true
			if _, ok := scenariosExempt[name]; !ok {
				paths = append(paths, name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(scenariosExempt)) {
		if !seen[name] {
			stale = append(stale, fmt.Sprintf("scenariosExempt lists %s, which does not exist: remove it", name))
		} else if len(detlint.Lint(root, name).Findings) == 0 {
			stale = append(stale, fmt.Sprintf("scenariosExempt lists %s, which has no finding: remove the exemption", name))
		}
	}
	return paths, stale, nil
}

// TestSimulationPackagesAreDeterministic is the actual gate: it parses every
// non-test Go file of the simulation packages and of the in-loop files of
// scenarios, and fails on any finding.
func TestSimulationPackagesAreDeterministic(t *testing.T) {
	root := moduleRoot(t)
	paths, stale, err := simPaths(root)
	require.NoError(t, err)
	for _, e := range stale {
		t.Error(e)
	}
	require.Contains(t, paths, "scenarios/recorder.go", "the recorder runs in the loop")
	res := detlint.Lint(root, paths...)
	for _, d := range res.Missing {
		t.Logf("skipping %s: does not exist (yet)", d)
	}
	for _, err := range res.Errs {
		t.Errorf("%v", err)
	}
	if len(res.Paths) == 0 {
		t.Fatalf("none of %v exists under module root %s; detlint would check nothing", paths, root)
	}
	if res.Files == 0 {
		t.Fatalf("no non-test .go file found under %v in %s; detlint would check nothing", res.Paths, root)
	}
	for _, f := range res.Findings {
		t.Errorf("%s", f)
	}
	t.Logf("checked %d files in %v", res.Files, res.Paths)
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod found above the working directory")
		}
		dir = parent
	}
}

// TestLintTreeCanary proves that the gate can fail: a tree with forbidden
// code in a listed directory, a subpackage and an in-loop file of scenarios
// yields findings, while test files, testdata, unlisted directories and
// exempt files of scenarios are ignored, and stale exemptions are named.
func TestLintTreeCanary(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	write("go.mod", "module example.com/canary\n")
	write("sim/bad.go", "package sim\n\nfunc f() {\n\tgo f()\n}\n")
	write("sim/ok.go", "package sim\n\nfunc g() []int { return nil }\n")
	write("sim/bad_test.go", "package sim\n\nfunc h() { go h() }\n")
	write("sim/testdata/bad.go", "package x\n\nfunc h() { go h() }\n")
	write("lockservice/raft/raft.go", "package raft\n\nimport \"time\"\n\nvar t0 = time.Now()\n")
	write("cmd/tool/main.go", "package main\n\nfunc main() { go main() }\n")
	write("scenarios/recorder.go", "package scenarios\n\nimport \"time\"\n\nvar t0 = time.Now()\n")
	write("scenarios/sweep.go", "package scenarios\n\nfunc sweep() { go sweep() }\n")
	write("scenarios/hunt.go", "package scenarios\n\ntype Spec struct{}\n")
	write("scenarios/runner_test.go", "package scenarios\n\nfunc h() { go h() }\n")

	paths, stale, err := simPaths(root)
	require.NoError(t, err)
	require.Equal(t, []string{
		"scenariosExempt lists scenario/registry.go, which does not exist: remove it",
		"scenariosExempt lists scenarios/branches.go, which does not exist: remove it",
		"scenariosExempt lists scenarios/hunt.go, which has no finding: remove the exemption",
		"scenariosExempt lists scenarios/wall.go, which does not exist: remove it",
	}, stale)
	res := detlint.Lint(root, paths...)
	require.Empty(t, res.Errs)
	require.Equal(t, []string{"sim/...", "lockservice/...", "scenarios/recorder.go"}, res.Paths)
	require.Equal(t, []string{"fakeclock/...", "nemesis/...", "process/...", "scenarios/workload/...", "scenario/cycle/...", "admission/...", "coverage/...", "history/..."}, res.Missing)
	require.Equal(t, 4, res.Files)
	var got []string
	for _, f := range res.Findings {
		got = append(got, fmt.Sprintf("%s:%d %s", filepath.ToSlash(f.Pos.Filename), f.Pos.Line, f.Rule))
	}
	require.Equal(t, []string{
		"sim/bad.go:4 " + detlint.RuleGoStmt,
		"lockservice/raft/raft.go:5 " + detlint.RuleWallClock,
		"scenarios/recorder.go:5 " + detlint.RuleWallClock,
	}, got)
	require.True(t, strings.HasPrefix(res.Findings[0].String(), filepath.Join("sim", "bad.go")+":4:"),
		"finding %q does not start with file:line:", res.Findings[0])

	// A tree where no listed directory exists, or none holds a Go file,
	// must be noticed by the gate.
	empty := t.TempDir()
	res = detlint.Lint(empty, recursive(simPackages)...)
	require.Empty(t, res.Paths)
	require.Zero(t, res.Files)
	require.NoError(t, os.MkdirAll(filepath.Join(empty, "nemesis"), 0o755))
	res = detlint.Lint(empty, recursive(simPackages)...)
	require.Len(t, res.Paths, 1)
	require.Zero(t, res.Files, "tree without Go files")

	// A file that does not parse is an error, not silently skipped.
	write("nemesis/broken.go", "package nemesis\n\nfunc {\n")
	require.NotEmpty(t, detlint.Lint(root, recursive(simPackages)...).Errs, "unparsable file produced no error")
}
