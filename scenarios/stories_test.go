package scenarios

import (
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// The scenario tests below check that each scenario plays out the story it
// names on many seeds, not merely that it passes: a scenario whose faults
// miss their moment would pass vacuously.

// TestClockDriftBeyondBoundStory: the slow-clock client believes in its
// lease while another holds it (belief overlap), and the store fences its
// stale writes out.
func TestClockDriftBeyondBoundStory(t *testing.T) {
	spec, _ := Lookup("clock-drift-beyond-bound")
	overlapped, fenced := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		res := mustRun(t, spec, seed)
		if res.Verdict.Metrics.BeliefOverlap.Windows > 0 {
			overlapped++
		}
		for _, a := range res.History.Applies {
			if a.Client == "a" && !a.Accepted {
				fenced++
				break
			}
		}
	}
	if overlapped < 30 || fenced < 30 {
		t.Fatalf("over 40 seeds: %d with belief overlap, %d with a's stale write fenced out; want ≥ 30 each", overlapped, fenced)
	}
}

// TestOverloadBurstStory: the burst is shed as overloaded, and every
// client still gets the lock for every one of its cycles.
func TestOverloadBurstStory(t *testing.T) {
	spec, _ := Lookup("overload-burst")
	for seed := uint64(1); seed <= 20; seed++ {
		res := mustRun(t, spec, seed)
		shed, granted := 0, map[string]int{}
		for _, op := range res.History.LockOps {
			switch op.Outcome {
			case checker.LockOverloaded:
				shed++
			case checker.LockGranted:
				granted[op.Client]++
			}
		}
		if shed == 0 {
			t.Fatalf("seed %d: nothing was shed", seed)
		}
		for _, c := range spec.Clients {
			if granted[c.Name] < c.Cycles {
				t.Fatalf("seed %d: client %s was granted %d times, want its %d cycles", seed, c.Name, granted[c.Name], c.Cycles)
			}
		}
	}
}

// TestMessageStormStory: the storm really duplicates and loses messages.
func TestMessageStormStory(t *testing.T) {
	spec, _ := Lookup("message-storm")
	res := mustRun(t, spec, 1)
	if n := res.Stats.Network; n.Duplicated < 100 || n.Dropped < 100 {
		t.Fatalf("network stats %+v: want hundreds duplicated and dropped", n)
	}
}

// TestRestartAllReplicasStory: grants happen after each full restart, with
// tokens above every earlier one (S1 checks the order; this checks that
// there is something after the restarts to order).
func TestRestartAllReplicasStory(t *testing.T) {
	spec, _ := Lookup("restart-all-replicas")
	for seed := uint64(1); seed <= 100; seed++ {
		res := mustRun(t, spec, seed)
		var before, mid, after int
		for _, g := range res.History.Grants {
			switch {
			case g.Start < 900e6:
				before++
			case g.Start > 1100e6 && g.Start < 2200e6:
				mid++
			case g.Start > 2250e6:
				after++
			}
		}
		if before == 0 || mid == 0 || after == 0 {
			t.Fatalf("seed %d: grants before/between/after the restarts: %d/%d/%d, want some in each", seed, before, mid, after)
		}
	}
}

// TestSwarmIsNotVacuous: the swarm draws different fault mixes and they
// actually strike.
func TestSwarmIsNotVacuous(t *testing.T) {
	spec, _ := Lookup("swarm")
	kinds := map[string]bool{}
	for seed := uint64(1); seed <= 30; seed++ {
		res := mustRun(t, spec, seed)
		if res.Plan.Options == nil || len(res.Plan.Schedule) == 0 {
			t.Fatalf("seed %d: no swarm options or faults", seed)
		}
		for _, op := range res.Plan.Schedule {
			kinds[string(op.Kind)] = true
		}
	}
	for _, k := range []string{"pause", "crash", "restart", "heal", "loss", "drift", "slow-disk"} {
		if !kinds[k] {
			t.Errorf("no %s fault in 30 swarm seeds (saw %v)", k, kinds)
		}
	}
}

func mustRun(t *testing.T, spec Spec, seed uint64) Result {
	t.Helper()
	res, err := Run(spec, seed, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Met(spec) {
		t.Fatalf("%s seed %d: got %+v, want %s", spec.Name, seed, res.Verdict, spec.Expect)
	}
	return res
}
