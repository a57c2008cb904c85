package sim

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runaway is a livelocked process, in each of the ways one grows: it
// forks every message it receives into two, sends without end within one
// event, appends to its log without end, or floods a peer.
func runaway(t *testing.T, w *World, how string) {
	t.Helper()
	a, pa := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	switch how {
	case "fork":
		pa.onStart = func(p *proc) { p.env.Send(a, testMsg{N: 1}) }
		pa.onRecv = func(p *proc, _ NodeID, _ Message) {
			p.env.Send(a, testMsg{N: 1})
			p.env.Send(a, testMsg{N: 2})
		}
	case "loop":
		pa.onStart = func(p *proc) {
			for { // one event that never ends but for the limit
				p.env.Send(b, testMsg{N: 1})
			}
		}
	case "log":
		pa.onStart = func(p *proc) {
			var tick func()
			tick = func() {
				p.env.Disk().Append("log", make([]byte, 1000))
				p.env.Disk().Sync()
				p.env.Clock().AfterFunc(time.Microsecond, tick)
			}
			tick()
		}
	case "flood": // b is paused: what reaches it is held
		w.Pause(b, time.Hour)
		pa.onStart = func(p *proc) {
			var tick func()
			tick = func() {
				p.env.Send(b, testMsg{N: 1})
				p.env.Clock().AfterFunc(ms, tick) // few in flight: the held ones pile up
			}
			tick()
		}
	}
	_ = pb
}

func TestLimitsStopARunawayRun(t *testing.T) {
	tests := []struct {
		how    string
		limits Limits
		want   string // Cut().Limit
	}{
		{"fork", Limits{Pending: 1000}, "pending events"},
		{"loop", Limits{Pending: 1000}, "pending events"},
		{"flood", Limits{Pending: 1000}, "pending events"},
		{"log", Limits{DiskBytes: 64 << 10}, "disk bytes of node a"},
	}
	for _, tt := range tests {
		t.Run(tt.how, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms), Limits: tt.limits})
			runaway(t, w, tt.how)
			if got := w.Run(time.Hour, 200_000); got != Exhausted {
				t.Fatalf("outcome: got %v, want %v", got, Exhausted)
			}
			cut := w.Cut()
			if cut == nil || cut.Limit != tt.want {
				t.Fatalf("Cut: got %+v, want the limit %q", cut, tt.want)
			}
			if cut.Step != w.Step() || cut.At != w.Now() {
				t.Errorf("Cut at step %d, %v; the world stopped at step %d, %v", cut.Step, cut.At, w.Step(), w.Now())
			}
			if p := w.queue.len() + w.parked; p > max(tt.limits.Pending, DefaultPending) {
				t.Errorf("%d events wait, above the limit", p)
			}
			if d := w.Disk(0).Bytes(); d > max(tt.limits.DiskBytes, DefaultDiskBytes) {
				t.Errorf("the disk holds %d bytes, above the limit", d)
			}
			step := w.Step()
			if got := w.Run(2*time.Hour, 1_000_000); got != Exhausted || w.Step() != step {
				t.Errorf("Run after the cut: got %v at step %d, want %v at step %d", got, w.Step(), Exhausted, step)
			}
			want := fmt.Sprintf("the limit of %d %s was reached at step %d", cut.Max, tt.want, step)
			if !strings.Contains(cut.Error(), want) {
				t.Errorf("error %q does not say %q", cut.Error(), want)
			}
		})
	}
}

// TestLimitsAreDeterministic: the cut falls at the same step and time on
// every run of a seed, since the limits count events and bytes.
func TestLimitsAreDeterministic(t *testing.T) {
	var cuts [2]LimitError
	for i := range cuts {
		w := newWorld(t, Config{Seed: 3, Network: DefaultNetwork(), Limits: Limits{Pending: 500}})
		runaway(t, w, "fork")
		w.Run(time.Hour, 1_000_000)
		cuts[i] = *w.Cut()
	}
	if cuts[0] != cuts[1] {
		t.Errorf("two runs of one seed were cut at %+v and %+v", cuts[0], cuts[1])
	}
}

func TestExhaustByTheHarness(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	_, pb := addProbe(t, w, "b")
	pb.onStart = func(p *proc) { p.timer(time.Second, "late") }
	w.At(5*ms, "count", func() { w.Exhaust("history records", 7) })
	if got := w.Run(time.Hour, 100); got != Exhausted {
		t.Fatalf("outcome: got %v, want %v", got, Exhausted)
	}
	if c := w.Cut(); c.Limit != "history records" || c.Max != 7 || c.At != 5*ms {
		t.Errorf("Cut: got %+v, want history records, 7, at 5ms", c)
	}
	if len(pb.seen()) != 0 {
		t.Errorf("the timer fired after the cut: %v", pb.seen())
	}
}

func TestDiskBytesFollowsTheCurrentValues(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	id, _ := addProbe(t, w, "a")
	d := w.Disk(id)
	want := func(n int, after string) {
		t.Helper()
		if d.Bytes() != n {
			t.Errorf("after %s: Bytes() = %d, want %d", after, d.Bytes(), n)
		}
	}
	d.Write("k", make([]byte, 10))
	d.Append("log", make([]byte, 5))
	d.Sync()
	want(15, "write and append")
	d.Write("k", make([]byte, 3))
	d.Append("log", make([]byte, 7))
	d.Delete("gone")
	want(15, "an overwrite and an append")
	w.Crash(id)
	want(15, "a crash back to the synced 10 + 5")
	w.Restart(id)
	d.Append("log", make([]byte, 10))
	w.CrashTorn(id, 0.5)
	want(20, "a torn append keeping 5 of 10")
	d.Delete("k")
	d.Sync()
	want(10, "a delete")
}

func TestPanicCarriesStepNodeAndTime(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(w *World, b NodeID, pb *probe)
		wantNode string
		wantStep uint64
		wantAt   time.Duration
		wantVal  string
	}{
		{"in a process", func(w *World, b NodeID, pb *probe) {
			pb.onStart = func(p *proc) { p.timer(7*ms, "t") }
			pb.onRecv = func(*proc, NodeID, Message) { panic("boom") }
			sendAt(t, w, 10*ms, b, b, testMsg{N: 1})
		}, "b", 4, 11 * ms, "boom"},
		{"in a harness action", func(w *World, b NodeID, pb *probe) {
			w.At(3*ms, "explode", func() { panic(errors.New("bad action")) })
		}, "action explode", 2, 3 * ms, "bad action"},
		{"in the simulator", func(w *World, b NodeID, pb *probe) {
			w.At(2*ms, "misuse", func() { w.Crash(99) })
		}, "action misuse", 2, 2 * ms, "no node 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []string
			for range 2 {
				w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
				b, pb := addProbe(t, w, "b")
				tt.setup(w, b, pb)
				p := runToPanic(t, w)
				if p.Node != tt.wantNode || p.Step != tt.wantStep || p.At != tt.wantAt {
					t.Errorf("panic at node %q step %d %v, want %q step %d %v", p.Node, p.Step, p.At, tt.wantNode, tt.wantStep, tt.wantAt)
				}
				if !strings.Contains(fmt.Sprint(p.Value), tt.wantVal) {
					t.Errorf("value %v, want %q", p.Value, tt.wantVal)
				}
				if !strings.Contains(string(p.Stack), "sim.TestPanicCarriesStepNodeAndTime") {
					t.Errorf("the stack does not reach the panicking code:\n%s", p.Stack)
				}
				errs = append(errs, p.Error())
			}
			if errs[0] != errs[1] {
				t.Errorf("one seed panicked as %q, then %q", errs[0], errs[1])
			}
		})
	}
}

// runToPanic runs w and returns the *Panic it must end with.
func runToPanic(t *testing.T, w *World) (p *Panic) {
	t.Helper()
	defer func() {
		var ok bool
		if p, ok = recover().(*Panic); !ok {
			t.Fatalf("Run did not panic with a *Panic")
		}
	}()
	w.Run(time.Hour, 1000)
	return nil
}

// TestTraceBytesLimit: a trace stops at its bound with a line that says
// where, keeps only whole lines, and the run goes on unchanged.
func TestTraceBytesLimit(t *testing.T) {
	var full, cut bytes.Buffer
	w1 := pingPong(t, 7, &full, "x")
	w2 := buildPingPongLimits(t, 7, &cut, "x", Limits{TraceBytes: 3000})
	if got := w2.Run(100*ms, 100_000); got != Deadline {
		t.Fatalf("Run: got %v, want %v", got, Deadline)
	}
	if w1.Hash() != w2.Hash() || w1.Step() != w2.Step() {
		t.Errorf("the cut trace changed the run: hash %#x step %d, want %#x step %d", w2.Hash(), w2.Step(), w1.Hash(), w1.Step())
	}
	lines := strings.SplitAfter(cut.String(), "\n")
	last := lines[len(lines)-2]
	body := strings.TrimSuffix(cut.String(), last)
	if len(body) > 3000 || !strings.HasPrefix(full.String(), body) || !strings.HasSuffix(body, "\n") {
		t.Errorf("the trace before the cut (%d bytes) is not whole lines of the full trace under 3000 bytes", len(body))
	}
	want := regexp.MustCompile(`^trace cut: the limit of 3000 trace bytes \(sim.Limits.TraceBytes\) was reached at step \d+, t=[0-9.]+s; the run went on untraced\n$`)
	if !want.MatchString(last) || full.Len() < 2*3000 {
		t.Errorf("last line %q (of a %d-byte full trace), want it to say where the trace was cut", last, full.Len())
	}
}
