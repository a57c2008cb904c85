package sim

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
)

func TestRunOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		timers    []time.Duration // armed at start on one node; "rearm" re-arms 1ms timers forever
		rearm     bool
		until     time.Duration
		limit     uint64
		want      Outcome
		wantNow   time.Duration
		wantSteps uint64
	}{
		{"quiescent", []time.Duration{5 * ms}, false, time.Second, 100, Quiescent, 5 * ms, 2},
		{"quiescent stays at the last event", []time.Duration{ms, 2 * ms}, false, time.Hour, 100, Quiescent, 2 * ms, 3},
		{"deadline advances the clock to until", []time.Duration{5 * ms}, false, 3 * ms, 100, Deadline, 3 * ms, 1},
		{"an event at until still fires", []time.Duration{5 * ms, 6 * ms}, false, 5 * ms, 100, Deadline, 5 * ms, 2},
		{"step limit", nil, true, time.Hour, 10, StepLimit, 9 * ms, 10},
		{"zero limit", nil, true, time.Hour, 0, StepLimit, 0, 0},
		{"deadline wins over a spent limit", []time.Duration{5 * ms}, false, 3 * ms, 1, Deadline, 3 * ms, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, Config{Seed: 1})
			b, pb := addProbe(t, w, "b")
			pb.onStart = func(p *proc) {
				for _, d := range tt.timers {
					p.timer(d, "t")
				}
				if tt.rearm {
					var f func()
					f = func() { p.env.Clock().AfterFunc(ms, f) }
					f()
				}
			}
			got := w.Run(tt.until, tt.limit)
			if got != tt.want {
				t.Errorf("outcome: got %v, want %v", got, tt.want)
			}
			if w.Now() != tt.wantNow {
				t.Errorf("Now: got %v, want %v", w.Now(), tt.wantNow)
			}
			if w.Step() != tt.wantSteps {
				t.Errorf("Step: got %d, want %d", w.Step(), tt.wantSteps)
			}
			if tt.wantSteps > 0 {
				if m := w.Clock(b).Monotonic(); m != tt.wantNow {
					t.Errorf("node clock: got %v, want %v", m, tt.wantNow)
				}
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Quiescent: "quiescent", Deadline: "deadline", StepLimit: "step-limit"} { //detlint:sorted independent checks
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String(): got %q, want %q", o, got, want)
		}
	}
}

// TestRunNeverMovesTimeBack: a deadline before the current time leaves the
// clock where it is.
func TestRunNeverMovesTimeBack(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	b, _ := addProbe(t, w, "b")
	w.At(20*ms, "later", func() {})
	if got := w.Run(10*ms, 100); got != Deadline || w.Now() != 10*ms {
		t.Fatalf("Run(10ms): got %v at %v, want %v at 10ms", got, w.Now(), Deadline)
	}
	if got := w.Run(5*ms, 100); got != Deadline || w.Now() != 10*ms {
		t.Errorf("Run(5ms) after reaching 10ms: got %v at %v, want %v at 10ms", got, w.Now(), Deadline)
	}
	if m := w.Clock(b).Monotonic(); m != 10*ms {
		t.Errorf("node clock: got %v, want 10ms", m)
	}
}

// TestRunInSlicesIsTheSameRun: stopping and resuming Run, on deadlines or
// step limits, does not change what happens.
func TestRunInSlicesIsTheSameRun(t *testing.T) {
	var wholeTrace bytes.Buffer
	whole := pingPong(t, 3, &wholeTrace, "x")
	for _, limit := range []uint64{1, 7, 100} {
		var tr bytes.Buffer
		w := buildPingPong(t, 3, &tr, "x")
		for until := time.Duration(0); until <= 100*ms; until += 3 * ms {
			for w.Run(min(until, 100*ms), limit) == StepLimit {
			}
		}
		w.Run(100*ms, 100_000)
		if w.Hash() != whole.Hash() || w.Step() != whole.Step() || w.Now() != whole.Now() {
			t.Errorf("limit %d: sliced run has hash %#x after %d steps at %v; whole run %#x after %d at %v",
				limit, w.Hash(), w.Step(), w.Now(), whole.Hash(), whole.Step(), whole.Now())
		}
		if !bytes.Equal(tr.Bytes(), wholeTrace.Bytes()) {
			t.Errorf("limit %d: traces differ at byte %d", limit, firstDiff(tr.Bytes(), wholeTrace.Bytes()))
		}
	}
}

func TestAtRunsActionsInOrderAndClampsThePast(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	var got []string
	rec := func(s string) func() { return func() { got = append(got, fmt.Sprintf("%s@%v", s, w.Now())) } }
	w.At(2*ms, "x", rec("x"))
	w.At(ms, "y", rec("y"))
	w.At(2*ms, "z", rec("z"))
	w.At(3*ms, "past", func() {
		w.At(ms, "p", rec("p")) // in the past: runs now, after this action
		rec("past")()
	})
	runAll(t, w)
	want := []string{"y@1ms", "x@2ms", "z@2ms", "past@3ms", "p@3ms"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("actions: got %v, want %v", got, want)
	}
}

func TestAddNodeRejectsBadClock(t *testing.T) {
	w := newWorld(t, Config{Seed: 1})
	_, err := w.AddNode("bad", (&probe{t: t}).factory(), fakeclock.Config{DriftPPM: 1_000_000})
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("AddNode with a bad clock: got %v, want an error naming the node", err)
	}
	if w.Nodes() != 0 {
		t.Errorf("Nodes after a rejected AddNode: got %d, want 0", w.Nodes())
	}
}
