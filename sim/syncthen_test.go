package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/process"
)

// TestSyncThen: on a slow disk a SyncThen does not stall the node; its
// done runs as an event of the node once the node's sync delay has
// passed, after the syncs before it (one at a time); a crash keeps the
// syncs completed by then and loses the rest, whose done never runs; a
// Sync covers the writes of the SyncThen calls in flight; on a fast disk
// with nothing in flight, SyncThen is a Sync and reports true.
func TestSyncThen(t *testing.T) {
	type kv = map[string]string
	tests := []struct {
		name    string
		delay   time.Duration
		crashAt time.Duration // 0: no crash
		sync3   bool          // the third message's write is synced with Sync
		doneAt  []time.Duration
		want    kv // on disk at the end
	}{
		{"fast disk", 0, 0, false, nil, kv{"k1": "1", "k2": "2"}},
		{"slow disk, in order", 10 * ms, 0, false, []time.Duration{11 * ms, 21 * ms}, kv{"k1": "1", "k2": "2"}},
		{"a crash between them", 10 * ms, 15 * ms, false, []time.Duration{11 * ms}, kv{"k1": "1"}},
		{"a crash before the first", 10 * ms, 5 * ms, false, nil, kv{}},
		// The Sync of the third write (at 3 ms) stalls the node until 13 ms
		// and covers the second SyncThen's write, due only at 21 ms; the
		// first's done, due at 11 ms, waits for the stall to end.
		{"a Sync covers them", 10 * ms, 14 * ms, true, []time.Duration{13 * ms}, kv{"k1": "1", "k2": "2", "k3": "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
			a, _ := addProbe(t, w, "a")
			b, pb := addProbe(t, w, "b")
			w.SetSyncDelay(b, tt.delay)
			var doneAt []time.Duration
			pb.onRecv = func(p *proc, from NodeID, m Message) {
				n := m.(testMsg).N
				d := p.env.Disk()
				d.Write("k"+string(rune('0'+n)), []byte{byte('0' + n)})
				if n == 3 {
					if tt.sync3 {
						d.Sync()
					}
					return
				}
				synced := d.(process.SyncNotifier).SyncThen(func() { doneAt = append(doneAt, w.Now()) })
				if synced != (tt.delay == 0) {
					t.Errorf("SyncThen at %v reported %v, want %v (delay %v)", w.Now(), synced, tt.delay == 0, tt.delay)
				}
				if s := w.State(b); s != Up {
					t.Errorf("right after SyncThen the node is %v, want up", s)
				}
			}
			sendAt(t, w, 0, a, b, testMsg{N: 1})
			sendAt(t, w, ms, a, b, testMsg{N: 2})
			sendAt(t, w, 2*ms, a, b, testMsg{N: 3})
			if tt.crashAt > 0 {
				w.At(tt.crashAt, "crash", func() { w.Crash(b) })
			}
			runAll(t, w)
			if !slices.Equal(doneAt, tt.doneAt) {
				t.Errorf("done ran at %v, want %v", doneAt, tt.doneAt)
			}
			d := w.Disk(b)
			if tt.crashAt == 0 {
				w.Crash(b) // what is durable at the end
			}
			got := kv{}
			for _, k := range d.Keys("") {
				got[k] = read(d, k)
			}
			if tt.crashAt == 0 && !tt.sync3 {
				delete(tt.want, "k3") // never synced
			}
			if !equalKV(got, tt.want) {
				t.Errorf("on disk after the crash: %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSyncThenKeepsTheValueItCovered: a write made after a SyncThen is not
// made durable by it, even to the same key: a crash after the first sync
// completes keeps the value that sync covered.
func TestSyncThenKeepsTheValueItCovered(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	w.SetSyncDelay(b, 10*ms)
	pb.onStart = func(p *proc) {
		d := p.env.Disk()
		d.Append("log", []byte("one"))
		d.(process.SyncNotifier).SyncThen(func() {})
		d.Append("log", []byte("two"))
		d.(process.SyncNotifier).SyncThen(func() {})
	}
	w.At(15*ms, "crash", func() { w.Crash(b) })
	runAll(t, w)
	if got := read(w.Disk(b), "log"); got != "one" {
		t.Errorf("after a crash between the syncs the log holds %q, want %q", got, "one")
	}
}

// TestSyncThenCallsWhileASyncRunsShareTheNext: the SyncThen calls made
// while a sync runs share the one after it, as a disk's next fsync covers
// every write made before it begins: three calls at 1, 2 and 3 ms on a
// 10 ms disk complete at 11, 21 and 21 ms.
func TestSyncThenCallsWhileASyncRunsShareTheNext(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	w.SetSyncDelay(b, 10*ms)
	var doneAt []time.Duration
	pb.onRecv = func(p *proc, from NodeID, m Message) {
		p.env.Disk().Write("k", []byte{byte(m.(testMsg).N)})
		p.env.Disk().(process.SyncNotifier).SyncThen(func() { doneAt = append(doneAt, w.Now()) })
	}
	for i := range 3 {
		sendAt(t, w, time.Duration(i)*ms, a, b, testMsg{N: uint64(i) + 1})
	}
	runAll(t, w)
	if want := []time.Duration{11 * ms, 21 * ms, 21 * ms}; !slices.Equal(doneAt, want) {
		t.Errorf("done ran at %v, want %v", doneAt, want)
	}
	if got := read(w.Disk(b), "k"); got != "\x03" {
		t.Errorf("k = %q after the shared sync, want the third write", got)
	}
}

// TestSyncThenWaitsForASlowSyncOfItsEvent: a SyncThen after slow Syncs of
// the same event begins when they end, as a disk syncs one at a time: on
// a 10 ms disk two Syncs stall the node until 20 ms, and a SyncThen made
// after them completes at 30 ms — a crash at 25 ms keeps the Syncs'
// writes and loses its.
func TestSyncThenWaitsForASlowSyncOfItsEvent(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	w.SetSyncDelay(b, 10*ms)
	pb.onStart = func(p *proc) {
		d := p.env.Disk()
		d.Write("k1", []byte("1"))
		d.Sync()
		d.Write("k2", []byte("2"))
		d.Sync()
		d.Write("k3", []byte("3"))
		d.(process.SyncNotifier).SyncThen(func() { t.Error("done ran although the crash came before its sync completed") })
	}
	w.At(25*ms, "crash", func() { w.Crash(b) })
	runAll(t, w)
	d := w.Disk(b)
	if got := d.Keys(""); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Errorf("after a crash at 25 ms the disk holds %v, want [k1 k2]", got)
	}
}

// TestTornCrashNeverTearsADurableWrite: once the SyncThen that covered
// the last write has completed, a torn crash keeps that write whole, even
// with a later, empty sync still in flight.
func TestTornCrashNeverTearsADurableWrite(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	w.SetSyncDelay(b, 10*ms)
	pb.onStart = func(p *proc) {
		d := p.env.Disk().(interface {
			process.Disk
			process.SyncNotifier
		})
		d.Append("log", []byte("abcdef"))
		d.SyncThen(func() {}) // completes at 10 ms
		d.SyncThen(func() {}) // nothing new: completes at 20 ms
	}
	w.At(15*ms, "torn crash", func() { w.CrashTorn(b, 0.5) })
	runAll(t, w)
	if got := read(w.Disk(b), "log"); got != "abcdef" {
		t.Errorf("a torn crash after the write's sync completed left %q, want it whole", got)
	}
}
