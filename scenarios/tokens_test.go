package scenarios

import (
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
