package history

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
)

// TestCallsAndAnswers: an unanswered operation stays unknown with no
// return, only the first answer counts, a renewal keeps the token it
// sent, an acquire takes its answer's, and a grant opens a belief that
// EndBelief closes.
func TestCallsAndAnswers(t *testing.T) {
	r := New()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	acq := r.LockCall("a", "r", checker.LockAcquire, 1, 99, ms(1))
	lost := r.LockCall("b", "r", checker.LockAcquire, 1, 0, ms(2))
	if !r.LockReturn(acq, checker.LockGranted, 7, ms(3)) {
		t.Fatal("first answer not recorded")
	}
	if r.LockReturn(acq, checker.LockBusy, 0, ms(4)) {
		t.Fatal("second answer recorded")
	}
	ren := r.LockCall("a", "r", checker.LockRenew, 2, 7, ms(5))
	r.LockReturn(ren, checker.LockNotHolder, 0, ms(6))
	w := r.StoreCall("a", "r", checker.StoreOp{Kind: checker.OpWrite, Token: 7, Value: 1}, ms(7))
	r.StoreReturn(w, false, 0, 0, ms(8))
	rd := r.StoreCall("a", "r", checker.StoreOp{Kind: checker.OpRead}, ms(9))
	r.StoreReturn(rd, false, 1, 7, ms(10))
	r.StoreCall("b", "r", checker.StoreOp{Kind: checker.OpWrite, Token: 3, Value: 2}, ms(11))
	r.EndBelief("a", 7, "renew-refused", ms(12))
	var h checker.History
	r.Fill(&h)
	wantLock := []checker.LockOp{
		{ID: 0, Client: "a", Resource: "r", Kind: checker.LockAcquire, Request: 1, Token: 7, Call: ms(1), Return: ms(3), Outcome: checker.LockGranted},
		{ID: 1, Client: "b", Resource: "r", Kind: checker.LockAcquire, Request: 1, Call: ms(2), Outcome: checker.LockUnknown},
		{ID: 2, Client: "a", Resource: "r", Kind: checker.LockRenew, Request: 2, Token: 7, Call: ms(5), Return: ms(6), Outcome: checker.LockNotHolder},
	}
	if lost != 1 || !slices.Equal(h.LockOps, wantLock) {
		t.Errorf("lock ops\n got %+v\nwant %+v", h.LockOps, wantLock)
	}
	wantStore := []checker.StoreOp{
		{ID: 0, Client: "a", Resource: "r", Kind: checker.OpWrite, Token: 7, Value: 1, Call: ms(7), Return: ms(8), Outcome: checker.OutcomeRejected},
		{ID: 1, Client: "a", Resource: "r", Kind: checker.OpRead, Call: ms(9), Return: ms(10), Outcome: checker.OutcomeAccepted, ReadValue: 1, ReadToken: 7},
		{ID: 2, Client: "b", Resource: "r", Kind: checker.OpWrite, Token: 3, Value: 2, Call: ms(11), Outcome: checker.OutcomeUnknown},
	}
	if !slices.EqualFunc(h.Ops, wantStore, func(a, b checker.StoreOp) bool {
		return a.ID == b.ID && a.Client == b.Client && a.Kind == b.Kind && a.Token == b.Token && a.Value == b.Value &&
			a.Call == b.Call && a.Return == b.Return && a.Outcome == b.Outcome && a.ReadValue == b.ReadValue && a.ReadToken == b.ReadToken
	}) {
		t.Errorf("store ops\n got %+v\nwant %+v", h.Ops, wantStore)
	}
	wantBelief := []checker.Belief{{Client: "a", Resource: "r", Token: 7, From: ms(3), To: ms(12), Reason: "renew-refused"}}
	if !slices.Equal(h.Beliefs, wantBelief) {
		t.Errorf("beliefs\n got %+v\nwant %+v", h.Beliefs, wantBelief)
	}
}

// TestEndBeliefs: a restart ends every open belief of the client, and
// EndBelief ends the latest belief in the token.
func TestEndBeliefs(t *testing.T) {
	r := New()
	for i, c := range []string{"a", "a", "b"} {
		id := r.LockCall(c, "r"+c, checker.LockAcquire, uint64(i), 0, time.Duration(i))
		r.LockReturn(id, checker.LockGranted, 5, time.Duration(i)+1)
	}
	r.EndBelief("a", 5, "watchdog", 10)
	r.EndBeliefs("a", "restarted", 20)
	r.EndBeliefs("a", "restarted", 30) // nothing left open
	var h checker.History
	r.Fill(&h)
	got := []string{}
	for _, b := range h.Beliefs {
		got = append(got, b.Client+":"+b.Reason+":"+b.To.String())
	}
	want := []string{"a:restarted:20ns", "a:watchdog:10ns", "b::0s"}
	if !slices.Equal(got, want) || !h.Beliefs[2].Open {
		t.Fatalf("beliefs %q (b open %v), want %q", got, h.Beliefs[2].Open, want)
	}
}

// TestHolderBusyAmbiguous: a busy answer is ambiguous for a client with an
// unanswered acquire before it, or whose last grant's release or renewal
// went unanswered — until its next grant; other busy answers stand.
func TestHolderBusyAmbiguous(t *testing.T) {
	op := func(client string, kind checker.LockKind, out checker.LockStatus) checker.LockOp {
		return checker.LockOp{Client: client, Resource: "r", Kind: kind, Outcome: out, Return: 1}
	}
	A, Rn, Rl := checker.LockAcquire, checker.LockRenew, checker.LockRelease
	G, B, U, OK := checker.LockGranted, checker.LockBusy, checker.LockUnknown, checker.LockReleased
	for _, tc := range []struct {
		name string
		ops  []checker.LockOp
		want []bool // ambiguous after
	}{
		{"plain busy", []checker.LockOp{op("a", A, B)}, []bool{false}},
		{"after own unanswered acquire", []checker.LockOp{op("a", A, U), op("a", A, B)}, []bool{false, true}},
		{"another client's unanswered acquire", []checker.LockOp{op("b", A, U), op("a", A, B)}, []bool{false, false}},
		{"after unanswered release", []checker.LockOp{op("a", A, G), op("a", Rl, U), op("a", A, B)}, []bool{false, false, true}},
		{"after unanswered renewal", []checker.LockOp{op("a", A, G), op("a", Rn, U), op("a", A, B)}, []bool{false, false, true}},
		{"answered release", []checker.LockOp{op("a", A, G), op("a", Rl, OK), op("a", A, B)}, []bool{false, false, false}},
		{"until the next grant", []checker.LockOp{op("a", A, G), op("a", Rl, U), op("a", A, G), op("a", Rl, OK), op("a", A, B)},
			[]bool{false, false, false, false, false}},
		{"unanswered acquire outlives grants", []checker.LockOp{op("a", A, U), op("a", A, G), op("a", Rl, OK), op("a", A, B)},
			[]bool{false, false, false, true}},
	} {
		got := HolderBusyAmbiguous(tc.ops)
		for i, o := range got {
			amb := tc.ops[i].Outcome == B && o.Outcome == U && o.Return == 0
			if amb != tc.want[i] {
				t.Errorf("%s: op %d ambiguous %v, want %v", tc.name, i, amb, tc.want[i])
			}
			if tc.ops[i].Return != 1 {
				t.Errorf("%s: the input was changed", tc.name)
			}
		}
	}
}

// TestStoreFirstAnswerCounts: as for lock operations, only a store
// operation's first answer counts — a later copy (a duplicated reply, a
// late one after a retry) neither moves its return nor turns an accepted
// write into a rejected one, nor a read's value into another's.
func TestStoreFirstAnswerCounts(t *testing.T) {
	r := New()
	w := r.StoreCall("a", "r", checker.StoreOp{Kind: checker.OpWrite, Token: 7, Value: 1}, time.Millisecond)
	rd := r.StoreCall("a", "r", checker.StoreOp{Kind: checker.OpRead}, 3*time.Millisecond)
	if !r.StoreReturn(w, true, 0, 0, 2*time.Millisecond) || !r.StoreReturn(rd, true, 1, 7, 4*time.Millisecond) {
		t.Fatal("first answer not recorded")
	}
	if r.StoreReturn(w, false, 0, 0, 9*time.Millisecond) || r.StoreReturn(rd, true, 5, 8, 9*time.Millisecond) {
		t.Fatal("second answer recorded")
	}
	var h checker.History
	r.Fill(&h)
	if o := h.Ops[w]; o.Outcome != checker.OutcomeAccepted || o.Return != 2*time.Millisecond {
		t.Errorf("write after a second answer: %+v", o)
	}
	if o := h.Ops[rd]; o.ReadValue != 1 || o.ReadToken != 7 || o.Return != 4*time.Millisecond {
		t.Errorf("read after a second answer: %+v", o)
	}
}
