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

// failingPlans finds the first n seeds whose plans violate S3 with many
// faults.
func failingPlans(t *testing.T, spec Spec, n int) []Plan {
	t.Helper()
	var out []Plan
	for seed := uint64(1); seed <= 200 && len(out) < n; seed++ {
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
			out = append(out, p)
		}
	}
	if len(out) < n {
		t.Fatalf("only %d seeds in 1..200 of the unfenced swarm violate S3 with 10+ faults, want %d", len(out), n)
	}
	return out
}

// TestShrinkKeepsThePropertyAndEndsSmall: swarm failures with many faults
// shrink, most of them to at most 3 fault operations, every one still
// violating S3, and a shrunk plan replays to the same hash. (Not every
// one: faults aimed at "@leader" depend on one another — drop one and
// the next lands on another replica — so a failure can need several.)
func TestShrinkKeepsThePropertyAndEndsSmall(t *testing.T) {
	small := 0
	var got Shrunk
	for _, p := range failingPlans(t, unfencedSwarm(t), 6) {
		r, err := Shrink(p, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Before.Faults < 10 || r.After.Faults >= r.Before.Faults || r.After.Clients > r.Before.Clients {
			t.Fatalf("seed %d: before %v, after %v: want ≥ 10 faults shrunk", p.Seed, r.Before, r.After)
		}
		if r.Property != "S3" || !hasProperty(r.Result.Verdict, "S3") {
			t.Fatalf("seed %d: the shrunk run gives %+v, want S3", p.Seed, r.Result.Verdict)
		}
		if r.After.Faults <= 3 {
			small++
			got = r
		}
	}
	if small < 4 {
		t.Fatalf("%d of 6 failures shrank to ≤ 3 faults, want at least 4", small)
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
