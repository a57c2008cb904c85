package reference

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// tornSeeds is how many seeds TestReplicaRestartsAfterTornLogWrite runs
// for each kept fraction.
const tornSeeds = 16

// TestReplicaRestartsAfterTornLogWrite: a replica whose last log write was
// torn by a crash restarts, drops the torn tail, and the group goes on
// granting with growing tokens.
func TestReplicaRestartsAfterTornLogWrite(t *testing.T) {
	for _, keep := range []float64{0, 0.5, 0.95} {
		// Which write a crash tears depends on the run's timing, so
		// several seeds are run, each checked in full, and a torn log
		// tail must have been cut in one of them at least.
		var torn, cut, cutSeeds uint64
		for seed := uint64(1); seed <= tornSeeds; seed++ {
			tn, c := tornLogRun(t, seed, keep)
			torn, cut = torn+tn, cut+c
			if c > 0 {
				cutSeeds++
			}
		}
		t.Logf("keep %v: %d torn writes, %d torn log tails cut, in %d of %d seeds", keep, torn, cut, cutSeeds, tornSeeds)
		if torn == 0 {
			t.Fatalf("keep %v: no crash tore a write in %d seeds; the test proves nothing", keep, tornSeeds)
		}
		if keep > 0 && cut == 0 {
			t.Errorf("keep %v: no restart cut a torn log tail (%s) in %d seeds; the test proves nothing", keep, coverage.ReplicaLogTailCut, tornSeeds)
		}
	}
}

// tornLogRun runs three replicas under torn crashes and six clients, checks
// that the group kept granting with growing tokens and that every restart
// replayed its log, and returns how many writes the crashes tore and how
// many restarts cut a torn log tail.
func tornLogRun(t *testing.T, seed uint64, keep float64) (torn, cut uint64) {
	t.Helper()
	w, peers, got, marks := newReplicaTrio(seed)
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
	grants := *got
	if len(grants) < 6 {
		t.Fatalf("seed %d, keep %v: only %d grants (run: %v at %v, %+v)", seed, keep, len(grants), out, w.Now(), w.Stats())
	}
	for _, id := range peers {
		torn += uint64(w.Disk(id).Stats().Torn)
	}
	if marks.Get(coverage.ReplicaRestartReplay) == 0 {
		t.Errorf("seed %d, keep %v: marks %v; every restart replays its log (%s)", seed, keep, marks.Map(), coverage.ReplicaRestartReplay)
	}
	for i := 1; i < len(grants); i++ {
		if grants[i] <= grants[i-1] {
			t.Fatalf("seed %d, keep %v: tokens %v do not increase", seed, keep, grants)
		}
	}
	return torn, marks.Get(coverage.ReplicaLogTailCut)
}

// newReplicaTrio is a world of seed with three replicas n1..n3 (nodes
// 0..2) sharing marks, and the distinct granted tokens in decision order.
func newReplicaTrio(seed uint64) (*sim.World, []sim.NodeID, *[]uint64, *coverage.Counts) {
	w, _ := sim.New(sim.Config{Seed: seed, Network: sim.DefaultNetwork()})
	peers := []sim.NodeID{0, 1, 2}
	grants := &[]uint64{}
	obs := observerFunc(func(e lockservice.Event) {
		if e.Kind == lockservice.EvGranted && !slices.Contains(*grants, e.Token) {
			*grants = append(*grants, e.Token)
		}
	})
	marks := &coverage.Counts{}
	for i := range peers {
		cfg := DefaultReplicaConfig(peers)
		cfg.Observer, cfg.Marks = obs, marks
		w.AddNode([]string{"n1", "n2", "n3"}[i], func() sim.Process { return NewReplica(cfg) }, fakeclock.Config{})
	}
	return w, peers, grants, marks
}

type observerFunc func(lockservice.Event)

func (f observerFunc) Observe(e lockservice.Event) { f(e) }

// TestReplicaCutsEntriesPastItsTerm: a replica whose disk holds log entries
// of a term later than its persisted hard state's restarts, cuts them
// (replica.log-term-cut) and the group goes on granting with growing
// tokens. The simulator's crashes cannot leave such a disk behind — a
// replica writes its entries and then the hard state carrying their term
// and syncs both together, and a crash keeps only what was synced plus a
// prefix of the last write (the hard state) — so the test plants the
// entries, as a disk that wrote back unsynced pages out of order would
// (the token-unsynced mutant, which never syncs, reaches it in the swarm).
func TestReplicaCutsEntriesPastItsTerm(t *testing.T) {
	w, peers, got, marks := newReplicaTrio(5)
	for i := range 3 {
		cfg := workload.DefaultConfig([]string{"a", "b", "c"}[i], peers, peers[0], "r")
		cfg.Cycles, cfg.WritesPerHold, cfg.StartDelay = 4, 0, 300*time.Millisecond
		w.AddNode(cfg.Name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{})
	}
	victim := peers[2]
	planted := 0
	w.At(time.Second, "crash", func() { w.Crash(victim) })
	w.At(time.Second+10*time.Millisecond, "plant entries past the term", func() {
		d := w.Disk(victim)
		hs := record.Slotted{Key: hardStateKey}
		b, ok := hs.Load(d)
		if !ok {
			return
		}
		st, err := decodeHardState(b)
		if err != nil {
			t.Errorf("hard state: %v", err)
			return
		}
		ents, l := loadLog(d, segmentEntries, raft.Snapshot{})
		next := uint64(len(ents)) + 1
		l.append(d, []raft.Entry{{Index: next, Term: st.Term + 3}, {Index: next + 1, Term: st.Term + 3}})
		d.Sync()
		planted = 2
	})
	w.At(time.Second+30*time.Millisecond, "restart", func() { w.Restart(victim) })
	out := w.Run(6*time.Second, 5_000_000)
	grants := *got
	if planted == 0 {
		t.Fatalf("the victim had no hard state to plant past; the test proves nothing (run: %v)", out)
	}
	if marks.Get(coverage.ReplicaLogTermCut) == 0 {
		t.Errorf("marks %v: the restart did not cut the entries past its term (%s)", marks.Map(), coverage.ReplicaLogTermCut)
	}
	if ents, _ := loadLog(w.Disk(victim), segmentEntries, raft.Snapshot{}); len(ents) > 0 {
		if st, ok := (&record.Slotted{Key: hardStateKey}).Load(w.Disk(victim)); ok {
			hs, _ := decodeHardState(st)
			for _, e := range ents {
				if e.Term > hs.Term {
					t.Fatalf("entry %d of term %d lies past the hard state's term %d after the restart", e.Index, e.Term, hs.Term)
				}
			}
		}
	}
	if len(grants) < 12 {
		t.Fatalf("only %d grants of 12 (run: %v at %v)", len(grants), out, w.Now())
	}
	for i := 1; i < len(grants); i++ {
		if grants[i] <= grants[i-1] {
			t.Fatalf("tokens %v do not increase", grants)
		}
	}
}
