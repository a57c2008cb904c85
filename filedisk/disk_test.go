package filedisk

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// open opens dir and closes it at the end of the test unless the test
// closed or abandoned it.
func open(t *testing.T, dir string, opts Options) *Disk {
	t.Helper()
	d, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if !d.closed {
			d.Close()
		}
	})
	return d
}

// crash abandons d as a crash would (nothing since the last Sync reaches
// the files) and opens its directory again.
func crash(t *testing.T, d *Disk, opts Options) *Disk {
	t.Helper()
	d.abandon()
	return open(t, d.dir, opts)
}

// state is every key and value on d.
func state(d *Disk) map[string]string {
	m := map[string]string{}
	for _, k := range d.Keys("") {
		v, ok := d.Read(k)
		if !ok {
			panic("Keys listed " + k + ", Read does not find it")
		}
		m[k] = string(v)
	}
	return m
}

func checkState(t *testing.T, d *Disk, want map[string]string, when string) {
	t.Helper()
	if got := state(d); !maps.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", when, got, want)
	}
}

func TestWriteAppendDeleteReadRoundTrip(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	if _, ok := d.Read("k"); ok {
		t.Fatalf("Read of a missing key: got ok")
	}
	val := []byte("v1")
	d.Write("k", val)
	val[0] = 'X' // the disk keeps its own copy
	if got, ok := d.Read("k"); !ok || string(got) != "v1" {
		t.Fatalf("Read before Sync: got %q, %v; want %q, true", got, ok, "v1")
	}
	d.Append("k", []byte("+a"))
	d.Append("log", []byte("x"))
	d.Append("log", []byte("y"))
	d.Write("empty", nil)
	d.Write("gone", []byte("soon"))
	d.Delete("gone")
	d.Delete("never-written")
	want := map[string]string{"k": "v1+a", "log": "xy", "empty": ""}
	checkState(t, d, want, "before Sync")
	d.Sync()
	d.Append("log", []byte("z"))
	d.Sync()
	want["log"] = "xyz"
	checkState(t, d, want, "after Sync")
	d = crash(t, d, Options{})
	checkState(t, d, want, "after reopening")
	if v, ok := d.Read("empty"); !ok || len(v) != 0 {
		t.Errorf("Read(empty) after reopening: got %q, %v; want \"\", true", v, ok)
	}
}

// TestReadSliceStaysPut: a slice Read handed out never changes, even as
// the key is appended to, and appending to it does not reach the disk.
func TestReadSliceStaysPut(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.Write("k", make([]byte, 3, 100))
	got, _ := d.Read("k")
	_ = append(got, 'X')
	d.Append("k", []byte("abc"))
	if string(got) != "\x00\x00\x00" {
		t.Errorf("slice from Read changed to %q", got)
	}
	if v, _ := d.Read("k"); string(v) != "\x00\x00\x00abc" {
		t.Errorf("Read after Append: got %q", v)
	}
}

func TestKeysAreSortedAndFilteredByPrefix(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	for _, k := range []string{"raft/log/3", "raft/hard/1", "raft/log/1", "store", "raft/log/2", "raft/log/9x"} {
		d.Write(k, []byte(k))
	}
	d.Delete("raft/log/2")
	if got, want := d.Keys("raft/log/"), []string{"raft/log/1", "raft/log/3", "raft/log/9x"}; !slices.Equal(got, want) {
		t.Errorf("Keys(raft/log/): got %v, want %v", got, want)
	}
	if got := d.Keys("nothing"); len(got) != 0 {
		t.Errorf("Keys(nothing): got %v, want none", got)
	}
	d.Sync()
	d = crash(t, d, Options{})
	if got, want := d.Keys(""), []string{"raft/hard/1", "raft/log/1", "raft/log/3", "raft/log/9x", "store"}; !slices.Equal(got, want) {
		t.Errorf("Keys after reopening: got %v, want %v", got, want)
	}
}

// TestReopenKeepsExactlyWhatWasSynced: a crash loses every write since
// the last Sync and keeps every one before; Close keeps all.
func TestReopenKeepsExactlyWhatWasSynced(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, Options{})
	d.Write("a", []byte("1"))
	d.Append("log", []byte("x"))
	d.Write("gone", []byte("g"))
	d.Sync()
	d.Write("a", []byte("2"))        // lost
	d.Append("log", []byte("y"))     // lost
	d.Delete("gone")                 // lost
	d.Write("new", []byte("unsync")) // lost
	synced := map[string]string{"a": "1", "log": "x", "gone": "g"}
	d = crash(t, d, Options{})
	checkState(t, d, synced, "after a crash")

	d.Write("b", []byte("closed"))
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	d = open(t, dir, Options{})
	synced["b"] = "closed"
	checkState(t, d, synced, "after Close")
}

// TestRandomOpsMatchModel runs random writes, appends, deletes, syncs,
// crashes and clean reopens on a disk with tiny segments, frames and
// compaction threshold, so rolls, multi-frame batches and compactions all
// happen, and compares it with a model after every step.
func TestRandomOpsMatchModel(t *testing.T) {
	opts := Options{SegmentBytes: 300, CompactBytes: 2000}
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			d := open(t, t.TempDir(), opts)
			d.framePayload = 40
			cur, synced := map[string]string{}, map[string]string{}
			compactions := 0
			for i := range 400 {
				key := fmt.Sprint("k", rng.IntN(12))
				val := strings.Repeat(string(rune('a'+i%26)), rng.IntN(30))
				switch r := rng.IntN(100); {
				case r < 35:
					d.Write(key, []byte(val))
					cur[key] = val
				case r < 65:
					d.Append(key, []byte(val))
					cur[key] += val
				case r < 75:
					d.Delete(key)
					delete(cur, key)
				case r < 92:
					before := d.segments[0]
					d.Sync()
					if d.segments[0] != before && strings.HasPrefix(d.segments[0], snapPrefix) {
						compactions++
					}
					synced = maps.Clone(cur)
				case r < 97:
					d = crash(t, d, opts)
					d.framePayload = 40
					cur = maps.Clone(synced)
				default:
					if err := d.Close(); err != nil {
						t.Fatal(err)
					}
					d = open(t, d.dir, opts)
					d.framePayload = 40
					synced = maps.Clone(cur)
				}
				checkState(t, d, cur, fmt.Sprint("step ", i))
			}
			if compactions == 0 {
				t.Errorf("no compaction in 400 steps: the test does not cover it")
			}
			if got := d.logSize; got > opts.CompactBytes+2*d.live+int64(opts.SegmentBytes) {
				t.Errorf("log is %d bytes for %d live: compaction does not keep it bounded", got, d.live)
			}
		})
	}
}

func TestSecondOpenOfOneDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, Options{})
	_, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "is in use") || !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("second Open: got %v, want an error saying the directory is in use by pid %d", err, os.Getpid())
	}
	d.Close()
	d2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	d2.Close()
}

func TestOpenRefusesForeignFilesAndNonDirectories(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), `"notes.txt"`) {
		t.Errorf("Open of a directory with a foreign file: got %v, want an error naming it", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(file, Options{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open of a file: got %v, want an error saying it is not a directory", err)
	}
	nested := filepath.Join(t.TempDir(), "a", "b")
	d := open(t, nested, Options{})
	d.Write("k", []byte("v"))
	d.Close()
	d = open(t, nested, Options{})
	checkState(t, d, map[string]string{"k": "v"}, "a directory Open created")
}

// TestFailedSyncPanicsAndFailsTheDisk: an I/O error in Sync (made here by
// closing the segment under the disk, so its write fails) panics, and the
// disk stays failed until it is closed and the directory reopened.
func TestFailedSyncPanicsAndFailsTheDisk(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.Write("k", []byte("v"))
	d.seg.Close()
	err := syncPanic(d)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after an I/O error: panicked with %v, want an error wrapping ErrFailed", err)
	}
	if !errors.Is(d.Err(), ErrFailed) {
		t.Errorf("Err after the failure: got %v, want ErrFailed", d.Err())
	}
	for name, call := range map[string]func(){
		"Write": func() { d.Write("k", nil) },
		"Read":  func() { d.Read("k") },
		"Sync":  d.Sync,
	} {
		if got := recovered(call); got != d.Err() {
			t.Errorf("%s on a failed disk: panicked with %v, want %v", name, got, d.Err())
		}
	}
	if err := d.Close(); !errors.Is(err, ErrFailed) {
		t.Errorf("Close of a failed disk: got %v, want ErrFailed", err)
	}
	if _, err := Open(d.dir, Options{}); err != nil {
		t.Errorf("Open after a failed disk was closed: %v", err)
	}
}

func syncPanic(d *Disk) error {
	err, _ := recovered(d.Sync).(error)
	return err
}

func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestClosedDiskPanics(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.Close()
	if got := recovered(func() { d.Write("k", nil) }); got != ErrClosed {
		t.Errorf("Write after Close: panicked with %v, want ErrClosed", got)
	}
	if err := d.Close(); err != ErrClosed {
		t.Errorf("second Close: got %v, want ErrClosed", err)
	}
}

func TestOversizedKeyPanics(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	got := recovered(func() { d.Write(strings.Repeat("k", maxKeyBytes+1), nil) })
	if s, _ := got.(string); !strings.Contains(s, "limit") {
		t.Errorf("Write of an oversized key: panicked with %v, want a message naming the limit", got)
	}
}

// TestSyncWritesOneBatchOfWhatChanged: a Sync is one frame however many
// writes it covers (group commit), a key written many times is written
// once, Appends write only what they added, and a Sync with nothing to
// write writes nothing.
func TestSyncWritesOneBatchOfWhatChanged(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	seg := filepath.Join(d.dir, d.segName)
	for i := range 100 {
		d.Write(fmt.Sprint("k", i%10), []byte(strings.Repeat("v", 100)))
	}
	d.Sync()
	b := logBytes(t, seg)
	if n := countFrames(t, b); n != 1 || d.seq != 1 {
		t.Errorf("100 writes and a Sync made %d frames, %d batches; want 1, 1", n, d.seq)
	}
	if limit := 10 * (100 + 10); len(b) > limit {
		t.Errorf("100 writes to 10 keys made a %d-byte batch, want at most %d: overwrites were not coalesced", len(b), limit)
	}
	before := len(b)
	for range 10 {
		d.Append("k0", []byte(strings.Repeat("a", 1000)))
		d.Sync()
	}
	b = logBytes(t, seg)
	if grew, limit := len(b)-before, 10*(1000+40); grew > limit {
		t.Errorf("10 Syncs of 1000-byte Appends grew the log by %d bytes, want at most %d: Appends rewrote the value", grew, limit)
	}
	before, seq := len(b), d.seq
	d.Sync()
	d.Write("new", nil)
	d.Delete("new")
	d.Sync()
	if b = logBytes(t, seg); len(b) != before || d.seq != seq {
		t.Errorf("Syncs with nothing to write grew the log from %d to %d bytes, batch %d to %d", before, len(b), seq, d.seq)
	}
}

// TestConcurrentUse runs writers, readers and syncers at once; run with
// -race, it checks that the Disk is safe for concurrent use.
func TestConcurrentUse(t *testing.T) {
	d := open(t, t.TempDir(), Options{SegmentBytes: 4 << 10, CompactBytes: 16 << 10})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			key := fmt.Sprint("g", g)
			for i := range 200 {
				switch i % 4 {
				case 0:
					d.Write(key, []byte(fmt.Sprint(i)))
				case 1:
					d.Append(key, []byte("+"))
				case 2:
					if v, ok := d.Read(key); !ok || len(v) == 0 {
						t.Errorf("%s: Read after own write: %q, %v", key, v, ok)
					}
					d.Keys("g")
				case 3:
					d.Sync()
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	want := state(d)
	d = crash(t, d, Options{})
	checkState(t, d, want, "after the goroutines synced")
}

// TestSyncDelaySlowsEveryFsync: with the slow-disk failpoint set, a Sync
// that writes returns no sooner than the delay, and what it wrote is
// durable as ever; a Sync with nothing to write does not wait.
func TestSyncDelaySlowsEveryFsync(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, Options{})
	const delay = 60 * time.Millisecond
	d.SetSyncDelay(delay)
	for i := range 2 {
		d.Write("k", []byte{byte(i)})
		start := time.Now()
		d.Sync()
		if took := time.Since(start); took < delay {
			t.Fatalf("Sync %d with a %v delay returned after %v", i, delay, took)
		}
	}
	start := time.Now()
	d.Sync() // nothing dirty: no fsync, no wait
	if took := time.Since(start); took >= delay {
		t.Errorf("a Sync with nothing to write waited %v", took)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = open(t, dir, Options{})
	if v, ok := d.Read("k"); !ok || len(v) != 1 || v[0] != 1 {
		t.Errorf("after reopening, k = %v, %v; want [1]", v, ok)
	}
}

// TestTruncate: Truncate cuts a value to a prefix, durably once synced, a
// crash before the Sync keeps the value whole, a slice Read handed out
// stays put, and appends after the cut continue from it.
func TestTruncate(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.Append("log", []byte("abcdefgh"))
	d.Write("other", []byte("x"))
	d.Sync()
	held, _ := d.Read("log")
	d.Truncate("log", 3)
	d.Truncate("log", 9)          // past the end: nothing
	d.Truncate("missing", 0)      // a missing key: nothing
	d.Append("log", []byte("XY")) // after the cut
	if string(held) != "abcdefgh" {
		t.Fatalf("a slice from Read changed: %q", held)
	}
	checkState(t, d, map[string]string{"log": "abcXY", "other": "x"}, "before Sync")
	d = crash(t, d, Options{})
	checkState(t, d, map[string]string{"log": "abcdefgh", "other": "x"}, "after a crash before the Sync")
	d.Truncate("log", 3)
	d.Sync()
	d = crash(t, d, Options{})
	checkState(t, d, map[string]string{"log": "abc", "other": "x"}, "after a synced Truncate")
	d.Truncate("log", 0)
	d.Sync()
	d = crash(t, d, Options{})
	if v, ok := d.Read("log"); !ok || len(v) != 0 {
		t.Fatalf("truncated to 0: got %q, %v; want an empty, present value", v, ok)
	}
}
