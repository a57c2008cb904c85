package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/jonboulle/clockwork"
)

const ms = time.Millisecond

// story renders observations compactly: "start#2@6ms", "recv 3#1@10ms",
// "timer t2#1@10ms" (what, incarnation, monotonic reading).
func story(os []obs) []string {
	var out []string
	for _, o := range os {
		switch o.What {
		case "start":
			out = append(out, fmt.Sprintf("start#%d@%v", o.Inc, o.Mono))
		case "recv":
			out = append(out, fmt.Sprintf("recv %d#%d@%v", o.Msg.(testMsg).N, o.Inc, o.Mono))
		case "timer":
			out = append(out, fmt.Sprintf("timer %s#%d@%v", o.Tag, o.Inc, o.Mono))
		}
	}
	return out
}

func checkStory(t *testing.T, what string, got []obs, want []string) {
	t.Helper()
	if g := story(got); !slices.Equal(g, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, g, want)
	}
}

// checkTimerIDsFreed: once a run is quiescent no timer id is still pending
// in the world's table (cancelled, fired, dropped and stale timers all
// released their slot).
func checkTimerIDsFreed(t *testing.T, w *World) {
	t.Helper()
	if len(w.timers.freeList) != len(w.timers.slots) {
		t.Errorf("timer table: %d slots, %d free: want every slot free at quiescence", len(w.timers.slots), len(w.timers.freeList))
	}
}

// TestPauseHoldsDueEventsUntilResume pauses b from 1ms to 10ms. Its timers
// due at 2 and 4ms and messages arriving at 3 and 5ms all happen exactly at
// resume, in their original order, and not before; its clock kept running.
func TestPauseHoldsDueEventsUntilResume(t *testing.T) {
	clocks := []struct {
		name string
		cfg  fakeclock.Config
	}{
		{"perfect clock", fakeclock.Config{}},
		{"offset and fast clock", fakeclock.Config{MonotonicOffset: time.Hour, DriftPPM: 250}},
		{"slow clock", fakeclock.Config{DriftPPM: -900_000}},
	}
	for _, c := range clocks {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
			a, _ := addProbe(t, w, "a")
			b, pb := addProbeClock(t, w, "b", c.cfg)
			clk := w.Clock(b)
			// Timers are set in b's own monotonic time; convert so they fall
			// due at true 2ms, 4ms and 12ms whatever the drift.
			var t12Deadline time.Duration
			pb.onStart = func(p *proc) {
				p.timer(monoFor(clk, 2*ms), "t2")
				p.timer(monoFor(clk, 4*ms), "t4")
				p.timer(monoFor(clk, 12*ms), "t12")
				t12Deadline = clk.Monotonic() + monoFor(clk, 12*ms)
			}
			sendAt(t, w, 2*ms, a, b, testMsg{N: 3}) // arrives at 3ms
			sendAt(t, w, 4*ms, a, b, testMsg{N: 5}) // arrives at 5ms
			var pauseMono, resumeMono time.Duration
			w.At(ms, "pause", func() {
				pauseMono = clk.Monotonic()
				w.Pause(b, 9*ms)
			})
			w.At(10*ms, "read", func() { resumeMono = clk.Monotonic() })

			if got := w.Run(10*ms-1, 1000); got != Deadline {
				t.Fatalf("Run to just before resume: got %v, want %v", got, Deadline)
			}
			if got := w.State(b); got != Paused {
				t.Errorf("state just before resume: got %v, want %v", got, Paused)
			}
			checkStory(t, "before resume", pb.seen(), nil)
			if got, want := len(w.nodes[b].held), 4; got != want {
				t.Errorf("held events just before resume: got %d, want %d", got, want)
			}

			runAll(t, w)
			if got := w.State(b); got != Up {
				t.Errorf("state after resume: got %v, want %v", got, Up)
			}
			at := func(d time.Duration) string { return fmt.Sprint(d) }
			seen := pb.seen()
			if len(seen) != 5 {
				t.Fatalf("b saw %q, want 5 events", story(seen))
			}
			checkStory(t, "b saw", seen[:4], []string{
				"timer t2#1@" + at(resumeMono),
				"recv 3#1@" + at(resumeMono),
				"timer t4#1@" + at(resumeMono),
				"recv 5#1@" + at(resumeMono),
			})
			// A timer due after the pause fires on its own deadline.
			if last := seen[4]; last.Tag != "t12" || last.Mono < t12Deadline || last.Mono > t12Deadline+1 {
				t.Errorf("last event: got %q, want timer t12 at its deadline %v", story(seen[4:]), t12Deadline)
			}
			// The clock ran through the pause: 9ms of true time, scaled by
			// the drift (to within the nanosecond the floor may lose).
			want := pauseMono + time.Duration(int64(9*ms)*(1_000_000+c.cfg.DriftPPM)/1_000_000)
			if d := resumeMono - want; d < -1 || d > 1 {
				t.Errorf("monotonic at resume: got %v, want ≈ %v (pause start %v + 9ms)", resumeMono, want, pauseMono)
			}
			if s := w.Stats(); s.Pauses != 1 || s.Network.Delivered != 2 {
				t.Errorf("stats: got %d pauses, %d delivered; want 1, 2", s.Pauses, s.Network.Delivered)
			}
			checkTimerIDsFreed(t, w)
		})
	}
}

// monoFor returns the AfterFunc delay that makes a timer armed at true time
// 0 on clk fall due at (within a nanosecond after) true time at.
func monoFor(clk *fakeclock.Clock, at time.Duration) time.Duration {
	return time.Duration(int64(at)*(1_000_000+clk.DriftPPM())/1_000_000) + 1
}

func TestPauseWhilePausedExtendsButNeverShortens(t *testing.T) {
	tests := []struct {
		name       string
		second     time.Duration // pause requested at 3ms while paused 1ms–11ms
		wantResume time.Duration
		wantPauses int
	}{
		{"longer extends", 20 * ms, 23 * ms, 2},
		{"shorter does not shorten", 5 * ms, 11 * ms, 1},
		{"same end changes nothing", 8 * ms, 11 * ms, 1},
		{"one nanosecond later extends", 8*ms + 1, 11*ms + 1, 2},
		{"zero does nothing", 0, 11 * ms, 1},
		{"negative does nothing", -ms, 11 * ms, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1})
			b, pb := addProbe(t, w, "b")
			pb.onStart = func(p *proc) { p.timer(2*ms, "t2") }
			w.At(ms, "pause", func() { w.Pause(b, 10*ms) })
			w.At(3*ms, "pause again", func() { w.Pause(b, tt.second) })
			if got := w.Run(tt.wantResume-1, 1000); got != Deadline {
				t.Fatalf("Run: got %v, want %v", got, Deadline)
			}
			if got := w.State(b); got != Paused {
				t.Errorf("state 1ns before %v: got %v, want %v", tt.wantResume, got, Paused)
			}
			runAll(t, w)
			checkStory(t, "b saw", pb.seen(), []string{"timer t2#1@" + fmt.Sprint(tt.wantResume)})
			if got := w.Stats().Pauses; got != tt.wantPauses {
				t.Errorf("Stats().Pauses: got %d, want %d", got, tt.wantPauses)
			}
		})
	}
}

func TestPauseOfZeroDoesNothing(t *testing.T) {
	for _, d := range []time.Duration{0, -ms} {
		w := newWorld(t, Config{Seed: 1})
		b, pb := addProbe(t, w, "b")
		pb.onStart = func(p *proc) { p.timer(ms, "t1") }
		w.Pause(b, d)
		if got := w.State(b); got != Up {
			t.Errorf("Pause(%v): state got %v, want %v", d, got, Up)
		}
		runAll(t, w)
		checkStory(t, fmt.Sprintf("after Pause(%v)", d), pb.seen(), []string{"timer t1#1@1ms"})
	}
}

// TestTimerStoppedWhileHeldNeverFires: Stop on a timer whose event is held
// by a pause still cancels it.
func TestTimerStoppedWhileHeldNeverFires(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	var t2 clockwork.Timer
	pb.onStart = func(p *proc) {
		t2 = p.timer(2*ms, "t2")
		p.timer(3*ms, "t3")
	}
	w.At(ms, "pause", func() { w.Pause(b, 9*ms) })
	var stopped bool
	w.At(5*ms, "stop", func() { stopped = t2.Stop() })
	runAll(t, w)
	if !stopped {
		t.Errorf("Stop of a held timer: got false, want true")
	}
	checkStory(t, "b saw", pb.seen(), []string{"timer t3#1@10ms"})
	checkTimerIDsFreed(t, w)
}

// TestCrashAndRestart: b crashes at 2ms and restarts at 6ms. Its first
// incarnation's timers never fire, not even after the restart; messages to
// it in flight at the crash are dropped, whether they arrive while it is
// down or after it is back; the restarted process is a new one.
func TestCrashAndRestart(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(5 * ms)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	pb.onStart = func(p *proc) {
		if p.inc == 1 {
			p.timer(4*ms, "t4")   // due while crashed
			p.timer(20*ms, "t20") // due after the restart
		}
	}
	sendAt(t, w, 0, a, b, testMsg{N: 1})                     // arrives at 5ms: b is down
	sendAt(t, w, 1500*time.Microsecond, a, b, testMsg{N: 2}) // arrives at 6.5ms: b is back, but it was sent to the old b
	sendAt(t, w, 7*ms, a, b, testMsg{N: 3})                  // arrives at 12ms: to the new b
	var first Process
	w.At(ms, "look", func() { first = w.Process(b) })
	w.At(2*ms, "crash", func() {
		w.Crash(b)
		if got := w.State(b); got != Crashed {
			t.Errorf("state after Crash: got %v, want %v", got, Crashed)
		}
		if got := w.Process(b); got != nil {
			t.Errorf("Process after Crash: got %v, want nil", got)
		}
		if got := w.Clock(b).Pending(); got != 0 {
			t.Errorf("pending timers after Crash: got %d, want 0", got)
		}
	})
	w.At(6*ms, "restart", func() { w.Restart(b) })
	runAll(t, w)

	checkStory(t, "b saw", pb.obs, []string{"start#1@0s", "start#2@6ms", "recv 3#2@12ms"})
	if pb.starts != 2 {
		t.Errorf("factory calls: got %d, want 2", pb.starts)
	}
	if second := w.Process(b); second == nil || second == first {
		t.Errorf("process after restart: got %p, want a new one (first was %p)", second, first)
	}
	s := w.Stats()
	if s.Crashes != 1 || s.Network != (NetworkStats{Sent: 3, Delivered: 1, Dropped: 2}) {
		t.Errorf("stats: got %d crashes, %+v; want 1 crash, 3 sent, 1 delivered, 2 dropped", s.Crashes, s.Network)
	}
	checkTimerIDsFreed(t, w)
}

// TestMessageAtTheRestartInstantBeforeStart: a message sent while b was
// down arrives at the very instant b restarts, after Restart but before the
// new process's Start event. There is no process to take it yet: it is
// dropped (this used to dereference a nil Process).
func TestMessageAtTheRestartInstantBeforeStart(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(5 * ms)})
	w.At(5*ms, "restart", func() { w.Restart(1) }) // queued before the message
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	w.Run(0, 100)
	w.Crash(b)
	send(t, w, a, b, testMsg{N: 1}) // arrives at 5ms, queued after the restart action
	sendAt(t, w, 5*ms, a, b, testMsg{N: 2})
	runAll(t, w)
	checkStory(t, "b saw", pb.obs, []string{"start#1@0s", "start#2@5ms", "recv 2#2@10ms"})
	if got := w.Stats().Network; got != (NetworkStats{Sent: 2, Delivered: 1, Dropped: 1}) {
		t.Errorf("network stats: got %+v, want 2 sent, 1 delivered, 1 dropped", got)
	}
}

// TestCrashWhilePausedDropsHeldEvents: what a pause held dies with the
// process; the old pause's end means nothing to the restarted node.
func TestCrashWhilePausedDropsHeldEvents(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	pb.onStart = func(p *proc) {
		if p.inc == 1 {
			p.timer(2*ms, "t2")
		}
	}
	w.At(ms, "pause", func() { w.Pause(b, 9*ms) }) // until 10ms
	sendAt(t, w, 2*ms, a, b, testMsg{N: 1})        // held at 3ms
	w.At(5*ms, "crash", func() { w.Crash(b) })
	w.At(6*ms, "restart", func() { w.Restart(b) })
	sendAt(t, w, 7*ms, a, b, testMsg{N: 2}) // at 8ms: the new b is up, not paused
	runAll(t, w)
	checkStory(t, "b saw", pb.obs, []string{"start#1@0s", "start#2@6ms", "recv 2#2@8ms"})
	if got := w.Stats().Network; got != (NetworkStats{Sent: 2, Delivered: 1, Dropped: 1}) {
		t.Errorf("network stats: got %+v, want the held message counted as dropped", got)
	}
	checkTimerIDsFreed(t, w)
}

func TestRestartSeesOnlySyncedWrites(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	var restored string
	pb.onStart = func(p *proc) {
		d := p.env.Disk()
		if p.inc == 1 {
			d.Write("k/synced", []byte("v1"))
			d.Write("k/deleted", []byte("x"))
			d.Sync()
			d.Write("k/synced", []byte("v2")) // overwrite, unsynced
			d.Write("k/unsynced", []byte("u"))
			d.Delete("k/deleted") // unsynced delete
			return
		}
		v, _ := d.Read("k/synced")
		restored = string(v)
	}
	runAll(t, w)
	w.Crash(b)
	w.Restart(b)
	runAll(t, w)
	if pb.starts != 2 {
		t.Fatalf("factory calls: got %d, want 2", pb.starts)
	}
	if got, want := pb.obs[1].Keys, []string{"k/deleted", "k/synced"}; !slices.Equal(got, want) {
		t.Errorf("keys the restarted process saw: got %q, want %q", got, want)
	}
	if restored != "v1" {
		t.Errorf("k/synced after restart: got %q, want %q", restored, "v1")
	}
}

func TestRestartOfLiveNodeAndCrashOfCrashedNodeDoNothing(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, pb := addProbe(t, w, "b")
	runAll(t, w)
	p := w.Process(b)
	w.Restart(b)
	runAll(t, w)
	if pb.starts != 1 || w.Process(b) != p {
		t.Errorf("Restart of a live node: got %d starts, want 1 and the same process", pb.starts)
	}
	w.Crash(b)
	w.Crash(b)
	if got := w.Stats().Crashes; got != 1 {
		t.Errorf("Crash twice: got %d crashes, want 1", got)
	}
	w.Restart(b)
	w.Restart(b)
	runAll(t, w)
	if pb.starts != 2 {
		t.Errorf("Restart twice: got %d starts, want 2", pb.starts)
	}
}

// TestPauseOfCrashedNodeDoesNothing: the pause is not recorded and does not
// survive into the next incarnation.
func TestPauseOfCrashedNodeDoesNothing(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	w.At(ms, "crash", func() {
		w.Crash(b)
		w.Pause(b, 10*ms)
		if got := w.State(b); got != Crashed {
			t.Errorf("state after pausing a crashed node: got %v, want %v", got, Crashed)
		}
	})
	w.At(2*ms, "restart", func() { w.Restart(b) })
	sendAt(t, w, 3*ms, a, b, testMsg{N: 1}) // arrives at 4ms, inside the would-be pause
	runAll(t, w)
	checkStory(t, "b saw", pb.obs, []string{"start#1@0s", "start#2@2ms", "recv 1#2@4ms"})
	if got := w.Stats().Pauses; got != 0 {
		t.Errorf("Stats().Pauses: got %d, want 0", got)
	}
}

// TestMessageSentToACrashedNodeIsDropped: a message sent while b is down
// and arriving while it is still down reaches no one.
func TestMessageSentToACrashedNodeIsDropped(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	w.At(ms, "crash", func() { w.Crash(b) })
	sendAt(t, w, 2*ms, a, b, testMsg{N: 1}) // arrives at 3ms: still down
	w.At(5*ms, "restart", func() { w.Restart(b) })
	sendAt(t, w, 6*ms, a, b, testMsg{N: 2})
	runAll(t, w)
	checkStory(t, "b saw", pb.obs, []string{"start#1@0s", "start#2@5ms", "recv 2#2@7ms"})
	if got := w.Stats().Network; got != (NetworkStats{Sent: 2, Delivered: 1, Dropped: 1}) {
		t.Errorf("network stats: got %+v, want 2 sent, 1 delivered, 1 dropped", got)
	}
}

// TestStoppedTimerLeavesNoTrace: a timer stopped before it is due is not an
// event of the run: the hash is that of a run which never armed it.
func TestStoppedTimerLeavesNoTrace(t *testing.T) {
	run := func(arm bool) (uint64, string) {
		var tr bytes.Buffer
		w := newWorld(t, Config{Seed: 1, Trace: &tr})
		_, pb := addProbe(t, w, "b")
		var tm clockwork.Timer
		pb.onStart = func(p *proc) {
			if arm {
				tm = p.timer(5*ms, "t5")
			}
		}
		w.At(ms, "stop", func() {
			if arm && !tm.Stop() {
				t.Errorf("Stop of a pending timer: got false, want true")
			}
		})
		runAll(t, w)
		checkStory(t, "b saw", pb.seen(), nil)
		checkTimerIDsFreed(t, w)
		return w.Hash(), tr.String()
	}
	h1, tr1 := run(true)
	h0, _ := run(false)
	if strings.Contains(tr1, "event=timer") {
		t.Errorf("trace shows the stopped timer:\n%s", tr1)
	}
	if h1 != h0 {
		t.Errorf("hash with a stopped timer %#x, without the timer %#x: want equal", h1, h0)
	}
}
