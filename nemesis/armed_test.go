package nemesis

import (
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// chatNodes are the node names of the fault tests' world (nemesis/inject).
var chatNodes = []string{"a", "b", "c", Leader}

func op(at time.Duration, k Kind, node string, d time.Duration) Op {
	return Op{At: Duration(at), Kind: k, Node: node, Duration: Duration(d)}
}

// TestArmedForgetsSpentTriggers: every moment of a run is noticed (each
// append is one), so a trigger that fired or whose window closed leaves the
// armed set for good, and a moment before the next window looks at
// nothing. What fires comes back as the fault it becomes.
func TestArmedForgetsSpentTriggers(t *testing.T) {
	a := Arm(Schedule{
		{At: Duration(300 * ms), Kind: Pause, Node: "c", Duration: Duration(10 * ms), When: MomentGranted, Within: Duration(10 * ms)},
		{At: Duration(100 * ms), Kind: Crash, Node: Subject, Duration: Duration(50 * ms), When: MomentVoted, Within: Duration(100 * ms), After: Duration(5 * ms)},
		{At: Duration(5 * ms), Kind: Heal}, // not a trigger: left out
		{At: Duration(100 * ms), Kind: Pause, Node: "c", Duration: Duration(10 * ms), When: MomentGranted, Within: Duration(10 * ms)},
	})
	if n := len(a.Triggers()); n != 3 || a.Triggers()[0].Kind != Crash {
		t.Fatalf("armed %v, want the 3 triggers in time order (stable)", a.Triggers())
	}
	steps := []struct {
		at    time.Duration
		m     Moment
		fired int
		live  int
	}{
		{50 * ms, Moment{MomentAppended, "a"}, 0, 3},  // before every window: nothing spent
		{105 * ms, Moment{MomentVoted, "b"}, 1, 2},    // the crash fires
		{106 * ms, Moment{MomentVoted, "b"}, 0, 2},    // and only once
		{150 * ms, Moment{MomentAppended, "a"}, 0, 1}, // the first pause's window closed
		{400 * ms, Moment{MomentGranted, "a"}, 0, 0},  // every window closed
	}
	for _, s := range steps {
		fired := a.Notice(s.at, s.m)
		if len(fired) != s.fired || len(a.live) != s.live {
			t.Errorf("at %v: fired %v and %d live, want %d fired and %d live", s.at, fired, len(a.live), s.fired, s.live)
		}
		if len(fired) == 1 {
			want := Op{At: Duration(110 * ms), Kind: Crash, Node: "b", Duration: Duration(50 * ms)}
			if got := fired[0]; got.String() != want.String() || got.At != want.At {
				t.Errorf("fired %+v, want %+v (at the moment plus after, on its subject)", got, want)
			}
		}
	}
}

// partial is a world that carries out pauses only and declares nothing.
type partial struct{}

func (partial) Apply(Op)               {}
func (partial) Implements(k Kind) bool { return k == Pause }
func (partial) Cannot(k Kind) string {
	return map[Kind]string{Crash: "no processes", Pause: "even so"}[k]
}

// TestUncoveredNamesEveryGap is Uncovered's canary: a world that neither
// carries out nor declares a kind, or does both, is named.
func TestUncoveredNamesEveryGap(t *testing.T) {
	err := Uncovered(partial{})
	if err == nil {
		t.Fatal("Uncovered(partial) = nil, want the kinds it leaves out")
	}
	for _, want := range []string{"restart (neither", "slow-disk (neither", "pause (implemented, yet declared impossible: even so)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Uncovered: %v\nwant it to name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "crash") {
		t.Errorf("Uncovered: %v\ncrash is declared impossible: not a gap", err)
	}
}
