package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/examples/ownlock"
	"github.com/fencesim/fencesim/simrun"
)

// ownlockSimrun runs the command in-process, in a scratch directory (runs
// that fail write replay files under ./failures), and returns its exit code
// and output.
func ownlockSimrun(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errs strings.Builder
	code := simrun.Run(args, &out, &errs, ownlock.Design{})
	return code, out.String() + errs.String()
}

// spec is the absolute path of one of the example's scenario files.
func spec(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunAndSweepTheExamplesScenario: run -spec and sweep -spec of a
// scenario naming "design": "ownlock" work in a program that registered it.
func TestRunAndSweepTheExamplesScenario(t *testing.T) {
	contention := spec(t, "ownlock-contention.json")
	t.Chdir(t.TempDir())
	if code, out := ownlockSimrun(t, "run", "-spec", contention, "-seed", "7"); code != 0 || !strings.Contains(out, "scenario=ownlock-contention seed=7") {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	code, out := ownlockSimrun(t, "sweep", "-spec", contention, "-seeds", "1..20", "-json", "-progress", "none")
	if code != 0 {
		t.Fatalf("sweep: exit %d\n%s", code, out)
	}
	runs := 0
	for _, l := range strings.Split(out, "\n") {
		var j struct {
			Scenario, Verdict string
			Met               bool
		}
		if json.Unmarshal([]byte(l), &j) == nil && j.Scenario != "" {
			if j.Scenario != "ownlock-contention" || !j.Met {
				t.Fatalf("sweep line %s", l)
			}
			runs++
		}
	}
	if runs != 20 {
		t.Fatalf("sweep: %d runs, want 20\n%s", runs, out)
	}
}

// TestHuntFindsTheServerCrashBug: hunt without -mutant sweeps the example
// as it is until its first failure — the in-memory server issuing token 1
// twice after a crash (S1) — and prints seeds tried, wall time, the repro
// line (this program, -spec) and the replay file, which replays to the
// same hash and verdict.
func TestHuntFindsTheServerCrashBug(t *testing.T) {
	crash := spec(t, "ownlock-server-crash.json")
	t.Chdir(t.TempDir())
	code, out := ownlockSimrun(t, "hunt", "-spec", crash, "-seeds", "1..50", "-json")
	var h struct {
		Scenario, Property, Repro, Replay string
		Detected                          bool
		Seed                              uint64
		SeedsTried                        int     `json:"seeds_tried"`
		Wall                              float64 `json:"wall_seconds"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		t.Fatalf("hunt: exit %d\n%s", code, out)
	}
	if !h.Detected || h.Property != "S1" || h.Seed != 1 || h.SeedsTried != 1 || h.Wall <= 0 ||
		!strings.Contains(h.Repro, " run -spec "+crash+" -seed 1") || h.Replay == "" {
		t.Fatalf("hunt: %+v", h)
	}
	code, out = ownlockSimrun(t, "replay", h.Replay)
	if code != 1 || !strings.Contains(out, "reproduced: trace hash") || !strings.Contains(out, "violation S1") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	// Its repro line names this program: the stock simrun lacks the design.
	if strings.Contains(out, "./cmd/simrun") || !strings.Contains(out, " replay "+h.Replay) {
		t.Fatalf("replay names another program to rerun it:\n%s", out)
	}
	// The shrunk run still issues token 1 twice.
	if code, out := ownlockSimrun(t, "shrink", "-o", "shrunk.json", h.Replay); code != 1 || !strings.Contains(out, "property S1 still fails") {
		t.Fatalf("shrink: exit %d\n%s", code, out)
	}
	if _, err := os.Stat("shrunk.json"); err != nil {
		t.Fatal(err)
	}
}

// TestHuntWithoutAFailure: the contention scenario passes on every seed,
// so the hunt reports the bug unnoticed and exits 1, as a missed mutant.
func TestHuntWithoutAFailure(t *testing.T) {
	contention := spec(t, "ownlock-contention.json")
	t.Chdir(t.TempDir())
	code, out := ownlockSimrun(t, "hunt", "-spec", contention, "-seeds", "1..10")
	if code != 1 || !strings.Contains(out, "hunt ownlock-contention: no failure in seeds 1..10 (10 seeds") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestBuiltinScenarioOnTheDesign: -design runs a built-in scenario on the
// example's lock (one server, so the scenario's replica count is dropped):
// Kleppmann's pause passes, since the store fences the paused holder out;
// a scenario aiming at a role the design lacks is a usage error.
func TestBuiltinScenarioOnTheDesign(t *testing.T) {
	t.Chdir(t.TempDir())
	if code, out := ownlockSimrun(t, "sweep", "-scenario", "kleppmann-gc-pause", "-design", "ownlock", "-seeds", "1..20", "-progress", "none"); code != 0 ||
		!strings.Contains(out, "kleppmann-gc-pause  pass    20     20") {
		t.Fatalf("sweep: exit %d\n%s", code, out)
	}
	if code, out := ownlockSimrun(t, "run", "-scenario", "partitioned-leader", "-design", "ownlock"); code != 2 || !strings.Contains(out, "elects no leader") {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
}
