package checker

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTokenGroupsOf checks that grantsByToken's look-up answers exactly
// the grants of a token, in grantOrder, whether it keeps the dense table
// (tokens close together, as log indexes are) or searches (tokens far
// apart), for tokens inside, between and outside the granted ones.
func TestTokenGroupsOf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.Uint64Range(0, 1<<40).Draw(t, "base")
		spread := rapid.SampledFrom([]uint64{1, 3, 50, 1 << 20}).Draw(t, "spread")
		n := rapid.IntRange(0, 60).Draw(t, "grants")
		var grants []Grant
		for i := range n {
			tok := base + spread*rapid.Uint64Range(0, 40).Draw(t, fmt.Sprint("tok", i))
			grants = append(grants, Grant{Token: tok, Resource: rapid.SampledFrom([]string{"r1", "r2"}).Draw(t, fmt.Sprint("res", i)),
				Client: rapid.SampledFrom([]string{"c1", "c2", "c3"}).Draw(t, fmt.Sprint("cli", i)), Step: uint64(i)})
		}
		g := grantsByToken(grants)
		probes := []uint64{0, base - 1, base, base + 1, base + 41*spread, base + 41*spread + 1, ^uint64(0)}
		for _, gr := range grants {
			probes = append(probes, gr.Token, gr.Token+1, gr.Token-1)
		}
		for _, tok := range probes {
			var want []Grant
			for _, gr := range grants {
				if gr.Token == tok {
					want = append(want, gr)
				}
			}
			slices.SortStableFunc(want, grantOrder)
			got := g.of(tok)
			if !slices.Equal(got, want) {
				t.Fatalf("token %d (dense table %v): got %v, want %v", tok, g.first != nil, got, want)
			}
			if cap(got) != len(got) {
				t.Fatalf("token %d: group not capacity clipped (len %d cap %d)", tok, len(got), cap(got))
			}
		}
	})
}

// TestTokenGroupsDenseOnlyWhenCheap checks which look-up a set of tokens
// gets: a table for log-index-like tokens, the search for sparse ones.
func TestTokenGroupsDenseOnlyWhenCheap(t *testing.T) {
	dense := []Grant{{Token: 1_000_000}, {Token: 1_000_005}, {Token: 1_000_900}}
	if g := grantsByToken(dense); g.first == nil {
		t.Fatal("tokens within the slack of each other got no table")
	}
	sparse := []Grant{{Token: 1}, {Token: 1 << 40}}
	if g := grantsByToken(sparse); g.first != nil {
		t.Fatalf("tokens 2^40 apart got a table of %d slots", len(g.first))
	}
}
