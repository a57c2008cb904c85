package reference

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// TestLeaderSyncOverlapsFollowers: a leader sends its appends before it
// syncs them, so its sync and its followers' run at once (the Raft
// thesis, 10.2.1): on disks whose every sync takes 30 ms an acquire is
// granted about one sync after it reaches the leader, not two (the old
// order, the leader's sync then its followers', takes 64–69 ms here).
// That the leader counts itself only once synced is the Raft core's
// (raft's TestLeaderCountsItselfWhenPersisted); acks and votes still wait for their sync (S9 and the
// send-before-sync mutant cover that).
func TestLeaderSyncOverlapsFollowers(t *testing.T) {
	const syncDelay = 30 * time.Millisecond
	w, peers, _, _ := newReplicaTrio(1)
	var latencies []time.Duration
	var called time.Duration
	obs := observerFunc(func(e lockservice.Event) {
		if e.Op != lockservice.OpAcquire {
			return
		}
		switch {
		case e.Kind == lockservice.EvCall:
			called = w.Now()
		case e.Kind == lockservice.EvReturn && e.Status == lockservice.Granted:
			latencies = append(latencies, w.Now()-called)
		}
	})
	cfg := workload.DefaultConfig("a", peers, peers[0], "r")
	cfg.Cycles, cfg.WritesPerHold, cfg.StartDelay, cfg.Observer = 5, 0, time.Second, obs
	w.AddNode(cfg.Name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{})
	// Slow disks once a leader is elected, so that the election is quick.
	w.At(500*time.Millisecond, "slow disks", func() {
		for _, id := range peers {
			w.SetSyncDelay(id, syncDelay)
		}
	})
	w.Run(5*time.Second, 1_000_000)
	if len(latencies) < 3 {
		t.Fatalf("only %d acquires granted", len(latencies))
	}
	for i, l := range latencies {
		if l < syncDelay || l >= 2*syncDelay {
			t.Errorf("acquire %d granted %v after its call; want one sync (%v) and the network's latency, under two syncs", i, l, syncDelay)
		}
	}
}
