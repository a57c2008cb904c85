package live

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// TestLiveOpsUndoWhatUndoesItself: a live run cannot see the simulator's
// moments, so triggers are set apart; a crash or isolation with a duration
// gets the restart or heal that the simulator would have carried out.
func TestLiveOpsUndoWhatUndoesItself(t *testing.T) {
	d := func(ms int) nemesis.Duration { return nemesis.Duration(time.Duration(ms) * time.Millisecond) }
	s := nemesis.Schedule{
		{At: d(100), Kind: nemesis.Crash, Node: "n2", Duration: d(50)},
		{At: d(200), Kind: nemesis.Crash, Node: nemesis.Leader, Duration: d(50)},
		{At: d(300), Kind: nemesis.Isolate, Node: "n1", Duration: d(20)},
		{At: d(400), Kind: nemesis.Pause, Node: nemesis.Subject, Duration: d(10), When: nemesis.MomentAcquired, Within: d(100)},
		{At: d(500), Kind: nemesis.Crash, Node: "n3"},
	}
	ops, triggers := liveOps(s, nil)
	if len(triggers) != 1 || triggers[0].When != nemesis.MomentAcquired {
		t.Fatalf("triggers %v, want the pause", triggers)
	}
	want := []string{
		"100ms crash n2 for 50ms", "150ms restart n2", "200ms crash @leader for 50ms", "250ms restart @crashed",
		"300ms isolate n1 for 20ms", "320ms heal", "500ms crash n3",
	}
	if len(ops) != len(want) {
		t.Fatalf("ops %v, want %v", ops, want)
	}
	for i, op := range ops {
		if got := time.Duration(op.At).String() + " " + op.String(); got != want[i] {
			t.Errorf("op %d: %q, want %q", i, got, want[i])
		}
	}
}
