package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice/mutants"
)

// TestTokensAcrossIntegerBoundaries runs token-boundaries with its tokens
// starting just below each boundary the swarm draws: the run passes, its
// grants' tokens cross the boundary, the grants after every replica's
// restart keep growing past those before it, and the store accepts writes
// with tokens past the boundary.
func TestTokensAcrossIntegerBoundaries(t *testing.T) {
	base, ok := Lookup("token-boundaries")
	if !ok {
		t.Fatal("no built-in token-boundaries")
	}
	const crash, restart = 1500 * time.Millisecond, 1700 * time.Millisecond
	for _, b := range TokenOffsets[1:] {
		spec := base
		spec.TokenOffset = b - 20
		res, err := Run(spec, 1, RunOptions{})
		if err != nil {
			t.Fatalf("offset %d: %v", spec.TokenOffset, err)
		}
		if res.Verdict.Kind != checker.VerdictPass {
			t.Errorf("offset 2^k−20 below %d: verdict %v %v", b, res.Verdict.Kind, res.Verdict.Violations)
		}
		var below, above int
		var maxBefore uint64
		for _, g := range res.History.Grants {
			if g.Token <= spec.TokenOffset {
				t.Errorf("boundary %d: grant token %d is not above the offset %d", b, g.Token, spec.TokenOffset)
			}
			if g.Token < b {
				below++
			} else {
				above++
			}
			if g.Start < crash {
				maxBefore = max(maxBefore, g.Token)
			}
		}
		if below == 0 || above == 0 {
			t.Errorf("boundary %d: %d grants below it, %d at or above: the run does not cross it", b, below, above)
		}
		for _, g := range res.History.Grants {
			if g.Start > restart && g.Token <= maxBefore {
				t.Errorf("boundary %d: grant at %v after the restart has token %d, not above %d granted before the crash", b, g.Start, g.Token, maxBefore)
			}
		}
		accepted := 0
		for _, a := range res.History.Applies {
			if a.Accepted && a.Token >= b {
				accepted++
			}
		}
		if accepted == 0 {
			t.Errorf("boundary %d: the store accepted no write with a token past it", b)
		}
	}
}

// TestToken32BitMutantIsCaughtPast2p32: the store that compares tokens in
// 32 bits is caught once tokens cross 2^32, and not below it (the canary
// shows the boundary is what catches it).
func TestToken32BitMutantIsCaughtPast2p32(t *testing.T) {
	spec, _ := Lookup("token-boundaries")
	spec.Mutant = string(mutants.MutToken32Bit)
	res, err := Run(spec, 1, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Kind != checker.VerdictViolation {
		t.Errorf("token-32bit across 2^32: verdict %v, want a violation", res.Verdict.Kind)
	}
	spec.TokenOffset = 0
	if res, _ := Run(spec, 1, RunOptions{}); res.Verdict.Kind != checker.VerdictPass {
		t.Errorf("token-32bit with tokens from 1: verdict %v %v, want pass (nothing to truncate)", res.Verdict.Kind, res.Verdict.Violations)
	}
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
		if o != drawTokenOffset(seed) {
			t.Fatalf("seed %d: plan offset %d, drawn %d", seed, o, drawTokenOffset(seed))
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
		if again := NewReplay(Result{Plan: p}).Plan(); again.Spec.TokenOffset != o {
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
		if again := NewReplay(Result{Plan: p}).Plan(); again.Spec.IngressDepth != d {
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
