package live

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// TestLiveOpsUndoWhatUndoesItself: triggers are set apart (they are armed
// and fire on the clients' moments); a crash or isolation with a duration
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

// TestLiveCoversEveryKind: the live runner carries out every fault kind
// of the vocabulary or says why no live target can (a kind added to
// nemesis without either fails here, as it does in the simulator's
// injector).
func TestLiveCoversEveryKind(t *testing.T) {
	if err := nemesis.Uncovered(liveNemesis{}); err != nil {
		t.Fatal(err)
	}
}

// TestTriggersFireOnClientMoments: a pause aimed at the moment a client
// sends its fenced write is carried out on that client, before the write
// leaves it (the write it was sending returns only after the pause: a
// holder really paused at its write), and the fenced reference passes; a
// shorter pause of the same client on the same moment does not cut it
// short (a pause while paused extends, never shortens, as in the
// simulator); a trigger on a moment no live client reports is not
// applicable, with why.
func TestTriggersFireOnClientMoments(t *testing.T) {
	p := kleppmannPlan(t)
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	p.Spec.Duration = d(5 * time.Second)
	pause := 3 * time.Second
	p.Schedule = nemesis.Schedule{
		{At: 0, Kind: nemesis.Pause, Node: nemesis.Subject, Duration: d(pause), When: nemesis.MomentWrite, Within: d(2 * time.Second)},
		{At: 0, Kind: nemesis.Pause, Node: nemesis.Subject, Duration: d(300 * ms), When: nemesis.MomentWrite, Within: d(2 * time.Second), After: d(100 * ms)},
		{At: 0, Kind: nemesis.Pause, Node: nemesis.Subject, Duration: d(pause), When: nemesis.MomentElected, Within: d(2 * time.Second)},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	res := runLive(t, builtin(t, "reference"), p)
	var fired, short *FaultEvent
	for i, ev := range res.Faults {
		switch {
		case ev.Planned.When == nemesis.MomentElected:
			if ev.Outcome != FaultNotApplicable || !strings.Contains(ev.Skipped, "does not report elected moments") {
				t.Errorf("the trigger on elected: %s, want not applicable", ev)
			}
		case ev.Planned.When == nemesis.MomentWrite && ev.Planned.Within == 0 && ev.Planned.Duration == d(pause):
			fired = &res.Faults[i]
		case ev.Planned.When == nemesis.MomentWrite && ev.Planned.Within == 0:
			short = &res.Faults[i]
		default:
			t.Errorf("unexpected fault event %s", ev)
		}
	}
	if fired == nil || fired.Outcome != FaultDone || fired.Node == "" {
		t.Fatalf("faults %v: want the pause fired on a client's write", res.Faults)
	}
	if short == nil || short.Outcome != FaultDone || short.Node != fired.Node {
		t.Fatalf("faults %v: want the shorter pause fired on the same client's write", res.Faults)
	}
	across := false
	for _, o := range res.History.Ops {
		if o.Client == fired.Node && o.Kind == checker.OpWrite && o.Call >= fired.At && o.Call < fired.At+100*ms && (o.Return == 0 || o.Return >= fired.At+pause) {
			across = true
		}
	}
	if !across {
		t.Errorf("no write of %s sent within 100ms after its pause at %v returned after the pause's %v: %+v", fired.Node, fired.At, pause, res.History.Ops)
	}
	if res.Verdict.Kind != checker.VerdictPass {
		t.Errorf("verdict %v: %v; notes %v", res.Verdict.Kind, res.Verdict.Violations, res.Notes)
	}
}

// TestFiredCrashShorterThanItsCarryingOutIsUndone: a crash fired on a
// moment that lasts less than carrying it out takes (a crash of the store
// fetches its apply log first) is still undone — the store restarted at
// once, not left down until the final heal (its restart was dropped, and
// the store stayed down for the rest of the run).
func TestFiredCrashShorterThanItsCarryingOutIsUndone(t *testing.T) {
	p := kleppmannPlan(t)
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	p.Spec.Duration = d(4 * time.Second)
	p.Schedule = nemesis.Schedule{
		{At: 0, Kind: nemesis.Crash, Node: "store", Duration: d(time.Millisecond), When: nemesis.MomentAcquired, Within: d(2 * time.Second)},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	res := runLive(t, builtin(t, "reference"), p)
	var crash, restart *FaultEvent
	for i, ev := range res.Faults {
		switch {
		case ev.Planned.Kind == nemesis.Crash && ev.Outcome == FaultDone:
			crash = &res.Faults[i]
		case ev.Planned.Kind == nemesis.Restart && ev.Node == "store" && ev.Outcome == FaultDone && crash != nil && restart == nil:
			restart = &res.Faults[i]
		}
	}
	if crash == nil || restart == nil {
		t.Fatalf("faults %v: want the store crashed on a moment and restarted after it", res.Faults)
	}
	if restart.At > crash.At+time.Second {
		t.Errorf("the store crashed at %v for 1ms was restarted only at %v", crash.At, restart.At)
	}
}
