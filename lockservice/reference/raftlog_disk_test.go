package reference

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/sim"
)

// idle is a process that does nothing: the test drives its disk.
type idle struct{}

func (idle) Start(sim.Env)                            {}
func (idle) Receive(sim.Env, sim.NodeID, sim.Message) {}

func sameEntries(a, b raft.Entry) bool {
	return a.Index == b.Index && a.Term == b.Term && (a.Data == nil) == (b.Data == nil) && bytes.Equal(a.Data, b.Data)
}

// TestDiskLogSegments drives the segmented log with tiny segments (3
// entries) through appends, replaced suffixes, syncs, crashes and torn
// crashes: a restart reads back exactly what was written (no crash), the
// synced log (crash), or a mix that agrees entry by entry with one of the
// two (torn crash: a prefix of the last write survives) — and always a
// contiguous log from index 1.
func TestDiskLogSegments(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w, _ := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork()})
		id, _ := w.AddNode("p", func() sim.Process { return idle{} }, fakeclock.Config{})
		w.Run(time.Millisecond, 10)
		const per = 3
		d := w.Disk(id)
		_, l := loadLog(d, per, raft.Snapshot{})
		var model, synced []raft.Entry
		term := uint64(1)
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 5: // append, or replace a suffix
				from := uint64(len(model)) + 1
				if op == 0 && len(model) > 0 {
					from = rapid.Uint64Range(1, uint64(len(model))).Draw(rt, "from")
					term++
				}
				var ents []raft.Entry
				for i := range rapid.IntRange(1, 7).Draw(rt, "n") {
					e := raft.Entry{Index: from + uint64(i), Term: term, Data: []byte(fmt.Sprintf("s%d-%d", step, i))}
					if rapid.Bool().Draw(rt, "empty") {
						e.Data = nil
					}
					ents = append(ents, e)
				}
				if from <= uint64(len(model)) {
					// Replacing a suffix syncs the cut before the
					// new entries are written (diskLog.append).
					synced = model[: from-1 : from-1]
				}
				l.append(d, ents)
				model = append(model[:from-1:from-1], ents...)
			case op < 8:
				d.Sync()
				synced = model
			default: // crash, torn or not, and restart
				if op == 8 {
					w.Crash(id)
				} else {
					w.CrashTorn(id, rapid.Float64Range(0, 0.99).Draw(rt, "keep"))
				}
				w.Restart(id)
				w.Run(w.Now()+time.Millisecond, 10)
				var got []raft.Entry
				got, l = loadLog(d, per, raft.Snapshot{})
				for i, e := range got {
					if e.Index != uint64(i)+1 ||
						!(i < len(synced) && sameEntries(e, synced[i]) || i < len(model) && sameEntries(e, model[i])) {
						rt.Fatalf("after a crash, entry %d = %+v agrees with neither the synced log %v nor the written one %v", i+1, e, synced, model)
					}
				}
				if op == 8 && len(got) != len(synced) {
					rt.Fatalf("after a crash: %d entries, want the %d synced", len(got), len(synced))
				}
				model = append([]raft.Entry(nil), got...)
				synced = model
				continue
			}
			got, _ := loadLog(d, per, raft.Snapshot{})
			if len(got) != len(model) {
				rt.Fatalf("read back %d entries, wrote %d", len(got), len(model))
			}
			for i := range got {
				if !sameEntries(got[i], model[i]) {
					rt.Fatalf("entry %d read back as %+v, wrote %+v", i+1, got[i], model[i])
				}
			}
		}
	})
}

// TestDiskLogCutsATornTail: garbage after the last intact record (a torn
// append) is cut off, durably, and the entries before it are kept.
func TestDiskLogCutsATornTail(t *testing.T) {
	d := idleDisk()
	writeLog(d, 1, 1, 1, 1, 1)
	whole := record.Seal(encodeEntry(raft.Entry{Index: 6, Term: 1, Data: []byte{6}}))
	d.Append(logKey(4), whole[:len(whole)-1])
	d.Sync()
	got, l2 := loadLog(d, 3, raft.Snapshot{})
	if len(got) != 5 || l2.last != 5 {
		t.Fatalf("read %d entries (last %d), want the 5 intact ones", len(got), l2.last)
	}
	if again, _ := loadLog(d, 3, raft.Snapshot{}); len(again) != 5 || d.Dirty() != 0 {
		t.Fatalf("the cut was not durable: %d entries, %d dirty", len(again), d.Dirty())
	}
	// The torn bytes are gone: an entry appended now reads back.
	l2.append(d, []raft.Entry{{Index: 6, Term: 1, Data: []byte{6}}})
	if again, _ := loadLog(d, 3, raft.Snapshot{}); len(again) != 6 {
		t.Fatalf("after appending entry 6 to the cut log: %d entries, want 6", len(again))
	}
}

// TestDiskLogKeepsNoEntryNewerThanTheTerm: entries of a term later than the
// persisted hard state's (a crash kept unsynced appends and lost the hard
// state written before them) are cut, durably, and the rest kept.
func TestDiskLogKeepsNoEntryNewerThanTheTerm(t *testing.T) {
	d := idleDisk()
	writeLog(d, 1, 1, 2, 2, 3, 3, 3)
	d.Sync()
	got, l2 := loadLog(d, 3, raft.Snapshot{})
	got = l2.keepTerms(d, got, 2)
	if len(got) != 4 || got[3].Term != 2 {
		t.Fatalf("kept %+v, want the 4 entries of terms 1 and 2", got)
	}
	if again, _ := loadLog(d, 3, raft.Snapshot{}); len(again) != 4 || d.Dirty() != 0 {
		t.Fatalf("the cut was not durable: %d entries, %d dirty", len(again), d.Dirty())
	}
	if got := l2.keepTerms(d, got, 0); len(got) != 0 {
		t.Fatalf("term 0 kept %d entries", len(got))
	}
}

// idleDisk returns the disk of a running node whose process does nothing.
func idleDisk() *sim.Disk {
	w, _ := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork()})
	id, _ := w.AddNode("p", func() sim.Process { return idle{} }, fakeclock.Config{})
	w.Run(time.Millisecond, 10)
	return w.Disk(id)
}

// writeLog appends entries 1, 2, … with the given terms in segments of 3.
func writeLog(d *sim.Disk, terms ...uint64) {
	l := diskLog{per: 3}
	var ents []raft.Entry
	for i, term := range terms {
		ents = append(ents, raft.Entry{Index: uint64(i) + 1, Term: term, Data: []byte{byte(i + 1)}})
	}
	l.append(d, ents)
}

// TestLoadLogAllocatesPerSegment pins the restart's cost: loading a log
// copies each segment once and lets its entries' data share the copy, so a
// replica restarting on thousands of entries does not allocate for each —
// while the loaded entries stay intact when the disk's segment grows after.
func TestLoadLogAllocatesPerSegment(t *testing.T) {
	w, _ := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork()})
	id, _ := w.AddNode("p", func() sim.Process { return idle{} }, fakeclock.Config{})
	w.Run(time.Millisecond, 10)
	d := w.Disk(id)
	const per, n = 512, 2000 // 4 segments
	_, l := loadLog(d, per, raft.Snapshot{})
	var ents []raft.Entry
	for i := range uint64(n) {
		ents = append(ents, raft.Entry{Index: i + 1, Term: 1, Data: []byte(fmt.Sprintf("entry-%d", i+1))})
	}
	ents[7].Data = []byte{} // empty data stays distinct from none
	ents[8].Data = nil
	l.append(d, ents)
	d.Sync()
	got, l := loadLog(d, per, raft.Snapshot{})
	if allocs := testing.AllocsPerRun(5, func() { loadLog(d, per, raft.Snapshot{}) }); allocs > 40 {
		t.Errorf("loadLog of %d entries in 4 segments: %v allocations, want at most 40 (one copy per segment, not one per entry)", n, allocs)
	}
	l.append(d, []raft.Entry{{Index: n + 1, Term: 1, Data: []byte("after")}})
	if len(got) != n {
		t.Fatalf("loaded %d entries, want %d", len(got), n)
	}
	for i := range got {
		if !sameEntries(got[i], ents[i]) {
			t.Fatalf("entry %d: got %+v, want %+v", i+1, got[i], ents[i])
		}
	}
}

// loader is a process whose start loads its log (segments of 3), as a
// replica's does — cutting a torn tail, and the entries of a term later
// than term.
type loader struct{ term uint64 }

func (p loader) Start(env sim.Env) {
	ents, l := loadLog(env.Disk(), 3, raft.Snapshot{})
	l.keepTerms(env.Disk(), ents, p.term)
}
func (loader) Receive(sim.Env, sim.NodeID, sim.Message) {}

// TestDiskLogCutSurvivesATornCrash: a restart cuts its log — a torn tail,
// or entries past its term — and syncs the cut on a slow disk, and a torn
// crash comes during that sync. The synced entries before the cut must all
// survive: the cut is a truncation, which cannot tear below what it keeps.
// (Rewriting the kept prefix instead let the crash tear the rewrite and
// lose synced, acknowledged entries: the guided search's finding, see
// docs/guided-search.md and TestGuidedFindingTornCut in scenarios.)
func TestDiskLogCutSurvivesATornCrash(t *testing.T) {
	cases := []struct {
		name  string
		terms []uint64 // entries 1, 2, …, synced, in segments 1..3, 4..6
		torn  bool     // a torn append of entry len(terms)+1 follows
		term  uint64   // the hard state's term
		want  int      // entries left after the cut
	}{
		{"torn tail", []uint64{1, 1, 1, 1, 1}, true, 1, 5},
		{"entries past the term", []uint64{1, 1, 1, 1, 2}, false, 1, 4},
	}
	for _, c := range cases {
		for _, keep := range []float64{0, 0.2, 0.5, 0.9} {
			w, _ := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork()})
			id, _ := w.AddNode("p", func() sim.Process { return loader{term: c.term} }, fakeclock.Config{})
			w.Run(time.Millisecond, 10)
			d := w.Disk(id)
			writeLog(d, c.terms...)
			if c.torn {
				n := uint64(len(c.terms)) + 1
				whole := record.Seal(encodeEntry(raft.Entry{Index: n, Term: 1, Data: []byte{byte(n)}}))
				d.Append(logKey(segmentFirst(n, 3)), whole[:len(whole)-1])
			}
			d.Sync()
			w.SetSyncDelay(id, 50*time.Millisecond)
			w.Crash(id)
			w.Restart(id)
			w.Run(w.Now()+10*time.Millisecond, 100) // the cut's sync is in flight
			if _, ok := d.SyncDone(); !ok {
				t.Fatalf("%s, keep %v: the restart's cut is not in flight", c.name, keep)
			}
			w.CrashTorn(id, keep)
			w.SetSyncDelay(id, 0)
			w.Restart(id)
			w.Run(w.Now()+time.Millisecond, 100)
			if got, _ := loadLog(d, 3, raft.Snapshot{}); len(got) != c.want {
				t.Errorf("%s, keep %v: a torn crash during the cut's sync left %d entries, want %d", c.name, keep, len(got), c.want)
			}
		}
	}
}
