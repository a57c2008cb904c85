package scenarios

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
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

// TestGroupCommitWindowGathersBatches: with group commit and a window,
// the replicas' batches gather the events of several instants (the
// window's mark), more batches hold several events than when each
// instant ends its batch, and the run stays safe; without a window no
// window ends.
func TestGroupCommitWindowGathersBatches(t *testing.T) {
	spec, ok := Lookup("kleppmann-gc-pause")
	if !ok {
		t.Fatal("no kleppmann-gc-pause scenario")
	}
	spec.GroupCommit = true
	run := func(window time.Duration) Result {
		s := spec
		s.GroupCommitWindow = Duration(window)
		res, err := Run(s, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Met(s) {
			t.Fatalf("window %v: verdict %v, want %v", window, res.Verdict.Kind, s.Expect.Verdict)
		}
		return res
	}
	plain, windowed := run(0), run(5*time.Millisecond)
	if n := plain.Marks.Get(coverage.ReplicaGroupCommitWindow); n != 0 {
		t.Errorf("no window: %d windows ended", n)
	}
	if n := windowed.Marks.Get(coverage.ReplicaGroupCommitWindow); n == 0 {
		t.Error("a 5ms window gathered no batch")
	}
	if p, w := plain.Marks.Get(coverage.ReplicaGroupCommit), windowed.Marks.Get(coverage.ReplicaGroupCommit); w <= p {
		t.Errorf("batches of several events: %d with a 5ms window, %d without; want more", w, p)
	}
}
