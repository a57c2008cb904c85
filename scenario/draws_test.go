package scenario

import (
	"strings"
	"testing"
)

// replayed is p written to a replay file and read back.
func replayed(t *testing.T, p Plan) Plan {
	t.Helper()
	r := Replay{Program: ProgramVersion, Seed: p.Seed, Spec: p.Spec, Options: p.Options, Schedule: p.Schedule, Verdict: "pass", TraceHash: "0"}
	back, err := ParseReplay(r.Marshal())
	if err != nil {
		t.Fatalf("seed %d: %v", p.Seed, err)
	}
	return back.Plan()
}

// TestSwarmDrawsTokenOffsets: the swarm's plan carries the offset drawn
// from its seed (so a replay file keeps it), every boundary is drawn
// within 100 seeds, each offset lies just below its boundary, and a spec
// with its own offset keeps it.
func TestSwarmDrawsTokenOffsets(t *testing.T) {
	swarm, _ := Lookup("swarm")
	seen := map[uint64]bool{}
	for seed := uint64(1); seed <= 100; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		o := p.Spec.TokenOffset
		if o != DrawTokenOffset(seed) {
			t.Fatalf("seed %d: plan offset %d, drawn %d", seed, o, DrawTokenOffset(seed))
		}
		found := false
		for _, b := range TokenOffsets {
			if o == b || (b > 0 && o < b && b-o <= tokenMargin) {
				seen[b], found = true, true
			}
		}
		if !found {
			t.Errorf("seed %d: offset %d is near no boundary", seed, o)
		}
		if again := replayed(t, p); again.Spec.TokenOffset != o {
			t.Errorf("seed %d: the replay's plan has offset %d, want %d", seed, again.Spec.TokenOffset, o)
		}
	}
	if len(seen) != len(TokenOffsets) {
		t.Errorf("seeds 1..100 drew offsets near %d of the %d boundaries", len(seen), len(TokenOffsets))
	}
	own := swarm
	own.TokenOffset = 12345
	if p, _ := NewPlan(own, 7); p.Spec.TokenOffset != 12345 {
		t.Errorf("a spec's own offset became %d", p.Spec.TokenOffset)
	}
	own.TokenOffset = MaxTokenOffset + 1
	if err := own.Validate(); err == nil || !strings.Contains(err.Error(), "token_offset") {
		t.Errorf("an offset past MaxTokenOffset: %v, want an error naming token_offset", err)
	}
}

// TestSwarmDrawsIngressDepth: the swarm's plan carries the ingress bound
// drawn from its seed (so a replay keeps it): the default in most seeds, a
// bound of 1..3 in some, every one of them within 100 seeds; a spec with
// its own bound keeps it.
func TestSwarmDrawsIngressDepth(t *testing.T) {
	swarm, _ := Lookup("swarm")
	seen := map[int]int{}
	for seed := uint64(1); seed <= 100; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Spec.IngressDepth
		if d < 0 || d > 3 {
			t.Fatalf("seed %d: ingress depth %d, want 0 or 1..3", seed, d)
		}
		seen[d]++
		if again := replayed(t, p); again.Spec.IngressDepth != d {
			t.Errorf("seed %d: the replay's plan has ingress depth %d, want %d", seed, again.Spec.IngressDepth, d)
		}
	}
	for d := 0; d <= 3; d++ {
		if seen[d] == 0 {
			t.Errorf("seeds 1..100 never drew ingress depth %d (drawn: %v)", d, seen)
		}
	}
	if seen[0] < 50 {
		t.Errorf("only %d of 100 seeds kept the default ingress depth; the bound is meant for a minority", seen[0])
	}
	own := swarm
	own.IngressDepth = 9
	if p, _ := NewPlan(own, 7); p.Spec.IngressDepth != 9 {
		t.Errorf("a spec's own ingress depth became %d", p.Spec.IngressDepth)
	}
}
