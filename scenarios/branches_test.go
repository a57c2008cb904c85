package scenarios

import (
	"slices"
	"testing"

	"github.com/fencesim/fencesim/coverage/branches"
)

// TestBranchesAreAFunctionOfThePlan: one plan run twice reaches the same
// coverage features (block and hit-count bucket). Runs only in a test
// binary built with coverage (go test -cover -covermode=atomic
// -coverpkg=github.com/fencesim/fencesim/lockservice/... ./scenarios -run
// Branches; the CI script runs it so).
func TestBranchesAreAFunctionOfThePlan(t *testing.T) {
	if err := branches.Available(); err != nil {
		t.Skip(err)
	}
	spec, _ := Lookup("swarm")
	for seed := uint64(1); seed <= 6; seed++ {
		a, err := Run(spec, seed, RunOptions{Branches: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(spec, seed, RunOptions{Branches: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Branches) == 0 {
			t.Fatalf("seed %d: no feature read", seed)
		}
		if !slices.Equal(a.Branches, b.Branches) {
			var onlyA, onlyB []branches.Feature
			for _, f := range a.Branches {
				if _, ok := slices.BinarySearch(b.Branches, f); !ok {
					onlyA = append(onlyA, f)
				}
			}
			for _, f := range b.Branches {
				if _, ok := slices.BinarySearch(a.Branches, f); !ok {
					onlyB = append(onlyB, f)
				}
			}
			t.Errorf("seed %d: %d features, then %d; only first: %v; only second: %v", seed, len(a.Branches), len(b.Branches), onlyA, onlyB)
		}
	}
}
