package reference

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// TestReplicaRestartsAfterTornLogWrite: a replica whose last log write was
// torn by a crash restarts, drops the torn tail, and the group goes on
// granting with growing tokens.
func TestReplicaRestartsAfterTornLogWrite(t *testing.T) {
	for _, keep := range []float64{0, 0.5, 0.95} {
		w, _ := sim.New(sim.Config{Seed: 3, Network: sim.DefaultNetwork()})
		peers := []sim.NodeID{0, 1, 2}
		var grants []uint64
		obs := observerFunc(func(e lockservice.Event) {
			if e.Kind == lockservice.EvGranted && !slices.Contains(grants, e.Token) {
				grants = append(grants, e.Token)
			}
		})
		marks := &coverage.Counts{}
		for i := range peers {
			cfg := DefaultReplicaConfig(peers)
			cfg.Observer, cfg.Marks = obs, marks
			w.AddNode([]string{"n1", "n2", "n3"}[i], func() sim.Process { return NewReplica(cfg) }, fakeclock.Config{})
		}
		// Make every sync slow so that crashes land between a log write
		// and its sync.
		for _, id := range peers {
			w.SetSyncDelay(id, 2*time.Millisecond)
		}
		for i := range 6 {
			// No store: the clients only acquire and release (their reads
			// go unanswered and time out).
			cfg := workload.DefaultConfig([]string{"a", "b", "c", "d", "e", "f"}[i], peers, peers[0], "r")
			cfg.Cycles, cfg.WritesPerHold, cfg.StartDelay = 3, 0, 300*time.Millisecond
			w.AddNode(cfg.Name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{})
		}
		for k := range 20 {
			at := 400*time.Millisecond + time.Duration(k)*61*time.Millisecond
			victim := peers[k%3]
			w.At(at, "torn crash", func() { w.CrashTorn(victim, keep) })
			w.At(at+30*time.Millisecond, "restart", func() { w.Restart(victim) })
		}
		out := w.Run(10*time.Second, 5_000_000)
		if len(grants) < 6 {
			t.Fatalf("keep %v: only %d grants (run: %v at %v, %+v)", keep, len(grants), out, w.Now(), w.Stats())
		}
		torn := 0
		for _, id := range peers {
			torn += w.Disk(id).Stats().Torn
		}
		if torn == 0 {
			t.Fatalf("keep %v: no crash tore a write; the test proves nothing", keep)
		}
		if keep > 0 && marks.Get(coverage.ReplicaLogTailCut) == 0 || marks.Get(coverage.ReplicaRestartReplay) == 0 {
			t.Errorf("keep %v: marks %v; every restart replays its log (%s) and, when a torn write kept a part of an entry, cuts it (%s)", keep, marks.Map(), coverage.ReplicaRestartReplay, coverage.ReplicaLogTailCut)
		}
		for i := 1; i < len(grants); i++ {
			if grants[i] <= grants[i-1] {
				t.Fatalf("keep %v: tokens %v do not increase", keep, grants)
			}
		}
	}
}

type observerFunc func(lockservice.Event)

func (f observerFunc) Observe(e lockservice.Event) { f(e) }
