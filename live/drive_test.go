package live

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencesim/fencesim/scenario"
	"github.com/fencesim/fencesim/scenario/cycle"
)

// The live runner's workload keeps the lease itself and ends every hold
// with a read and a release: what its client processes need (see
// machineConfig). Each rule is one step of the script; a configuration
// that dropped it answers differently there.
func TestLiveWorkloadKeepsTheLeaseAndReleasesALoss(t *testing.T) {
	const ms = time.Millisecond
	c := scenario.ClientSpec{Name: "c1", Resource: "r", TTL: scenario.Duration(900 * ms), Cycles: 1, WritesPerHold: 3,
		WorkDuration: scenario.Duration(20 * ms), DriftBoundPPM: 1000}
	m, err := cycle.New(machineConfig(c, rand.New(rand.NewPCG(1, 1))))
	if err != nil {
		t.Fatal(err)
	}
	// The safe point: 900 ms − 0.9 ms (1000 ppm) − the 10 ms margin.
	safe := 900*ms - 900*ms/1000 - watchdogMargin
	steps := []struct {
		ev   cycle.Event
		want cycle.ActionKind
	}{
		{cycle.Event{Kind: cycle.Start}, cycle.Wait},
		{cycle.Event{Kind: cycle.Woke}, cycle.Acquire},
		{cycle.Event{Kind: cycle.Refused, Now: 5 * ms}, cycle.Wait}, // backoff and think time jittered (this seed draws above 0), checked below
		{cycle.Event{Kind: cycle.Woke, Now: 400 * ms}, cycle.Acquire},
		{cycle.Event{Kind: cycle.Granted, Now: 410 * ms, Call: 400 * ms}, cycle.Write},
		{cycle.Event{Kind: cycle.Wrote, Now: 701 * ms}, cycle.Renew},                   // older than ttl/3
		{cycle.Event{Kind: cycle.Renewed, Now: 710 * ms, Call: 701 * ms}, cycle.Write}, // safe again
		{cycle.Event{Kind: cycle.Wrote, Now: 1002 * ms}, cycle.Renew},                  // older than ttl/3 again
		{cycle.Event{Kind: cycle.Renewed, Now: 1002*ms + safe - 20*ms, Call: 1002 * ms}, // answered late:
			cycle.Read}, // the work would end on the safe point
		{cycle.Event{Kind: cycle.ReadDone, Now: 1002*ms + safe}, cycle.Release}, // released though lost
		{cycle.Event{Kind: cycle.Released, Now: 1002*ms + safe + 5*ms}, cycle.Wait},
	}
	for i, s := range steps {
		a := m.Step(s.ev)
		if a.Kind != s.want {
			t.Fatalf("step %d (%v): %v, want %v", i, s.ev.Kind, a, s.want)
		}
		switch {
		case s.ev.Kind == cycle.Refused && (a.D <= 90*ms || a.D > 90*ms+225*ms):
			t.Errorf("backoff %v, want ttl/10 + up to ttl/4", a.D)
		case s.ev.Kind == cycle.Released && (a.D <= thinkTime || a.D > thinkTime+225*ms):
			t.Errorf("think time %v, want %v + up to ttl/4", a.D, thinkTime)
		case a.Kind == cycle.Release && a.Reason != cycle.ReasonWatchdog:
			t.Errorf("the hold ended %q, want %q", a.Reason, cycle.ReasonWatchdog)
		}
	}
}
