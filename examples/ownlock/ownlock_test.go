package ownlock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fencesim/fencesim/detlint"
	"github.com/fencesim/fencesim/examples/ownlock"
	"github.com/fencesim/fencesim/scenarios"
)

// TestMain registers the design once, before any scenario names it.
func TestMain(m *testing.M) {
	if err := scenarios.RegisterDesign(ownlock.Design{}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestDeterministic holds the design to the simulator's determinism
// contract: no goroutines, channels, locks, wall clock, global randomness
// or unsorted map ranges in its code (its tests are not judged). A design
// that breaks it would make a seed's failure unreplayable. The same check
// runs as go vet -vettool=$(which detlint) ./examples/ownlock (cmd/detlint).
func TestDeterministic(t *testing.T) { detlint.Check(t) }

// load parses a scenario file of testdata/.
func load(t *testing.T, name string) scenarios.Spec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// check runs spec on seeds 1..n and requires its expectation on each.
func check(t *testing.T, spec scenarios.Spec, n uint64) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		res, err := scenarios.Run(spec, seed, scenarios.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Met(spec) {
			t.Fatalf("%s seed %d: got %s %v, want %s", spec.Name, seed, res.Verdict.Kind, res.Verdict.Violations, spec.Expect)
		}
	}
}

// The design's own scenario: contention, a pause past the lease, a wall
// jump on the server. It passes.
func TestContention(t *testing.T) { check(t, load(t, "ownlock-contention.json"), 100) }

// A built-in scenario with the design swapped in: Kleppmann's pause. The
// tokens grow with every grant, so the fenced store rejects the paused
// holder's stale write.
func TestKleppmannPause(t *testing.T) {
	spec, _ := scenarios.Lookup("kleppmann-gc-pause")
	spec.Design, spec.Replicas = "ownlock", 0
	check(t, spec, 100)
}

// The example's deliberate flaw: its state is in memory, so a server crash
// makes it issue token 1 twice. The harness catches it on every seed as
// just that: token 1 issued twice (S1), to A and then to B.
func TestServerCrashIsCaught(t *testing.T) { check(t, load(t, "ownlock-server-crash.json"), 100) }
