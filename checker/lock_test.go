package checker

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestLockStep checks each transition of the fenced-mutex model, including
// expiry (the holder may lose the lock before any operation) and the unknown
// token an ambiguous acquire leaves behind.
func TestLockStep(t *testing.T) {
	free := lockState{Last: 4}
	heldA := lockState{Holder: "A", Token: 4, Last: 4}
	unknownA := lockState{Holder: "A", Last: 5} // A holds a token ≥ 5 it never learned
	in := func(client string, k LockKind, tok uint64) lockInput {
		return lockInput{Resource: "x", Client: client, Kind: k, Token: tok}
	}
	out := func(s LockStatus, tok uint64) lockOutput { return lockOutput{Outcome: s, Token: tok} }
	tests := []struct {
		name  string
		state lockState
		in    lockInput
		out   lockOutput
		want  []any
	}{
		{"fresh grant", free, in("B", LockAcquire, 0), out(LockGranted, 5), []any{lockState{Holder: "B", Token: 5, Last: 5}}},
		{"fresh grant must exceed the last token", free, in("B", LockAcquire, 0), out(LockGranted, 4), nil},
		{"grant after expiry", heldA, in("B", LockAcquire, 0), out(LockGranted, 7), []any{lockState{Holder: "B", Token: 7, Last: 7}}},
		{"holder asks again: same token", heldA, in("A", LockAcquire, 0), out(LockGranted, 4), []any{heldA}},
		{"holder asks again after expiry: new token", heldA, in("A", LockAcquire, 0), out(LockGranted, 6), []any{lockState{Holder: "A", Token: 6, Last: 6}}},
		{"holder learns its unknown token", unknownA, in("A", LockAcquire, 0), out(LockGranted, 6), []any{lockState{Holder: "A", Token: 6, Last: 6}}},
		{"unknown token is at least its bound", unknownA, in("A", LockAcquire, 0), out(LockGranted, 4), nil},
		{"busy while held by another", heldA, in("B", LockAcquire, 0), out(LockBusy, 0), []any{heldA}},
		{"busy while free", free, in("B", LockAcquire, 0), out(LockBusy, 0), nil},
		{"busy for the holder", heldA, in("A", LockAcquire, 0), out(LockBusy, 0), nil},
		{"invalid changes nothing", heldA, in("B", LockAcquire, 0), out(LockInvalid, 0), []any{heldA, free}},
		{"ambiguous acquire on a free lock", free, in("B", LockAcquire, 0), out(LockUnknown, 0), []any{free, lockState{Holder: "B", Last: 5}}},
		{"overloaded acquire is ambiguous", heldA, in("B", LockAcquire, 0), out(LockOverloaded, 0), []any{heldA, free, lockState{Holder: "B", Last: 5}}},
		{"renewed by the holder", heldA, in("A", LockRenew, 4), out(LockRenewed, 4), []any{heldA}},
		{"renewed with another token", heldA, in("A", LockRenew, 3), out(LockRenewed, 3), nil},
		{"renewed by another client", heldA, in("B", LockRenew, 4), out(LockRenewed, 4), nil},
		{"not-holder means it expired", heldA, in("A", LockRenew, 4), out(LockNotHolder, 0), []any{free}},
		{"not-holder for another token", heldA, in("A", LockRenew, 3), out(LockNotHolder, 0), []any{heldA, free}},
		{"released by the holder", heldA, in("A", LockRelease, 4), out(LockReleased, 4), []any{free}},
		{"released when free", free, in("A", LockRelease, 4), out(LockReleased, 4), nil},
		{"release resolves an unknown token", unknownA, in("A", LockRelease, 9), out(LockReleased, 9), []any{lockState{Last: 9}}},
		{"ambiguous release", heldA, in("A", LockRelease, 4), out(LockNotLeader, 0), []any{heldA, free}},
		{"renew answered with granted", heldA, in("A", LockRenew, 4), out(LockGranted, 4), nil},
		{"release answered with busy", heldA, in("A", LockRelease, 4), out(LockBusy, 0), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lockStep(tt.state, tt.in, tt.out); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLockHistoriesPass checks safe lock histories whose answers are
// ambiguous in the ways the reference service produces.
func TestLockHistoriesPass(t *testing.T) {
	tests := []struct {
		name string
		ops  []LockOp
	}{
		{"overloaded acquire that took effect through an earlier copy", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 0, 0, ms(2), LockOverloaded),
			lockOp(2, "B", "x", LockAcquire, 0, ms(3), ms(4), LockBusy),
			lockOp(3, "A", "x", LockAcquire, 7, ms(5), ms(6), LockGranted),
			lockOp(4, "A", "x", LockRelease, 7, ms(7), ms(8), LockReleased),
			lockOp(5, "B", "x", LockAcquire, 9, ms(9), ms(10), LockGranted),
		}},
		{"not-leader release that took effect later", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
			lockOp(2, "A", "x", LockRelease, 1, ms(2), ms(3), LockNotLeader),
			lockOp(3, "B", "x", LockAcquire, 0, ms(4), ms(5), LockBusy),
			lockOp(4, "B", "x", LockAcquire, 3, ms(6), ms(7), LockGranted),
		}},
		{"crashed client asks again and gets its grant", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 0, 0, 0, LockUnknown),
			lockOp(2, "B", "x", LockAcquire, 0, ms(4), ms(5), LockBusy),
			lockOp(3, "A", "x", LockAcquire, 2, ms(6), ms(7), LockGranted),
			lockOp(4, "A", "x", LockRenew, 2, ms(8), ms(9), LockRenewed),
		}},
		{"ambiguous renewals and invalid requests constrain nothing", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
			lockOp(2, "A", "x", LockRenew, 1, ms(2), 0, LockUnknown),
			lockOp(3, "A", "x", LockRenew, 1, ms(3), ms(4), LockNotLeader),
			lockOp(4, "C", "x", LockRelease, 1, ms(5), ms(6), LockInvalid),
			lockOp(5, "A", "x", LockRenew, 1, ms(7), ms(8), LockRenewed),
		}},
		{"expiry between a grant and the next", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
			lockOp(2, "B", "x", LockAcquire, 2, ms(2), ms(3), LockGranted),
			lockOp(3, "A", "x", LockRenew, 1, ms(4), ms(5), LockNotHolder),
			lockOp(4, "A", "x", LockAcquire, 0, ms(4), ms(5), LockBusy),
		}},
		{"resources are independent", []LockOp{
			lockOp(1, "A", "x", LockAcquire, 5, 0, ms(1), LockGranted),
			lockOp(2, "B", "y", LockAcquire, 2, ms(2), ms(3), LockGranted),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(History{LockOps: tt.ops}, Options{})
			if got, want := v.Kind, VerdictPass; got != want {
				t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
			}
		})
	}
}

// TestLockTokensIncrease checks that S7 refutes a grant whose token is not
// above a token granted earlier on the resource.
func TestLockTokensIncrease(t *testing.T) {
	v := Check(History{LockOps: []LockOp{
		lockOp(1, "A", "x", LockAcquire, 2, 0, ms(1), LockGranted),
		lockOp(2, "A", "x", LockRelease, 2, ms(2), ms(3), LockReleased),
		lockOp(3, "B", "x", LockAcquire, 2, ms(4), ms(5), LockGranted),
	}}, Options{})
	if got, want := properties(v), []string{"S7"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
	}
	if got, want := v.Violations[0].LockOps, []int{3}; !slices.Equal(got, want) {
		t.Errorf("got lock ops %v, want %v", got, want)
	}
	if !strings.Contains(v.Violations[0].Detail, "free (last token 2)") {
		t.Errorf("got detail %q, want it to name the state reached", v.Violations[0].Detail)
	}
}

// TestS5Restart checks how S5 shares a forgotten write with S3 and S8: a
// regression across a store restart is S5's too, one without a restart is
// not, and a store that keeps its writes across a restart passes.
func TestS5Restart(t *testing.T) {
	forgetful := func() History {
		return History{
			Grants: []Grant{
				grant("x", "A", 1, 0, ms(10), 1),
				openGrant("x", "B", 2, ms(10), 2),
			},
			Ops: []StoreOp{
				write(1, "B", "x", 2, 20, ms(11), ms(12), OutcomeAccepted),
				write(2, "A", "x", 1, 10, ms(31), ms(32), OutcomeAccepted), // A was paused
				read(3, "C", "x", ms(33), ms(34), 10, 1),
			},
			Applies: []StoreApply{
				apply("x", "B", 2, 20, true, ms(11), 3),
				apply("x", "A", 1, 10, true, ms(31), 5),
			},
			StoreRestarts: []StoreRestart{{At: ms(30), Step: 4}},
			End:           ms(40),
		}
	}
	tests := []struct {
		name string
		edit func(*History)
		want []string
	}{
		{"forgotten across a restart", func(*History) {}, []string{"S3", "S5", "S8"}},
		{"same regression without a restart is a broken fence", func(h *History) { h.StoreRestarts = nil }, []string{"S3", "S8"}},
		{"restart before the acknowledgement", func(h *History) { h.StoreRestarts[0].At = ms(5) }, []string{"S3", "S8"}},
		{"kept across a restart", func(h *History) {
			h.Ops[1].Outcome = OutcomeRejected
			h.Applies[1].Accepted = false
			h.Ops[2].ReadValue, h.Ops[2].ReadToken = 20, 2
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := forgetful()
			tt.edit(&h)
			v := Check(h, Options{})
			if got := properties(v); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v (verdict %+v)", got, tt.want, v)
			}
		})
	}

	// Two S5 violations: the accepted stale write and the stale read.
	v := Check(forgetful(), Options{})
	var s5 []Violation
	for _, x := range v.Violations {
		if x.Property == "S5" {
			s5 = append(s5, x)
		}
	}
	if got, want := len(s5), 2; got != want {
		t.Fatalf("got %d S5 violations, want %d: %+v", got, want, s5)
	}
	if !strings.Contains(s5[0].Detail, "restarting at 30ms") || !slices.Equal(s5[1].Ops, []int{1, 3}) {
		t.Errorf("got %+v, want the restart named and the read tied to the write it forgot", s5)
	}
}

// TestS5ReadOfAnOlderValueWithTheSameToken checks that a read after a restart
// that returns the holder's earlier value, overwritten with the same token
// before the restart, is a forgotten write.
func TestS5ReadOfAnOlderValueWithTheSameToken(t *testing.T) {
	h := History{
		Grants: []Grant{openGrant("x", "A", 1, 0, 1)},
		Ops: []StoreOp{
			write(1, "A", "x", 1, 10, ms(1), ms(2), OutcomeAccepted),
			write(2, "A", "x", 1, 11, ms(3), ms(4), OutcomeAccepted),
			read(3, "C", "x", ms(21), ms(22), 10, 1),
		},
		Applies: []StoreApply{
			apply("x", "A", 1, 10, true, ms(1), 2),
			apply("x", "A", 1, 11, true, ms(3), 3),
		},
		StoreRestarts: []StoreRestart{{At: ms(20), Step: 4}},
	}
	if got, want := properties(Check(h, Options{})), []string{"S5", "S8"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	h.Ops[2].ReadValue = 11
	if got := Check(h, Options{}); got.Kind != VerdictPass {
		t.Fatalf("got %+v, want a pass", got)
	}
}

// TestS5AckedGrantAlsoLogged checks the split with S1: once the service
// recorded an acknowledged grant, a reuse of its token is S1's alone.
func TestS5AckedGrantAlsoLogged(t *testing.T) {
	h := History{
		Grants: []Grant{
			grant("x", "A", 1, 0, ms(10), 1),
			grant("x", "B", 1, ms(20), ms(30), 2),
		},
		LockOps: []LockOp{
			lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
			lockOp(2, "B", "x", LockAcquire, 1, ms(19), ms(21), LockGranted),
		},
	}
	v := Check(h, Options{})
	if got, want := properties(v), []string{"S1", "S7"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
	}
}

// TestS6BoundsAreInclusive checks that a renewal at the instant of its grant
// and a release at the instant the grant ended fit.
func TestS6BoundsAreInclusive(t *testing.T) {
	h := History{
		Grants: []Grant{{Resource: "x", Client: "A", Token: 1, Start: ms(1), End: ms(10), Step: 1, Reason: EndReleased}},
		Renewals: []Renewal{
			{Resource: "x", Client: "A", Token: 1, At: ms(1), Step: 2},
			{Resource: "x", Client: "A", Token: 1, At: ms(10), Step: 3},
		},
		Ends: []GrantEnd{{Resource: "x", Client: "A", Token: 1, Reason: EndReleased, At: ms(10), Step: 4}},
	}
	if v := Check(h, Options{}); v.Kind != VerdictPass {
		t.Fatalf("got %+v, want a pass", v)
	}
	h.Renewals[0].At = ms(1) - 1
	if got, want := properties(Check(h, Options{})), []string{"S6"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestLockStepBudgetIsUnknown checks that a search of the lock ops out of
// steps yields Unknown, never Pass.
func TestLockStepBudgetIsUnknown(t *testing.T) {
	// Every lock op answered: this test is about the budget, not about
	// how ambiguity grows the search (TestSearchDecidesAmbiguousLocks).
	h := genHistory(rand.New(rand.NewPCG(1, 2)), genConfig{resources: 1, clients: 3, ops: 2000, locks: true})
	h.Ops, h.Applies = nil, nil // leave the lock ops alone to run out of steps
	for i := len(h.LockOps) / 2; i < len(h.LockOps); i++ {
		if op := h.LockOps[i]; op.Kind == LockRelease && op.Outcome == LockReleased {
			// A renewal of the released token, answered renewed.
			h.LockOps = append(h.LockOps, LockOp{ID: 100_000, Client: op.Client, Resource: op.Resource, Kind: LockRenew, Token: op.Token,
				Call: op.Return + ms(1), Return: op.Return + ms(2), Outcome: LockRenewed})
			break
		}
	}
	if got, want := properties(Check(h, Options{})), []string{"S7"}; !slices.Equal(got, want) {
		t.Fatalf("sanity: got %v, want %v", got, want)
	}
	if v := Check(h, Options{Steps: 100}); v.Kind != VerdictViolation {
		t.Fatalf("got %v, want the token-order procedure to refute it without the search (verdict %+v)", v.Kind, v)
	}
	v := Check(h, Options{Steps: 100, SearchOnly: true})
	if got, want := v.Kind, VerdictUnknown; got != want {
		t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
	}
	if !strings.Contains(v.Unknown, "lock ops") {
		t.Errorf("got unknown reason %q, want it to name the lock ops", v.Unknown)
	}
}

// TestLockLinearizabilityInfoVisualizes checks that the exported porcupine
// pieces of S7 work with porcupine.Visualize and agree with Check.
func TestLockLinearizabilityInfoVisualizes(t *testing.T) {
	broken := kleppmann(false)
	broken.LockOps = append(broken.LockOps, lockOp(8, "C", "file", LockAcquire, 0, ms(20500), ms(20600), LockBusy))
	tests := []struct {
		name string
		h    History
		want porcupine.CheckResult
	}{
		{"pass", kleppmann(false), porcupine.Ok},
		{"fail", broken, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, ops, res, info, _ := LockLinearizabilityInfo(tt.h, 0)
			if got, want := res, tt.want; got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
			if got, want := len(ops), len(tt.h.LockOps)-1; got != want { // the unanswered renewal is left out
				t.Errorf("got %v ops, want %v", got, want)
			}
			var buf bytes.Buffer
			if err := porcupine.Visualize(model, info, &buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "acquire(") {
				t.Errorf("got visualization without described ops")
			}
		})
	}
}

// TestLiveness checks CheckLiveness on the stages a client can get stuck at.
func TestLiveness(t *testing.T) {
	heal, bound := ms(100), ms(50)
	cycle := func(client string, tok uint64, start time.Duration, id int) ([]LockOp, []StoreOp) {
		return []LockOp{
				lockOp(id, client, "x", LockAcquire, tok, start, start+ms(2), LockGranted),
				lockOp(id+1, client, "x", LockRelease, tok, start+ms(6), start+ms(8), LockReleased),
			}, []StoreOp{
				write(id, client, "x", tok, int64(id), start+ms(3), start+ms(5), OutcomeAccepted),
			}
	}
	tests := []struct {
		name    string
		edit    func(h *History)
		clients []string
		want    []string // substrings of the detail; nil for live
	}{
		{"every client cycles after the heal", func(*History) {}, []string{"a", "b"}, nil},
		{"a client with no cycle left is not listed", func(*History) {}, []string{"a"}, nil},
		{"a client that did nothing", func(*History) {}, []string{"a", "b", "z"}, []string{`1 of 3 clients`, `client "z" was never granted the lock (it made no lock op at all)`}},
		{"only busy after the heal", func(h *History) {
			h.LockOps = slices.DeleteFunc(h.LockOps, func(op LockOp) bool { return op.Client == "b" })
			h.LockOps = append(h.LockOps, lockOp(90, "b", "x", LockAcquire, 0, ms(140), ms(141), LockBusy))
		}, []string{"a", "b"}, []string{`client "b" was never granted the lock (its last lock op: lock op 90 by client "b": acquire -> busy`}},
		{"grant before the heal does not count", func(h *History) {
			for i := range h.LockOps {
				h.LockOps[i].Call -= ms(40)
				h.LockOps[i].Return -= ms(40)
			}
			for i := range h.Ops {
				h.Ops[i].Call -= ms(40)
				h.Ops[i].Return -= ms(40)
			}
		}, []string{"a"}, []string{`client "a" was never granted`}},
		{"write rejected", func(h *History) { h.Ops[0].Outcome = OutcomeRejected }, []string{"a", "b"}, []string{`client "a" was granted token 5 at 112ms but had no write with it accepted (its last store op: op 1`}},
		{"release unanswered", func(h *History) { h.LockOps[1].Outcome = LockUnknown }, []string{"a", "b"}, []string{`client "a" was granted token 5 at 112ms and wrote with it at 115ms but did not release it (its last lock op: lock op 2 by client "a": release token 5 -> unknown, called 116ms, never returned)`}},
		{"release after the bound", func(h *History) { h.LockOps[1].Return = ms(151) }, []string{"a"}, []string{`did not release it`}},
		{"a later full cycle makes up for a stuck one", func(h *History) {
			h.Ops[0].Outcome = OutcomeRejected
			l, s := cycle("a", 9, ms(130), 50)
			h.LockOps = append(h.LockOps, l...)
			h.Ops = append(h.Ops, s...)
		}, []string{"a", "b"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h History
			l, s := cycle("a", 5, ms(110), 1)
			h.LockOps, h.Ops = append(h.LockOps, l...), append(h.Ops, s...)
			l, s = cycle("b", 6, ms(120), 3)
			h.LockOps, h.Ops = append(h.LockOps, l...), append(h.Ops, s...)
			tt.edit(&h)
			got := CheckLiveness(h, heal, bound, tt.clients)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("got %+v, want live", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("got live, want a failure")
			}
			if got.Property != "liveness" || got.At != heal+bound {
				t.Errorf("got property %q at %v, want liveness at %v", got.Property, got.At, heal+bound)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Detail, w) {
					t.Errorf("got detail %q, want it to contain %q", got.Detail, w)
				}
			}
			if !strings.HasSuffix(got.Detail, ".") {
				t.Errorf("got detail %q, want a sentence", got.Detail)
			}
		})
	}
}

// TestCombine checks the ranking: a safety violation beats an unknown
// verdict, which beats a liveness failure, which beats a pass.
func TestCombine(t *testing.T) {
	live := &Violation{Property: "liveness", Detail: "Stuck."}
	violation := Verdict{Kind: VerdictViolation, Violations: []Violation{{Property: "S3"}}}
	unknown := Verdict{Kind: VerdictUnknown, Unknown: "timed out"}
	tests := []struct {
		name     string
		safety   Verdict
		liveness *Violation
		want     VerdictKind
		property string
	}{
		{"violation beats liveness", violation, live, VerdictViolation, "S3"},
		{"unknown beats liveness", unknown, live, VerdictUnknown, ""},
		{"liveness beats pass", Verdict{Kind: VerdictPass}, live, VerdictLiveness, "liveness"},
		{"unknown stays unknown", unknown, nil, VerdictUnknown, ""},
		{"pass stays pass", Verdict{Kind: VerdictPass}, nil, VerdictPass, ""},
		{"violation stays violation", violation, nil, VerdictViolation, "S3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Combine(tt.safety, tt.liveness)
			if v.Kind != tt.want || v.Property() != tt.property || v.Liveness != tt.liveness {
				t.Fatalf("got %+v, want kind %v, property %q and the liveness violation kept", v, tt.want, tt.property)
			}
			if v.Unknown != tt.safety.Unknown || len(v.Violations) != len(tt.safety.Violations) {
				t.Errorf("got %+v, want the safety verdict's details kept", v)
			}
		})
	}
}

// TestBeliefOverlap checks the metric on hand-built belief windows.
func TestBeliefOverlap(t *testing.T) {
	b := func(client, res string, from, to int) Belief {
		return Belief{Client: client, Resource: res, From: ms(from), To: ms(to)}
	}
	open := func(client, res string, from int) Belief {
		return Belief{Client: client, Resource: res, From: ms(from), Open: true}
	}
	tests := []struct {
		name    string
		beliefs []Belief
		end     int
		want    OverlapStats
	}{
		{"none", nil, 100, OverlapStats{}},
		{"disjoint", []Belief{b("A", "x", 0, 10), b("B", "x", 20, 30)}, 100, OverlapStats{}},
		{"touching", []Belief{b("A", "x", 0, 10), b("B", "x", 10, 30)}, 100, OverlapStats{}},
		{"one overlap", []Belief{b("A", "x", 0, 15), b("B", "x", 10, 30)}, 100, OverlapStats{Windows: 1, Total: ms(5), Longest: ms(5)}},
		{"nested", []Belief{b("A", "x", 0, 100), b("B", "x", 10, 20), b("B", "x", 40, 70)}, 100, OverlapStats{Windows: 2, Total: ms(40), Longest: ms(30)}},
		{"three clients make one window", []Belief{b("A", "x", 0, 20), b("B", "x", 10, 30), b("C", "x", 15, 40)}, 100, OverlapStats{Windows: 1, Total: ms(20), Longest: ms(20)}},
		{"hand-over inside a window does not split it", []Belief{b("A", "x", 0, 50), b("B", "x", 10, 30), b("C", "x", 30, 40)}, 100, OverlapStats{Windows: 1, Total: ms(30), Longest: ms(30)}},
		{"one client's own beliefs do not overlap", []Belief{b("A", "x", 0, 20), b("A", "x", 10, 30)}, 100, OverlapStats{}},
		{"other resources are separate", []Belief{b("A", "x", 0, 20), b("B", "y", 10, 30)}, 100, OverlapStats{}},
		{"windows on two resources", []Belief{b("A", "x", 0, 20), b("B", "x", 10, 30), b("A", "y", 0, 20), b("B", "y", 5, 30)}, 100, OverlapStats{Windows: 2, Total: ms(25), Longest: ms(15)}},
		{"open until the end of the run", []Belief{open("A", "x", 0), b("B", "x", 90, 95), open("C", "x", 98)}, 100, OverlapStats{Windows: 2, Total: ms(7), Longest: ms(5)}},
		{"empty windows are ignored", []Belief{b("A", "x", 10, 10), b("B", "x", 5, 20), b("C", "x", 30, 20)}, 100, OverlapStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := History{Beliefs: tt.beliefs, End: ms(tt.end)}
			if got := BeliefOverlap(h); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got := Check(h, Options{}).Metrics.BeliefOverlap; got != tt.want {
				t.Fatalf("Check: got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestKleppmannMetrics checks the metric on the Kleppmann history: the paused
// A believes it holds the lock throughout B's hold.
func TestKleppmannMetrics(t *testing.T) {
	want := OverlapStats{Windows: 1, Total: ms(15100 - 11050), Longest: ms(15100 - 11050)}
	for _, stale := range []bool{false, true} {
		if got := Check(kleppmann(stale), Options{}).Metrics.BeliefOverlap; got != want {
			t.Errorf("stale accepted %v: got %+v, want %+v", stale, got, want)
		}
	}
}

// TestLockJSON checks that the lock records and the new verdict fields
// round-trip through JSON with their enums spelled out.
func TestLockJSON(t *testing.T) {
	h := kleppmann(false)
	h.StoreRestarts = []StoreRestart{{At: ms(17000), Step: 9}}
	h.Beliefs = append(h.Beliefs, Belief{Client: "C", Resource: "file", Token: 3, From: ms(20500), Open: true})
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"lock_ops":[`, `"kind":"acquire"`, `"kind":"renew"`, `"kind":"release"`, `"outcome":"granted"`, `"outcome":"busy"`,
		`"renewals":[`, `"ends":[`, `"reason":"expired"`, `"beliefs":[`, `"store_restarts":[`, `"request":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("got %s, want it to contain %s", b, want)
		}
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Errorf("got %+v, want %+v", back, h)
	}

	v := Combine(Check(kleppmann(false), Options{}), CheckLiveness(kleppmann(false), ms(20000), ms(100), []string{"A"}))
	b, err = json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"liveness"`, `"liveness":{"property":"liveness"`, `"metrics":{"belief_overlap":{"windows":1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("got %s, want it to contain %s", b, want)
		}
	}
	var vback Verdict
	if err := json.Unmarshal(b, &vback); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vback, v) {
		t.Errorf("got %+v, want %+v", vback, v)
	}

	if _, err := json.Marshal(LockOp{Kind: LockKind(7)}); err == nil {
		t.Errorf("got no error for an invalid lock kind, want one")
	}
	if err := json.Unmarshal([]byte(`{"kind":"grab"}`), &LockOp{}); err == nil {
		t.Errorf("got no error for an unknown lock kind, want one")
	}
	for _, tt := range []struct {
		k    LockKind
		want string
	}{{LockAcquire, "acquire"}, {LockRenew, "renew"}, {LockRelease, "release"}, {LockKind(9), "LockKind(9)"}} {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("got %v, want %v", got, tt.want)
		}
	}
}

// TestLockDeterminism checks that the verdict on lock records does not depend
// on the order of LockOps, Renewals, Ends, Beliefs and Grants, which carry
// their own times.
func TestLockDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	h := genHistory(rng, genConfig{resources: 2, clients: 3, ops: 400, unknownRate: 0.1, staleRate: 0.5, readers: 1, locks: true})
	// Break S5, S6 and S7.
	h.LockOps = append(h.LockOps, lockOp(10_000, "zz", "r0", LockAcquire, 99_999, ms(1), ms(2), LockGranted))
	h.Renewals = append(h.Renewals, Renewal{Resource: "r1", Client: "zz", Token: h.Grants[1].Token, At: h.Grants[1].Start})
	h.LockOps = append(h.LockOps, lockOp(10_001, "zz", "r1", LockAcquire, 0, 0, ms(1), LockBusy))

	want := Check(h, Options{})
	if got, wantP := properties(want), []string{"S5", "S6", "S7"}; !slices.Equal(got, wantP) {
		t.Fatalf("got %v, want %v: %+v", got, wantP, want)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		s := h
		s.LockOps, s.Renewals, s.Ends, s.Beliefs, s.Grants = slices.Clone(h.LockOps), slices.Clone(h.Renewals), slices.Clone(h.Ends), slices.Clone(h.Beliefs), slices.Clone(h.Grants)
		rng.Shuffle(len(s.LockOps), func(i, j int) { s.LockOps[i], s.LockOps[j] = s.LockOps[j], s.LockOps[i] })
		rng.Shuffle(len(s.Renewals), func(i, j int) { s.Renewals[i], s.Renewals[j] = s.Renewals[j], s.Renewals[i] })
		rng.Shuffle(len(s.Ends), func(i, j int) { s.Ends[i], s.Ends[j] = s.Ends[j], s.Ends[i] })
		rng.Shuffle(len(s.Beliefs), func(i, j int) { s.Beliefs[i], s.Beliefs[j] = s.Beliefs[j], s.Beliefs[i] })
		rng.Shuffle(len(s.Grants), func(i, j int) { s.Grants[i], s.Grants[j] = s.Grants[j], s.Grants[i] })
		got, err := json.Marshal(Check(s, Options{}))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantJSON) {
			t.Fatalf("run %d: got %s, want %s", i, got, wantJSON)
		}
	}
}

// BenchmarkCheckLocks measures Check on a history with lock records: 10,000
// store ops and the lock ops around their grants.
func BenchmarkCheckLocks(b *testing.B) {
	h := genHistory(rand.New(rand.NewPCG(42, 42)), genConfig{resources: 3, clients: 4, ops: 10_000, unknownRate: 0.02, staleRate: 0.3, readers: 2, locks: true})
	if v := Check(h, Options{}); v.Kind != VerdictPass {
		b.Fatalf("got %v, want %v: %+v", v.Kind, VerdictPass, v)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Check(h, Options{})
	}
	b.ReportMetric(float64(len(h.LockOps)), "lockops/history")
}
