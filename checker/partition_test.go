package checker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// numbering gives every name one number in first-seen order, whether it
// finds names by comparing (the first numberingScan) or by hashing (past
// them), and across the switch from one to the other.
func TestNumberingIsFirstSeenOrder(t *testing.T) {
	var n numbering
	const names = 3 * numberingScan
	for round := range 3 {
		for i := range names {
			// Fresh strings each round: equal bytes, other pointers.
			name := fmt.Sprintf("client-%d", i)
			if got := n.of(name); got != int32(i) {
				t.Fatalf("round %d: of(%q) = %d; want %d", round, name, got, i)
			}
		}
	}
	if len(n.names) != names || n.idx == nil {
		t.Fatalf("%d names numbered, map built %v; want %d and a map past %d names", len(n.names), n.idx != nil, names, numberingScan)
	}
}

// sortPlacements orders any witness as a sort would: a sorted run
// followed by placements in any order, no run at all, or all in order.
func TestSortPlacementsAsASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := rng.IntN(40)
		order := make([]placement, n)
		for i := range order {
			order[i] = placement{point: rng.Int64N(20), slot: rng.Int64N(5) - 1, rank: uint8(rng.IntN(9)), op: int32(i)}
		}
		if run := rng.IntN(n + 1); trial%3 != 0 {
			slices.SortFunc(order[:run], comparePlacements) // a run, then the rest
		}
		want := slices.Clone(order)
		slices.SortFunc(want, comparePlacements)
		sortPlacements(order)
		if !slices.Equal(order, want) {
			t.Fatalf("trial %d: sortPlacements gave\n%v\nwant\n%v", trial, order, want)
		}
	}
}
