package scenario

import (
	"testing"

	"github.com/fencesim/fencesim/lockservice"
)

// TestSwarmDrawsBuggify: about one swarm seed in three draws protocol
// knobs (DrawBuggify), each draw valid and within what its doc promises
// (caps of 1, 2 or 4 entries and 1 or 2 appends; an election one to three
// ticks past two heartbeats of one or two ticks; at least one of the two),
// written into the plan so that a replay file keeps it; a spec's own
// knobs, the empty set included (the defaults), are kept, and a scripted
// spec draws none. Until this test nothing checked any of it.
func TestSwarmDrawsBuggify(t *testing.T) {
	swarm, _ := Lookup("swarm")
	drawn, caps, timing := 0, 0, 0
	const seeds = 300
	for seed := uint64(1); seed <= seeds; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		b := p.Spec.Buggify
		if want := DrawBuggify(seed); (b == nil) != (want == nil) || b != nil && *b != *want {
			t.Fatalf("seed %d: plan's knobs %+v, drawn %+v", seed, b, want)
		}
		if b == nil {
			continue
		}
		drawn++
		switch {
		case *b == lockservice.Buggify{}:
			t.Fatalf("seed %d: drew knobs that change nothing", seed)
		case b.AppendEntries != 0 && b.AppendEntries != 1 && b.AppendEntries != 2 && b.AppendEntries != 4,
			(b.AppendEntries == 0) != (b.Inflight == 0), b.Inflight < 0 || b.Inflight > 2:
			t.Fatalf("seed %d: caps %+v", seed, *b)
		case b.ElectionTicks != 0 && (b.HeartbeatTicks < 1 || b.HeartbeatTicks > 2 ||
			b.ElectionTicks < 2*b.HeartbeatTicks+1 || b.ElectionTicks > 2*b.HeartbeatTicks+3):
			t.Fatalf("seed %d: timing %+v below nodesvc's floor or past its range", seed, *b)
		}
		if b.AppendEntries > 0 {
			caps++
		}
		if b.ElectionTicks > 0 {
			timing++
		}
		if again := replayed(t, p); again.Spec.Buggify == nil || *again.Spec.Buggify != *b {
			t.Fatalf("seed %d: the replay's plan has knobs %+v, want %+v", seed, again.Spec.Buggify, *b)
		}
	}
	if drawn < seeds/5 || drawn > seeds/2 || caps == 0 || timing == 0 {
		t.Errorf("%d of %d seeds drew knobs (%d caps, %d timings); want about a third, both kinds", drawn, seeds, caps, timing)
	}
	for _, own := range []lockservice.Buggify{{}, {AppendEntries: 8, Inflight: 3}} {
		s := swarm
		s.Buggify = &own
		for seed := uint64(1); seed <= 30; seed++ {
			if p, err := NewPlan(s, seed); err != nil || *p.Spec.Buggify != own {
				t.Fatalf("seed %d: a spec's own knobs %+v became %+v (%v)", seed, own, p.Spec.Buggify, err)
			}
		}
	}
	scripted, _ := Lookup("kleppmann-gc-pause")
	for seed := uint64(1); seed <= 30; seed++ {
		if p, _ := NewPlan(scripted, seed); p.Spec.Buggify != nil {
			t.Fatalf("scripted scenario, seed %d: drew knobs %+v", seed, *p.Spec.Buggify)
		}
	}
}
