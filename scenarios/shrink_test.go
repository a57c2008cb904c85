package scenarios

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// unfencedSwarm is the swarm against a store that ignores tokens: some
// seeds violate S3 with dozens of faults on. Its clients poll, as the
// swarm's did when these expectations were set: with clients waiting in
// the leader's queue, 5 of the first 10 such failures shrink to ≤ 3
// faults (some need 8–11), against the 4 of 6 asked here.
func unfencedSwarm(t *testing.T) Spec {
	t.Helper()
	s, ok := Lookup("swarm")
	if !ok {
		t.Fatal("no swarm scenario")
	}
	s.Name, s.Store.IgnoreTokens, s.Liveness = "unfenced-swarm", true, nil
	s.Clients = slices.Clone(s.Clients)
	for i := range s.Clients {
		s.Clients[i].Wait = 0
	}
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
		res, err := RunPlan(p, RunOptions{})
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
	again, err := RunPlan(r.Plan(), RunOptions{})
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

// TestShrinkDropsWhatNamesAGoneReplica: shrinking 5 nodes to 3 asks the
// design whether it takes 3 (Redlock does, the single node takes none) and
// drops the faults aimed at the 4th and 5th node, by role or by name;
// dropping a client drops the faults aimed at it by either.
func TestShrinkDropsWhatNamesAGoneReplica(t *testing.T) {
	spec := mustLookup(t, "redlock-clock-jump")
	spec.Faults = append(spec.Faults, nemesis.Op{At: Duration(time.Second), Kind: nemesis.Crash, Node: "n5"},
		nemesis.Op{At: Duration(time.Second), Kind: nemesis.Partition, Group: []string{"@replica:4", "@replica:1"}})
	p, err := NewPlan(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	three, ok := withThreeReplicas(p)
	if !ok || three.Spec.Replicas != 3 {
		t.Fatalf("redlock with 5 nodes did not shrink to 3: %v, %d", ok, three.Spec.Replicas)
	}
	if err := three.Validate(); err != nil {
		t.Fatalf("the shrunk plan does not validate: %v", err)
	}
	var got []string
	for _, op := range three.Schedule {
		got = append(got, op.String())
	}
	want := []string{"block @client:b -> @replica:1", "block @client:b -> @replica:2", "jump @replica:3 by 1h0m0s", "partition [@replica:1] | rest", "heal"}
	if !slices.Equal(got, want) {
		t.Errorf("after 5 → 3: %q, want %q", got, want)
	}
	if _, ok := withThreeReplicas(lookupPlan(t, "lock-server-restart")); ok {
		t.Error("the single node shrank to 3 replicas")
	}
	noA := withoutClient(p, 0)
	for _, op := range noA.Schedule {
		if op.Node == "@client:a" || op.Node == "a" {
			t.Errorf("client a dropped, but %s is left", op)
		}
	}
}

func lookupPlan(t *testing.T, name string) Plan {
	t.Helper()
	p, err := NewPlan(mustLookup(t, name), 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
