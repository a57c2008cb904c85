package checker

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
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

// S5 (a1) finds a write's logged acceptance whether it lies among the
// first applies of the write's interval (a scan), past applyScan of them
// (the index), or in a history whose applies are out of time order; and
// it reports a write whose acceptance is logged nowhere in its interval.
func TestAcknowledgedWritesLoggedScanAndIndex(t *testing.T) {
	ms := time.Millisecond
	// Write 0 by "slow" is in flight from 0 to 1 s, while "busy" has
	// 2*applyScan of its writes applied; slow's own is applied last.
	h := History{Ops: []StoreOp{{ID: 0, Client: "slow", Resource: "r", Kind: OpWrite, Token: 1, Value: 7, Call: 0, Return: 1000 * ms, Outcome: OutcomeAccepted}}}
	for i := range 2 * applyScan {
		at := time.Duration(i+1) * ms
		h.Ops = append(h.Ops, StoreOp{ID: i + 1, Client: "busy", Resource: "r", Kind: OpWrite, Token: 2, Value: int64(100 + i), Call: at, Return: at, Outcome: OutcomeAccepted})
		h.Applies = append(h.Applies, StoreApply{Resource: "r", Client: "busy", Token: 2, Value: int64(100 + i), Accepted: true, At: at})
	}
	own := StoreApply{Resource: "r", Client: "slow", Token: 1, Value: 7, Accepted: true, At: 900 * ms}
	withOwn := h
	withOwn.Applies = append(slices.Clone(h.Applies), own)
	if vs := checkAcknowledgedWritesLogged(withOwn); len(vs) != 0 {
		t.Fatalf("acceptance logged past the scan: %v; want none", vs)
	}
	if vs := checkAcknowledgedWritesLogged(h); len(vs) != 1 || vs[0].Ops[0] != 0 {
		t.Fatalf("acceptance not logged: %v; want one S5 for op 0", vs)
	}
	shuffled := withOwn
	shuffled.Applies = slices.Clone(withOwn.Applies)
	slices.Reverse(shuffled.Applies)
	if vs := checkAcknowledgedWritesLogged(shuffled); len(vs) != 0 {
		t.Fatalf("applies out of order: %v; want none", vs)
	}
	late := withOwn
	late.Applies = slices.Clone(withOwn.Applies)
	late.Applies[len(late.Applies)-1].At = 1001 * ms // after the write returned
	if vs := checkAcknowledgedWritesLogged(late); len(vs) != 1 {
		t.Fatalf("acceptance logged after the return: %v; want one S5", vs)
	}
}

// firstAppliedFrom finds what a binary search over all the applies finds,
// from any start before the answer.
func TestFirstAppliedFromIsABinarySearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		applies := make([]StoreApply, rng.IntN(50))
		at := time.Duration(0)
		for i := range applies {
			at += time.Duration(rng.IntN(3))
			applies[i].At = at
		}
		q := time.Duration(rng.IntN(int(at) + 3))
		want, _ := slices.BinarySearchFunc(applies, q, func(a StoreApply, t time.Duration) int { return cmp.Compare(a.At, t) })
		from := rng.IntN(want + 1)
		if got := firstAppliedFrom(applies, from, q); got != want {
			t.Fatalf("firstAppliedFrom(%v, %d, %v) = %d; want %d", applies, from, q, got, want)
		}
	}
}
