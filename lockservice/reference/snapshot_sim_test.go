package reference

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
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

// snapshotTrio is three replicas n1..n3 that snapshot every few entries,
// with small log segments, six clients that acquire and release, and the
// distinct granted tokens in decision order.
func snapshotTrio(t *testing.T, seed uint64, edit func(*ReplicaConfig)) (*sim.World, []sim.NodeID, *[]uint64, *coverage.Counts) {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: seed, Network: sim.DefaultNetwork()})
	if err != nil {
		t.Fatal(err)
	}
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
		cfg.SnapshotEntries, cfg.SnapshotKeep, cfg.SegmentEntries = 5, uint64(seed%3), 4
		if edit != nil {
			edit(&cfg)
		}
		w.AddNode([]string{"n1", "n2", "n3"}[i], func() sim.Process { return NewReplica(cfg) }, fakeclock.Config{})
	}
	for i := range 6 {
		cfg := workload.DefaultConfig([]string{"a", "b", "c", "d", "e", "f"}[i], peers, peers[0], "r")
		cfg.Cycles, cfg.WritesPerHold, cfg.StartDelay = 6, 0, 300*time.Millisecond
		w.AddNode(cfg.Name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{})
	}
	return w, peers, grants, marks
}

// TestReplicaSnapshotsUnderCrashes: replicas that snapshot every five
// entries, with slow syncs and torn crashes landing anywhere in the
// snapshot's steps (the torn snapshot write, between the snapshot and the
// segments' deletion, between a follower's installing a leader's snapshot
// and dropping its old log), restart correctly: tokens still increase,
// every replica ends with the same table, and across the seeds every
// snapshot corner is reached.
func TestReplicaSnapshotsUnderCrashes(t *testing.T) {
	all := &coverage.Counts{}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w, peers, got, marks := snapshotTrio(t, seed, nil)
			for _, id := range peers {
				w.SetSyncDelay(id, time.Duration(1+seed%3)*time.Millisecond)
			}
			r := rand.New(rand.NewPCG(seed, 23))
			at := 400 * time.Millisecond
			for range 24 {
				at += time.Duration(20+r.IntN(60)) * time.Millisecond
				victim := peers[r.IntN(3)]
				keep := r.Float64()
				down := time.Duration(10+r.IntN(200)) * time.Millisecond
				w.At(at, "torn crash", func() { w.CrashTorn(victim, keep) })
				w.At(at+down, "restart", func() { w.Restart(victim) })
			}
			out := w.Run(12*time.Second, 20_000_000)
			grants := *got
			if len(grants) < 12 {
				t.Fatalf("only %d grants (run: %v at %v)", len(grants), out, w.Now())
			}
			for i := 1; i < len(grants); i++ {
				if grants[i] <= grants[i-1] {
					t.Fatalf("tokens %v do not increase", grants)
				}
			}
			var first Snapshot
			for i, id := range peers {
				rep, ok := w.Process(id).(*Replica)
				if !ok {
					t.Fatalf("replica %d is down at the end", id)
				}
				s := rep.Table().Snapshot()
				if i == 0 {
					first = s
				} else if !reflect.DeepEqual(s, first) {
					t.Errorf("replica %d's table differs from replica 0's:\n%+v\nvs\n%+v", id, s, first)
				}
				// The disk holds the snapshot and at most a few segments.
				if n := len(w.Disk(id).Keys(logKeyPrefix)); n > 8 {
					t.Errorf("replica %d keeps %d log segments of 4 entries after snapshots every 5", id, n)
				}
			}
			if marks.Get(coverage.ReplicaSnapshotTaken) == 0 || marks.Get(coverage.ReplicaRestartFromSnapshot) == 0 {
				t.Errorf("marks %v: no snapshot taken or no restart from one", marks.Map())
			}
			all.Add(marks)
		})
	}
	for _, m := range []coverage.Mark{coverage.RaftLogCompacted, coverage.RaftSnapshotSent, coverage.RaftSnapshotRestored,
		coverage.ReplicaSnapshotTaken, coverage.ReplicaRestartFromSnapshot, coverage.ReplicaSnapshotTorn,
		coverage.ReplicaSnapshotSegmentsLeft} {
		if all.Get(m) == 0 {
			t.Errorf("no seed reached %s (marks %v)", m, all.Map())
		}
	}
	t.Logf("marks over the seeds: %v", all.Map())
}

// TestReplicaDropsALogThatDoesNotContinueItsSnapshot: a follower that
// installed a leader's snapshot and crashed before its old log was
// deleted restarts with the new snapshot and a log whose entry at the
// snapshot's index has another term. The simulator's crashes cannot leave
// that behind (the snapshot and the deletion are synced in one event), so
// the test plants it: it gives a crashed replica a live one's snapshot and
// an old log that diverges from it. The replica must drop that log
// (replica.snapshot-log-mismatch), and the group go on granting with
// growing tokens and end with equal tables.
func TestReplicaDropsALogThatDoesNotContinueItsSnapshot(t *testing.T) {
	w, peers, got, marks := snapshotTrio(t, 7, nil)
	victim, donor := peers[2], peers[0]
	planted := uint64(0)
	// The victim is down while the others go on, so that the donor's
	// snapshot is past the victim's commit index, as a leader's snapshot
	// that a follower installs is.
	w.At(1200*time.Millisecond, "crash", func() { w.Crash(victim) })
	w.At(2*time.Second+10*time.Millisecond, "plant a snapshot and a diverging log", func() {
		src := record.Slotted{Key: snapshotKey}
		b, ok := src.Load(w.Disk(donor))
		if !ok {
			return
		}
		snap, err := decodeSnapshot(b)
		if err != nil {
			t.Errorf("donor's snapshot: %v", err)
			return
		}
		d := w.Disk(victim)
		if hs, ok := (&record.Slotted{Key: hardStateKey}).Load(d); ok {
			if st, _ := decodeHardState(hs); st.Commit >= snap.Index {
				return
			}
		}
		dst := record.Slotted{Key: snapshotKey}
		dst.Load(d)
		dst.Store(d, b)
		for _, k := range d.Keys(logKeyPrefix) {
			d.Delete(k)
		}
		const per = 4
		f := segmentFirst(snap.Index, per)
		l := diskLog{per: per, last: f - 1}
		var ents []raft.Entry
		for i := f; i <= snap.Index+2; i++ {
			ents = append(ents, raft.Entry{Index: i, Term: snap.Term + 1, Data: encodeCommand(Command{Kind: CmdAcquire, Resource: "r", Client: "ghost", TTL: time.Second, Request: i})})
		}
		l.append(d, ents)
		d.Sync()
		planted = snap.Index
	})
	w.At(2*time.Second+30*time.Millisecond, "restart", func() { w.Restart(victim) })
	out := w.Run(12*time.Second, 20_000_000)
	if planted == 0 {
		t.Fatalf("the donor had no snapshot to plant; the test proves nothing (run: %v)", out)
	}
	if marks.Get(coverage.ReplicaSnapshotLogMismatch) == 0 {
		t.Errorf("marks %v: the restart kept a log that does not continue its snapshot", marks.Map())
	}
	grants := *got
	for i := 1; i < len(grants); i++ {
		if grants[i] <= grants[i-1] {
			t.Fatalf("tokens %v do not increase", grants)
		}
	}
	var tables []Snapshot
	for _, id := range peers {
		rep, ok := w.Process(id).(*Replica)
		if !ok {
			t.Fatalf("replica %d is down at the end", id)
		}
		tables = append(tables, rep.Table().Snapshot())
		if _, seen := rep.Table().Seen("ghost", planted); seen {
			t.Errorf("replica %d applied a planted entry of the dropped log", id)
		}
	}
	for i := 1; i < len(tables); i++ {
		if !reflect.DeepEqual(tables[i], tables[0]) {
			t.Errorf("replica %d's table differs from replica %d's:\n%+v\nvs\n%+v", peers[i], peers[0], tables[i], tables[0])
		}
	}
}

// TestStateCodecRoundTrip: a table built by applying commands (leases,
// dedup windows, keyed acquires, a forgotten request) encodes and decodes
// to a table equal to it, field for field, with the lease start indexes;
// and every strict prefix of the encoding is refused.
func TestStateCodecRoundTrip(t *testing.T) {
	tab := NewLockTable()
	tok := uint64(0)
	for i := range 30 {
		tok++
		c := fmt.Sprintf("c%d", i%4)
		rep := tab.Acquire(lockservice.AcquireRequest{Resource: fmt.Sprintf("r%d", i%5), Client: c, TTL: time.Second, Request: uint64(i + 1), Key: fmt.Sprintf("k%d", i%3)}, 0, tok)
		if rep.Status == lockservice.Granted && i%3 == 0 {
			tab.Release(lockservice.ReleaseRequest{Resource: fmt.Sprintf("r%d", i%5), Client: c, Token: rep.Token, Request: uint64(100 + i)})
		}
	}
	started := map[string]uint64{}
	for _, l := range tab.Leases() {
		started[l.Resource] = l.Token
	}
	b := appendState(nil, tab, started)
	got, gotStarted, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Snapshot(), tab.Snapshot()) || !reflect.DeepEqual(got.Leases(), tab.Leases()) || !reflect.DeepEqual(gotStarted, started) {
		t.Errorf("round trip differs:\n%+v\n%+v\nvs\n%+v\n%+v", got.Snapshot(), gotStarted, tab.Snapshot(), started)
	}
	if !bytes.Equal(appendState(nil, got, gotStarted), b) {
		t.Error("the decoded state encodes differently")
	}
	for n := range len(b) {
		if _, _, err := decodeState(b[:n]); err == nil {
			t.Fatalf("a %d-byte prefix of %d decoded", n, len(b))
		}
	}
}
