package filedisk

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitDone waits for ch to close, failing the test after 10 s.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not done in 10 s", what)
	}
}

// TestSyncThenIsDurableWhenDoneAndInOrder: writes go on while a slow
// fsync runs; every SyncThen's done runs once, in order, after its
// batch is durable, and a crash then keeps exactly what they covered.
func TestSyncThenIsDurableWhenDoneAndInOrder(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.SetSyncDelay(5 * time.Millisecond)
	const n = 40
	var mu sync.Mutex
	var order []int
	all := make(chan struct{})
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprint(i)
		d.Write(k, []byte(v))
		d.Append("log", []byte{byte(i)})
		want[k] = v
		if d.SyncThen(func() {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, i)
			if len(order) == n {
				close(all)
			}
		}) {
			t.Fatalf("SyncThen %d with writes to make durable reported them durable already", i)
		}
	}
	waitDone(t, all, "40 SyncThen")
	mu.Lock()
	if !slices.IsSorted(order) || len(order) != n {
		t.Errorf("done ran in the order %v, want 0..%d", order, n-1)
	}
	mu.Unlock()
	log := make([]byte, n)
	for i := range log {
		log[i] = byte(i)
	}
	want["log"] = string(log)
	d.Write("unsynced", []byte("x"))
	d.mu.Lock()
	d.waitIdle()
	seq := d.seq
	d.mu.Unlock()
	if seq != n {
		t.Errorf("the log holds %d batches, want one per SyncThen: %d", seq, n)
	}
	d = crash(t, d, Options{})
	checkState(t, d, want, "after a crash")
}

// TestSyncWaitsForTheSyncThenBeforeIt: a Sync returns only once the
// batches of earlier SyncThen calls are durable and their done has run.
func TestSyncWaitsForTheSyncThenBeforeIt(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	d.SetSyncDelay(50 * time.Millisecond)
	d.Write("a", []byte("1"))
	var ran bool
	var mu sync.Mutex
	if d.SyncThen(func() { mu.Lock(); ran = true; mu.Unlock() }) {
		t.Fatal("SyncThen of a write reported it durable already")
	}
	d.Write("b", []byte("2"))
	d.Sync()
	mu.Lock()
	if !ran {
		t.Error("Sync returned before the done of the SyncThen before it ran")
	}
	mu.Unlock()
	d = crash(t, d, Options{})
	checkState(t, d, map[string]string{"a": "1", "b": "2"}, "after a crash")
}

// TestSyncThenWithNothingNewIsDurableAtOnce: with nothing written since
// the last sync and nothing in flight, SyncThen reports true and never
// calls done; with a batch in flight, even an empty one waits for it.
func TestSyncThenWithNothingNewIsDurableAtOnce(t *testing.T) {
	d := open(t, t.TempDir(), Options{})
	if !d.SyncThen(func() { t.Error("done called for a SyncThen reported durable") }) {
		t.Fatal("SyncThen with nothing written reported a sync in flight")
	}
	d.SetSyncDelay(30 * time.Millisecond)
	d.Write("a", []byte("1"))
	first, second := make(chan struct{}), make(chan struct{})
	d.SyncThen(func() { close(first) })
	if d.SyncThen(func() { close(second) }) {
		t.Fatal("an empty SyncThen behind a batch in flight reported durable at once")
	}
	waitDone(t, second, "the empty SyncThen")
	select {
	case <-first:
	default:
		t.Error("the empty SyncThen's done ran before the one ahead of it")
	}
}

// TestSyncThenCompactsInLine: once the log has outgrown its bounds, a
// SyncThen syncs and compacts in line (compaction needs the log idle) and
// reports the writes durable.
func TestSyncThenCompactsInLine(t *testing.T) {
	opts := Options{SegmentBytes: 4 << 10, CompactBytes: 16 << 10}
	d := open(t, t.TempDir(), opts)
	value := make([]byte, 1<<10)
	inline := 0
	for i := range 200 {
		d.Write("k", append(value[:len(value)-1], byte(i)))
		done := make(chan struct{})
		if d.SyncThen(func() { close(done) }) {
			inline++
			continue
		}
		waitDone(t, done, "a SyncThen")
	}
	d.mu.Lock()
	size, segs := d.logSize, len(d.segments)
	d.mu.Unlock()
	if inline == 0 || size > 2*opts.CompactBytes {
		t.Errorf("200 rewrites of a 1 KiB value: %d SyncThen compacted in line, the log is %d bytes in %d segments", inline, size, segs)
	}
	d = crash(t, d, opts)
	if v, ok := d.Read("k"); !ok || v[len(v)-1] != 199 {
		t.Errorf("after a crash k ends in %v, want 199", v[len(v)-1:])
	}
}
