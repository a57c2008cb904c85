package scenarios

import "testing"

// TestSwarmSeedsThatFoundBugs reruns the swarm seeds that once failed on
// the reference, each with what it found. A seed's run changes with the
// program version, so each keeps its story only as long as the swarm
// draws it the same; the unit tests named are what hold the fix.
func TestSwarmSeedsThatFoundBugs(t *testing.T) {
	found := []struct {
		seed uint64
		bug  string
	}{
		// fencesim-0.20: a replica paused on a slow disk won an election,
		// proposed two acquires and stepped down, all within one batch of
		// events; group commit flushes once a batch, so it never saw
		// itself lead, and the two proposals stayed counted against its
		// ingress bound (2 in this seed) for good: leading again, it shed
		// every request (liveness). Replica.leadership drops them now.
		{61228, "in-flight count leaked by a lead won and lost within one batch"},
	}
	swarm, ok := Lookup("swarm")
	if !ok {
		t.Fatal("no built-in swarm scenario")
	}
	for _, f := range found {
		res, err := Run(swarm, f.seed, RunOptions{})
		if err != nil {
			t.Fatalf("swarm seed %d: %v", f.seed, err)
		}
		if !res.Met(swarm) {
			t.Errorf("swarm seed %d (%s): verdict %v", f.seed, f.bug, res.Verdict)
		}
	}
}
