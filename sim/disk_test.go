package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDiskWriteIsReadableBeforeSync(t *testing.T) {
	d := newDisk()
	if _, ok := d.Read("k"); ok {
		t.Fatalf("Read of a missing key: got ok, want !ok")
	}
	val := []byte("v1")
	d.Write("k", val)
	val[0] = 'X' // the disk keeps its own copy
	if got, ok := d.Read("k"); !ok || string(got) != "v1" {
		t.Errorf("Read before Sync: got %q, %v; want %q, true", got, ok, "v1")
	}
	if got := d.Dirty(); got != 1 {
		t.Errorf("Dirty before Sync: got %d, want 1", got)
	}
	d.Write("k", []byte("v2"))
	if got, _ := d.Read("k"); string(got) != "v2" {
		t.Errorf("Read after overwrite: got %q, want %q", got, "v2")
	}
	if got := d.Dirty(); got != 1 {
		t.Errorf("Dirty after writing the same key twice: got %d, want 1", got)
	}
	d.Delete("k")
	if got, ok := d.Read("k"); ok {
		t.Errorf("Read after Delete: got %q, true; want !ok", got)
	}
	d.Sync()
	if got := d.Dirty(); got != 0 {
		t.Errorf("Dirty after Sync: got %d, want 0", got)
	}
}

// TestDiskCrashThroughWorld drives a node's disk through World.Crash, which
// is how a disk loses data in a run.
func TestDiskCrashThroughWorld(t *testing.T) {
	type kv = map[string]string
	tests := []struct {
		name  string
		do    func(d *Disk)
		want  kv // what survives the crash
		lost  int
		dirty int // before the crash
	}{
		{"nothing written", func(d *Disk) {}, kv{}, 0, 0},
		{"unsynced write is lost", func(d *Disk) { d.Write("a", []byte("1")) }, kv{}, 1, 1},
		{"synced write survives", func(d *Disk) { d.Write("a", []byte("1")); d.Sync() }, kv{"a": "1"}, 0, 0},
		{"unsynced overwrite reverts", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Sync()
			d.Write("a", []byte("2"))
		}, kv{"a": "1"}, 1, 1},
		{"unsynced delete is undone", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Sync()
			d.Delete("a")
		}, kv{"a": "1"}, 1, 1},
		{"synced delete sticks", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Sync()
			d.Delete("a")
			d.Sync()
		}, kv{}, 0, 0},
		{"write then delete unsynced", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Delete("a")
		}, kv{}, 1, 1},
		{"mixed", func(d *Disk) {
			d.Write("keep", []byte("k"))
			d.Write("gone", []byte("g"))
			d.Sync()
			d.Write("keep", []byte("k2"))
			d.Delete("gone")
			d.Write("new", []byte("n"))
			d.Write("new", []byte("n2"))
		}, kv{"keep": "k", "gone": "g"}, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1})
			b, _ := addProbe(t, w, "b")
			runAll(t, w)
			d := w.Disk(b)
			tt.do(d)
			if got := d.Dirty(); got != tt.dirty {
				t.Errorf("Dirty before crash: got %d, want %d", got, tt.dirty)
			}
			w.Crash(b)
			if w.Disk(b) != d {
				t.Fatalf("Crash replaced the disk: want the same *Disk, with its synced data")
			}
			got := kv{}
			for _, k := range d.Keys("") {
				v, _ := d.Read(k)
				got[k] = string(v)
			}
			if !equalKV(got, tt.want) {
				t.Errorf("after crash: got %v, want %v", got, tt.want)
			}
			if s := d.Stats(); s.Lost != tt.lost {
				t.Errorf("Stats().Lost: got %d, want %d", s.Lost, tt.lost)
			}
			if got := d.Dirty(); got != 0 {
				t.Errorf("Dirty after crash: got %d, want 0", got)
			}
			// A second crash loses nothing more: what survived was synced.
			w.Restart(b)
			runAll(t, w)
			w.Crash(b)
			if s := d.Stats(); s.Lost != tt.lost || len(d.Keys("")) != len(tt.want) {
				t.Errorf("after a second crash: %d keys, %d lost; want %d, %d", len(d.Keys("")), s.Lost, len(tt.want), tt.lost)
			}
		})
	}
}

func equalKV(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a { //detlint:sorted only compares
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestDiskKeysSortedByPrefix(t *testing.T) {
	d := newDisk()
	// Written in an order unlike the sorted one, some synced, one deleted.
	for _, k := range []string{"lock/b", "meta", "lock/a", "lock/c/1", "lockx", "lock/", "z", "lock/d"} {
		d.Write(k, []byte(k))
	}
	d.Sync()
	d.Delete("lock/d")
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"lock/", "lock/a", "lock/b", "lock/c/1", "lockx", "meta", "z"}},
		{"lock/", []string{"lock/", "lock/a", "lock/b", "lock/c/1"}},
		{"lock", []string{"lock/", "lock/a", "lock/b", "lock/c/1", "lockx"}},
		{"lock/c", []string{"lock/c/1"}},
		{"lock/d", nil},
		{"nope", nil},
		{"z", []string{"z"}},
	}
	for _, tt := range tests {
		// Many calls: the map's iteration order must never show through.
		for range 20 {
			if got := d.Keys(tt.prefix); !slices.Equal(got, tt.want) {
				t.Fatalf("Keys(%q): got %q, want %q", tt.prefix, got, tt.want)
			}
		}
	}
}

func TestDiskStats(t *testing.T) {
	d := newDisk()
	d.Write("a", []byte("1"))
	d.Write("a", []byte("2"))
	d.Write("b", []byte("1"))
	d.Delete("c") // a delete of a missing key is still a write call
	d.Sync()
	d.Sync()
	d.Write("a", []byte("3"))
	d.Delete("b")
	d.crash()
	want := DiskStats{Writes: 6, Syncs: 2, Lost: 2}
	if got := d.Stats(); got != want {
		t.Errorf("Stats: got %+v, want %+v", got, want)
	}
}

// TestCrashTornKeepsAPrefixOfTheLastWrite: a torn crash drops every
// unsynced write except the last one, of which a strict prefix survives,
// durably. A last change that was a Delete or an empty write has nothing to
// tear: the crash is an ordinary one.
func TestCrashTornKeepsAPrefixOfTheLastWrite(t *testing.T) {
	type kv = map[string]string
	tests := []struct {
		name       string
		do         func(d *Disk)
		keep       float64
		want       kv
		lost, torn int
	}{
		{"nothing written", func(d *Disk) {}, 0.5, kv{}, 0, 0},
		{"half of the last write", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Sync()
			d.Write("b", []byte("lost"))
			d.Write("c", []byte("abcdefgh"))
		}, 0.5, kv{"a": "1", "c": "abcd"}, 1, 1},
		{"keep 0 leaves an empty value", func(d *Disk) { d.Write("c", []byte("abc")) }, 0, kv{"c": ""}, 0, 1},
		{"keep just below 1 still loses the last byte", func(d *Disk) { d.Write("c", []byte("abc")) }, 0.999, kv{"c": "ab"}, 0, 1},
		{"a torn overwrite replaces the synced value", func(d *Disk) {
			d.Write("a", []byte("old"))
			d.Sync()
			d.Write("a", []byte("newvalue"))
		}, 0.5, kv{"a": "newv"}, 0, 1},
		{"the last write, not the first key written", func(d *Disk) {
			d.Write("a", []byte("xxxx"))
			d.Write("b", []byte("yyyy"))
			d.Write("a", []byte("zzzz"))
		}, 0.5, kv{"a": "zz"}, 1, 1},
		{"a last delete cannot tear", func(d *Disk) {
			d.Write("a", []byte("1"))
			d.Sync()
			d.Write("b", []byte("2"))
			d.Delete("a")
		}, 0.5, kv{"a": "1"}, 2, 0},
		{"a last truncate cannot tear", func(d *Disk) {
			d.Write("a", []byte("abcdefgh"))
			d.Sync()
			d.Truncate("a", 6)
		}, 0.1, kv{"a": "abcdefgh"}, 1, 0},
		{"a synced truncate stays whole", func(d *Disk) {
			d.Write("a", []byte("abcdefgh"))
			d.Truncate("a", 6)
			d.Sync()
		}, 0.1, kv{"a": "abcdef"}, 0, 0},
		{"an append after a truncate tears after the cut", func(d *Disk) {
			d.Append("a", []byte("abcdefgh"))
			d.Sync()
			d.Truncate("a", 4)
			d.Append("a", []byte("wxyz"))
		}, 0.5, kv{"a": "abcdwx"}, 0, 1},
		{"a truncate past the end or of a missing key does nothing", func(d *Disk) {
			d.Write("a", []byte("abc"))
			d.Sync()
			d.Truncate("a", 3)
			d.Truncate("a", 9)
			d.Truncate("b", 0)
		}, 0.5, kv{"a": "abc"}, 0, 0},
		{"an empty last write cannot tear", func(d *Disk) { d.Write("a", nil) }, 0.5, kv{}, 1, 0},
		{"nothing unsynced", func(d *Disk) { d.Write("a", []byte("1")); d.Sync() }, 0.5, kv{"a": "1"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1})
			b, pb := addProbe(t, w, "b")
			runAll(t, w)
			d := w.Disk(b)
			tt.do(d)
			w.CrashTorn(b, tt.keep)
			if got := w.State(b); got != Crashed {
				t.Fatalf("state: got %v, want %v", got, Crashed)
			}
			got := kv{}
			for _, k := range d.Keys("") {
				v, _ := d.Read(k)
				got[k] = string(v)
			}
			if !equalKV(got, tt.want) {
				t.Errorf("after the torn crash: got %v, want %v", got, tt.want)
			}
			if s := d.Stats(); s.Lost != tt.lost || s.Torn != tt.torn {
				t.Errorf("Stats: got lost %d torn %d, want lost %d torn %d", s.Lost, s.Torn, tt.lost, tt.torn)
			}
			// What survived is durable: an ordinary crash after a restart
			// keeps it, and the restarted process sees it.
			w.Restart(b)
			runAll(t, w)
			w.Crash(b)
			if n := len(d.Keys("")); n != len(tt.want) {
				t.Errorf("after a second crash: %d keys, want %d", n, len(tt.want))
			}
			if o := pb.obs[len(pb.obs)-1]; o.What != "start" || len(o.Keys) != len(tt.want) {
				t.Errorf("the restarted process saw %+v, want a start with %d keys", o, len(tt.want))
			}
		})
	}
}

func TestCrashTornRejectsABadFraction(t *testing.T) {
	for _, keep := range []float64{-0.1, 1, 2} {
		w := newWorld(t, Config{Seed: 1})
		b, _ := addProbe(t, w, "b")
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "keep must lie in [0, 1)") {
					t.Errorf("CrashTorn(keep %v): got panic %v, want one about keep", keep, r)
				}
			}()
			w.CrashTorn(b, keep)
		}()
	}
}

// TestCrashTornOfACrashedNodeDoesNothing: the disk is not touched twice.
func TestCrashTornOfACrashedNodeDoesNothing(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, _ := addProbe(t, w, "b")
	runAll(t, w)
	w.Crash(b)
	w.Disk(b).Write("a", []byte("abcd"))
	w.CrashTorn(b, 0.5)
	if v, ok := w.Disk(b).Read("a"); !ok || string(v) != "abcd" {
		t.Errorf("Read: got %q %v, want the untouched write", v, ok)
	}
	if s := w.Stats(); s.Crashes != 1 {
		t.Errorf("crashes: got %d, want 1", s.Crashes)
	}
}

// TestSlowDiskStallsTheNode: b syncs on every message and echoes it to a.
// With a sync delay of 30ms, b is paused for 30ms from the Sync, a message
// that arrives meanwhile waits until the stall ends, the echo sent after
// the Sync leaves 30ms late, and a message sent before the Sync in the same
// event does not.
func TestSlowDiskStallsTheNode(t *testing.T) {
	tests := []struct {
		name   string
		delay  time.Duration
		syncs  int             // Syncs per received message
		echoAt []time.Duration // true arrival times of the echoes at a
		stalls int
	}{
		{"fast disk", 0, 1, []time.Duration{2 * ms, 3 * ms}, 0},
		{"slow disk", 30 * ms, 1, []time.Duration{32 * ms, 62 * ms}, 2},
		{"two syncs in one event add up", 30 * ms, 2, []time.Duration{62 * ms, 122 * ms}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
			a, pa := addProbe(t, w, "a")
			b, pb := addProbe(t, w, "b")
			w.SetSyncDelay(b, tt.delay)
			if got := w.SyncDelay(b); got != tt.delay {
				t.Fatalf("SyncDelay: got %v, want %v", got, tt.delay)
			}
			var arrivals, early []time.Duration
			pa.onRecv = func(p *proc, from NodeID, m Message) {
				if m.(testMsg).Body == "early" {
					early = append(early, w.Now())
				} else {
					arrivals = append(arrivals, w.Now())
				}
			}
			var stateAfterSync []NodeState
			pb.onRecv = func(p *proc, from NodeID, m Message) {
				p.env.Send(a, testMsg{N: m.(testMsg).N, Body: "early"})
				p.env.Disk().Write("k", []byte("v"))
				for range tt.syncs {
					p.env.Disk().Sync()
				}
				stateAfterSync = append(stateAfterSync, w.State(b))
				p.env.Send(a, testMsg{N: m.(testMsg).N, Body: "echo"})
			}
			sendAt(t, w, 0, a, b, testMsg{N: 1})  // arrives at 1ms
			sendAt(t, w, ms, a, b, testMsg{N: 2}) // arrives at 2ms, during the stall if any
			runAll(t, w)
			if !slices.Equal(arrivals, tt.echoAt) {
				t.Errorf("echoes arrived at %v, want %v", arrivals, tt.echoAt)
			}
			if len(early) != 2 || early[0] != 2*ms {
				t.Errorf("the message sent before the Sync arrived at %v, want first at 2ms", early)
			}
			wantState := Up
			if tt.delay > 0 {
				wantState = Paused
			}
			for _, s := range stateAfterSync {
				if s != wantState {
					t.Errorf("state right after the Sync: got %v, want %v", s, wantState)
				}
			}
			if s := w.Stats(); s.Stalls != tt.stalls || s.Pauses != 0 {
				t.Errorf("stats: got %d stalls, %d pauses; want %d, 0", s.Stalls, s.Pauses, tt.stalls)
			}
		})
	}
}

// TestSlowDiskIgnoresHarnessSyncs: a Sync made by the harness, outside any
// event of the node, does not stall it; SetSyncDelay(0) makes it fast again.
func TestSlowDiskIgnoresHarnessSyncs(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, _ := addProbe(t, w, "b")
	runAll(t, w)
	w.SetSyncDelay(b, time.Second)
	w.Disk(b).Sync()
	if got := w.State(b); got != Up {
		t.Errorf("state after a harness Sync: got %v, want %v", got, Up)
	}
	w.SetSyncDelay(b, 0)
	if got := w.SyncDelay(b); got != 0 {
		t.Errorf("SyncDelay after reset: got %v, want 0", got)
	}
}

// TestSlowDiskStallOnStart: a process that syncs in Start on a slow disk is
// stalled too, and its timers due meanwhile fire when the stall ends.
func TestSlowDiskStallOnStart(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	w.SetSyncDelay(b, 10*ms)
	pb.onStart = func(p *proc) {
		p.env.Disk().Sync()
		p.timer(2*ms, "t2")
	}
	runAll(t, w)
	checkStory(t, "b", pb.seen(), []string{"timer t2#1@10ms"})
}

func read(d *Disk, key string) string {
	v, _ := d.Read(key)
	return string(v)
}

// TestDiskAppend: appends are readable at once, survive a crash only once
// synced, and a torn crash keeps what the key held before the last append
// plus a strict prefix of it.
func TestDiskAppend(t *testing.T) {
	d := newDisk()
	d.Append("log", []byte("ab"))
	d.Append("log", []byte("cd"))
	if got := read(d, "log"); got != "abcd" {
		t.Fatalf("after two appends: %q", got)
	}
	d.Sync()
	d.Append("log", []byte("ef"))
	d.crash()
	if got := read(d, "log"); got != "abcd" {
		t.Fatalf("after a crash: %q, want the synced %q", got, "abcd")
	}
	d.Append("log", []byte("gh"))
	d.Append("log", []byte("ijkl"))
	if !d.crashTorn(0.5) {
		t.Fatalf("an unsynced append was not torn")
	}
	if got := read(d, "log"); got != "abcdghij" {
		t.Fatalf("after a torn crash: %q, want %q (before the last append, then half of it)", got, "abcdghij")
	}
	d.crash()
	if got := read(d, "log"); got != "abcdghij" {
		t.Fatalf("the torn prefix is durable: %q", got)
	}
	d.Append("new", []byte("x"))
	d.Sync()
	if got := read(d, "new"); got != "x" {
		t.Fatalf("append to a missing key: %q", got)
	}
	if s := d.Stats(); s.Torn != 1 || s.Lost != 1 {
		t.Fatalf("stats %+v, want 1 torn, 1 lost", s)
	}
}

// TestDiskAppendNeverChangesAHandedOutSlice: appends grow the value in
// place, so a slice from Read, or the synced copy a crash brought back,
// must not be written over by a later append.
func TestDiskAppendNeverChangesAHandedOutSlice(t *testing.T) {
	d := newDisk()
	d.Append("log", []byte("abc"))
	d.Sync()
	d.Append("log", []byte("def"))
	d.crash() // back to "abc"; the array behind it held "abcdef"
	got, _ := d.Read("log")
	d.Append("log", []byte("XYZ"))
	if string(got) != "abc" || strings.Contains(string(got[:cap(got)]), "XYZ") {
		t.Fatalf("an append wrote into the array of a slice handed out by Read: %q", got[:cap(got)])
	}
	d.Sync()
	d.Write("log", []byte("w"))
	d.crash() // back to "abcXYZ"
	d.Append("log", []byte("!"))
	if v := read(d, "log"); v != "abcXYZ!" {
		t.Fatalf("after crash and append: %q", v)
	}
}

// TestDiskTruncateNeverChangesTheSyncedCopy: a truncated value shares its
// array with the synced one, so an append after the cut must not write
// over the synced bytes a crash brings back.
func TestDiskTruncateNeverChangesTheSyncedCopy(t *testing.T) {
	d := newDisk()
	d.Append("log", make([]byte, 0, 64)) // room to grow in place
	d.Append("log", []byte("abcdefgh"))
	d.Sync()
	d.Append("log", []byte("ij")) // grows in place: cur no longer shared
	d.Sync()
	d.Truncate("log", 4)
	d.Append("log", []byte("XY"))
	if v := read(d, "log"); v != "abcdXY" {
		t.Fatalf("after truncate and append: %q, want %q", v, "abcdXY")
	}
	d.crash()
	if v := read(d, "log"); v != "abcdefghij" {
		t.Fatalf("after a crash: %q, want the synced %q", v, "abcdefghij")
	}
	if d.Bytes() != len("abcdefghij") {
		t.Fatalf("Bytes %d after the crash, want %d", d.Bytes(), len("abcdefghij"))
	}
}

// TestTornCrashDropsAWriteHeldBySlowSync: on a slow disk, a write the
// process makes after a Sync of the same event waits for that sync (as
// its messages do); a crash before the sync completes drops it whole —
// it is never torn into durability ahead of the writes the sync covered
// (swarm seed 69767: a log segment's new entries survived while the cut
// of the old ones in another segment was lost, and two replicas applied
// different entries at one index).
func TestTornCrashDropsAWriteHeldBySlowSync(t *testing.T) {
	now := time.Duration(0)
	d := newDisk()
	d.now = func() time.Duration { return now }
	d.Write("a", []byte("old-a"))
	d.Write("b", []byte("old-b"))
	d.Sync()
	d.onSync = func() (time.Duration, bool) { return now + time.Millisecond, true }
	d.Truncate("a", 3) // the cut, synced slowly
	d.Sync()
	d.Append("b", []byte("-new")) // after the Sync, in the same event
	if torn := d.crashTorn(0.9); torn {
		t.Fatal("a write held behind a slow sync was torn")
	}
	if a, _ := d.Read("a"); string(a) != "old-a" {
		t.Fatalf("a = %q: the sync never completed, so the cut is lost", a)
	}
	if b, _ := d.Read("b"); string(b) != "old-b" {
		t.Fatalf("b = %q: the held append must be dropped whole", b)
	}
	// The canary: an append made before the slow Sync is still torn.
	d.onSync = nil
	d.Append("b", []byte("-unsynced"))
	if torn := d.crashTorn(0.5); !torn {
		t.Fatal("an unsynced append with no sync in flight was not torn")
	}
}

// TestDiskForgetsADeletedKeyEverywhere: a key deleted for good (the
// deletion synced, or an unsynced first write lost in a crash) is
// forgotten, including by the records a write looks at before the map
// (Disk.hot), so that writing it again makes a fresh record the disk
// reads, syncs and crashes like any other.
func TestDiskForgetsADeletedKeyEverywhere(t *testing.T) {
	d := newDisk()
	d.Write("k", []byte("v1"))
	d.Sync()
	d.Delete("k")
	d.Sync() // gone for good
	d.Write("k", []byte("v2"))
	if got := read(d, "k"); got != "v2" {
		t.Fatalf("written again after a synced delete: %q, want v2", got)
	}
	d.Sync()
	d.Append("k", []byte("+"))
	d.crash()
	if got := read(d, "k"); got != "v2" {
		t.Fatalf("after a crash: %q, want the synced v2", got)
	}
	// An unsynced first write, lost in a crash, is forgotten too.
	d.Write("n", []byte("lost"))
	d.crash()
	if _, ok := d.Read("n"); ok {
		t.Fatal("a lost first write is still readable")
	}
	d.Append("n", []byte("x"))
	d.Sync()
	d.crash()
	if got := read(d, "n"); got != "x" {
		t.Fatalf("written again after a lost first write: %q, want x", got)
	}
}
