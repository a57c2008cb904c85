package sim

import (
	"slices"
	"testing"
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
