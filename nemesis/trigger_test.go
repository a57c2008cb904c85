package nemesis

import (
	"strings"
	"testing"
	"time"
)

func TestTriggerCheckNamesTheProblem(t *testing.T) {
	for _, c := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: Pause, Node: "a", Duration: Duration(ms), Within: Duration(ms)}, "within and after only apply to a trigger"},
		{Op{Kind: Pause, Node: "a", Duration: Duration(ms), When: "lunch", Within: Duration(ms)}, `unknown moment "lunch"`},
		{Op{Kind: Pause, Node: "a", Duration: Duration(ms), When: MomentAcquired}, "a trigger needs within"},
		{Op{Kind: Pause, Node: Subject, Duration: Duration(ms)}, "selector @subject only works as the node of a trigger"},
		{Op{Kind: Heal, When: MomentAcquired, Within: Duration(ms)}, "when, within does not apply to heal"},
	} {
		err := Schedule{c.op}.Validate(append(chatNodes, Subject))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.op, err, c.want)
		}
	}
	ok := Op{Kind: Crash, Node: Subject, Duration: Duration(ms), When: MomentVoted, Within: Duration(time.Second), After: Duration(ms)}
	if err := (Schedule{ok}).Validate(chatNodes); err != nil {
		t.Errorf("%v: %v", ok, err)
	}
	if got, want := ok.String(), "crash @subject for 1ms when voted within 1s after 1ms"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestCheckUndoneCountsTheTriggerWindow: a trigger can fire as late as
// At+Within+After, so its fault lasts until then plus its duration, and a
// heal before its window closed does not undo it.
func TestCheckUndoneCountsTheTriggerWindow(t *testing.T) {
	trig := Op{At: Duration(time.Second), Kind: Pause, Node: Subject, Duration: Duration(time.Second), When: MomentAcquired, Within: Duration(time.Second)}
	if err := (Schedule{trig}).CheckUndone(3 * time.Second); err != nil {
		t.Errorf("a pause that ends by 3s: %v", err)
	}
	if err := (Schedule{trig}).CheckUndone(2500 * time.Millisecond); err == nil {
		t.Error("a pause that may last until 3s passed CheckUndone(2.5s)")
	}
	iso := Op{At: Duration(time.Second), Kind: Isolate, Node: Subject, When: MomentGranted, Within: Duration(time.Second)}
	early := Schedule{iso, {At: Duration(1500 * time.Millisecond), Kind: Heal}}
	if err := early.CheckUndone(3 * time.Second); err == nil {
		t.Error("a heal inside the trigger's window counted as undoing it")
	}
	late := Schedule{iso, {At: Duration(2 * time.Second), Kind: Heal}}
	if err := late.CheckUndone(3 * time.Second); err != nil {
		t.Errorf("a heal after the window: %v", err)
	}
}

// TestGenerateDrawsEveryAim: over many seeds the aimed kind draws every
// aim, and every schedule it draws is valid and undone by the phase's end.
func TestGenerateDrawsEveryAim(t *testing.T) {
	o := allOn(replicated)
	for _, k := range faultKinds {
		if k.name != "aimed" {
			k.fault(&o).Enabled = false
		}
	}
	seen := map[MomentKind]int{}
	leaderCrash, majority, tornAppend := 0, 0, 0
	for seed := range uint64(300) {
		s := Generate(rng(seed), o, replicated, safety)
		if err := s.ValidateFor(replicated); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := s.CheckUndone(safety); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		crashesAt := map[Duration]int{}
		for _, op := range s {
			seen[op.When]++
			if op.Kind == Crash && op.Node == Leader {
				leaderCrash++
			}
			if op.Kind == Crash && op.When == MomentGranted {
				crashesAt[op.At]++
			}
			if op.Kind == Crash && op.When == MomentAppended && op.Mode == CrashTorn {
				if op.After != 0 || op.Keep <= 0 || op.Keep >= 1 {
					t.Errorf("seed %d: torn crash after an append %+v: want it at the append, keeping part of the write", seed, op)
				}
				tornAppend++
			}
		}
		for _, n := range crashesAt {
			if n >= len(replicated.Servers)/2+1 {
				majority++
			}
		}
	}
	for _, m := range []MomentKind{MomentAcquired, MomentGranted, MomentVoted, MomentAppended} {
		if seen[m] == 0 {
			t.Errorf("no trigger on %s in 300 seeds", m)
		}
	}
	if leaderCrash == 0 || majority == 0 || tornAppend == 0 {
		t.Errorf("leader crashes %d, majority crashes %d, torn crashes at an append %d: want some of each", leaderCrash, majority, tornAppend)
	}
}
