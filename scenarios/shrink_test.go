package scenarios

import (
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// unfencedSwarm is the swarm against a store that ignores tokens: some
// seeds violate S3 with dozens of faults on.
func unfencedSwarm(t *testing.T) Spec {
	t.Helper()
	s, ok := Lookup("swarm")
	if !ok {
		t.Fatal("no swarm scenario")
	}
	s.Name, s.Store.IgnoreTokens, s.Liveness = "unfenced-swarm", true, nil
	s.Expect = Expectation{Verdict: "violation", Property: "S3"}
	return s
}

// failingPlan finds the first seed whose plan violates S3 with many faults.
func failingPlan(t *testing.T, spec Spec) Plan {
	t.Helper()
	for seed := uint64(1); seed <= 200; seed++ {
		p, err := NewPlan(spec, seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Schedule) < 10 {
			continue
		}
		res, err := p.Run(RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict.Kind == checker.VerdictViolation && res.Verdict.Property() == "S3" {
			return p
		}
	}
	t.Fatal("no seed in 1..200 of the unfenced swarm violates S3 with 10+ faults")
	return Plan{}
}

// TestShrinkKeepsThePropertyAndEndsSmall: a swarm failure with many faults
// shrinks to at most 3 fault operations that still violate S3, and the
// shrunk plan replays to the same hash.
func TestShrinkKeepsThePropertyAndEndsSmall(t *testing.T) {
	p := failingPlan(t, unfencedSwarm(t))
	got, err := Shrink(p, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Before.Faults < 10 || got.After.Faults > 3 || got.After.Clients > got.Before.Clients {
		t.Fatalf("before %v, after %v: want ≥ 10 faults shrunk to ≤ 3", got.Before, got.After)
	}
	if got.Property != "S3" || !hasProperty(got.Result.Verdict, "S3") {
		t.Fatalf("the shrunk run gives %+v, want S3", got.Result.Verdict)
	}
	// The replay file of the shrunk run reproduces it exactly.
	r, err := ParseReplay(NewReplay(got.Result).Marshal())
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Plan().Run(RunOptions{})
	if err != nil || again.TraceHash != got.Result.TraceHash || !hasProperty(again.Verdict, "S3") {
		t.Fatalf("replay: %v, hash %016x vs %016x, verdict %+v", err, again.TraceHash, got.Result.TraceHash, again.Verdict)
	}
}

func TestShrinkRefusesAPassingRun(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	p, _ := NewPlan(spec, 1)
	if _, err := Shrink(p, RunOptions{}); err == nil {
		t.Fatal("shrinking a passing run should be an error")
	}
}

func hasProperty(v checker.Verdict, p string) bool {
	for _, x := range v.Violations {
		if x.Property == p {
			return true
		}
	}
	return false
}
