package scenarios

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
)

// TestStoreSyncDelaySlowsEveryAcceptedWrite: with a store sync delay, the
// store answers an accepted write only once its sync ended, so no
// accepted write returns sooner than the delay after its call; with the
// default fast disk some do. (The knob reaches the simulated disk, and a
// reply waits for its sync.)
func TestStoreSyncDelaySlowsEveryAcceptedWrite(t *testing.T) {
	spec, ok := Lookup("kleppmann-gc-pause")
	if !ok {
		t.Fatal("no kleppmann-gc-pause scenario")
	}
	const delay = 15 * time.Millisecond
	fastest := func(s Spec) (time.Duration, int) {
		res, err := Run(s, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		least, n := time.Duration(1<<62), 0
		for _, op := range res.History.Ops {
			if op.Kind == checker.OpWrite && op.Outcome == checker.OutcomeAccepted {
				least, n = min(least, op.Return-op.Call), n+1
			}
		}
		return least, n
	}
	if least, n := fastest(spec); n == 0 || least >= delay {
		t.Fatalf("fast disk: %d accepted writes, the fastest in %v; want some faster than %v", n, least, delay)
	}
	slow := spec
	slow.StoreSyncDelay = Duration(delay)
	if least, n := fastest(slow); n == 0 || least < delay {
		t.Fatalf("store sync delay %v: %d accepted writes, the fastest in %v", delay, n, least)
	}
}
