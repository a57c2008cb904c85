package scenarios

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// guidedTrail runs a guided search and returns, per run, where it came
// from and what it did, and the corpus at the end.
func guidedTrail(t *testing.T, runs, workers int) ([]string, []int, []GuidedRun) {
	t.Helper()
	spec, _ := Lookup("swarm")
	var trail []string
	var kept []GuidedRun
	st, err := Guided(context.Background(), spec, GuidedOptions{Root: 1, Runs: runs, Workers: workers}, func(gr GuidedRun) bool {
		if gr.Err != nil {
			t.Fatalf("run %d (%s): %v", gr.Index, gr.Origin, gr.Err)
		}
		if !gr.Result.Met(spec) {
			t.Errorf("run %d (%s): a false alarm on the reference: %s %s", gr.Index, gr.Origin, gr.Result.Verdict.Kind, gr.Result.Verdict.Property())
		}
		trail = append(trail, fmt.Sprintf("%d %s %d %016x %v", gr.Index, gr.Origin, gr.Parent, gr.Result.TraceHash, gr.Admitted))
		gr.Result.History = checker.History{}
		kept = append(kept, gr)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != runs {
		t.Fatalf("%d runs, want %d", st.Runs, runs)
	}
	var corpus []int
	for _, e := range st.Corpus {
		corpus = append(corpus, e.Index)
	}
	return trail, corpus, kept
}

// TestGuidedIsWorkerCountIndependent: the same root seed gives the same
// runs, in the same order, and the same corpus with one worker or two;
// the search mutates (not only fresh seeds) and its corpus grows.
func TestGuidedIsWorkerCountIndependent(t *testing.T) {
	t1, c1, runs := guidedTrail(t, 32, 1)
	t2, c2, _ := guidedTrail(t, 32, 2)
	if fmt.Sprint(t1) != fmt.Sprint(t2) || fmt.Sprint(c1) != fmt.Sprint(c2) {
		t.Fatalf("1 worker:\n%v\ncorpus %v\n2 workers:\n%v\ncorpus %v", t1, c1, t2, c2)
	}
	mutated := 0
	for _, r := range runs {
		if r.Origin != "fresh" {
			mutated++
		}
	}
	if mutated < 16 || len(c1) < 3 {
		t.Fatalf("%d mutated runs of 32, corpus %v", mutated, c1)
	}
}

// TestGuidedRunReplays: a mutated run is a plan like any other: its replay
// file parses and runs to the same trace hash and verdict.
func TestGuidedRunReplays(t *testing.T) {
	spec, _ := Lookup("swarm")
	var got *Result
	_, err := Guided(context.Background(), spec, GuidedOptions{Root: 7, Runs: 16, Workers: 2}, func(gr GuidedRun) bool {
		if gr.Origin != "fresh" && gr.Err == nil {
			r := gr.Result
			got = &r
			return false
		}
		return true
	})
	if err != nil || got == nil {
		t.Fatalf("no mutated run: %v", err)
	}
	rp, err := ParseReplay(NewReplay(*got).Marshal())
	if err != nil {
		t.Fatal(err)
	}
	again, err := RunPlan(rp.Plan(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.TraceHash != got.TraceHash || again.Verdict.Kind != got.Verdict.Kind {
		t.Fatalf("replay: hash %016x verdict %s, recorded %016x %s", again.TraceHash, again.Verdict.Kind, got.TraceHash, got.Verdict.Kind)
	}
}

// TestGuidedNeedsASwarm: a scripted scenario's faults are its story.
func TestGuidedNeedsASwarm(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	if _, err := Guided(context.Background(), spec, GuidedOptions{Runs: 1}, func(GuidedRun) bool { return true }); !errors.Is(err, ErrNotSwarm) {
		t.Fatalf("got %v", err)
	}
}

// TestHuntGuidedCatchesAPlantedBug: the canary — a guided hunt of a
// planted bug must find it.
func TestHuntGuidedCatchesAPlantedBug(t *testing.T) {
	spec, _ := Lookup("swarm")
	h, err := HuntGuided(context.Background(), spec.WithMutant("store-no-fence"), 1, 50, 2)
	if err != nil || !h.Detected || h.Property != "S3" || h.SeedsTried > 50 || h.Result.Plan.Spec.Mutant != "store-no-fence" {
		t.Fatalf("%v: %+v", err, h)
	}
}
