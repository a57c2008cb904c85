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

// grant builds a closed grant.
func grant(res, client string, tok uint64, start, end time.Duration, step uint64) Grant {
	return Grant{Resource: res, Client: client, Token: tok, Start: start, End: end, Step: step}
}

// openGrant builds a grant still held at the end of the run.
func openGrant(res, client string, tok uint64, start time.Duration, step uint64) Grant {
	return Grant{Resource: res, Client: client, Token: tok, Start: start, Open: true, Step: step}
}

// write builds a write op.
func write(id int, client, res string, tok uint64, val int64, call, ret time.Duration, out Outcome) StoreOp {
	return StoreOp{ID: id, Client: client, Resource: res, Kind: OpWrite, Token: tok, Value: val, Call: call, Return: ret, Outcome: out}
}

// read builds a read op that returned (val, tok).
func read(id int, client, res string, call, ret time.Duration, val int64, tok uint64) StoreOp {
	return StoreOp{ID: id, Client: client, Resource: res, Kind: OpRead, Call: call, Return: ret, Outcome: OutcomeAccepted, ReadValue: val, ReadToken: tok}
}

// apply builds a store apply-log entry.
func apply(res, client string, tok uint64, val int64, accepted bool, at time.Duration, step uint64) StoreApply {
	return StoreApply{Resource: res, Client: client, Token: tok, Value: val, Accepted: accepted, At: at, Step: step}
}

// kleppmann is the classic fencing scenario: A is granted token 1, writes,
// pauses past its lease expiry, B is granted token 2 and writes, then A wakes
// and writes with token 1. staleAccepted says whether the (broken) store
// accepts A's stale write. Besides the store records it holds what the lock
// service and the clients record: lock ops, a renewal, lease ends and
// beliefs (A believes it holds the lock until the store fences it out).
func kleppmann(staleAccepted bool) History {
	staleOut, readVal, readTok := OutcomeRejected, int64(20), uint64(2)
	if staleAccepted {
		staleOut, readVal, readTok = OutcomeAccepted, 10, 1
	}
	a := grant("file", "A", 1, 0, ms(10000), 1) // expires while A is paused
	a.Reason = EndExpired
	b := grant("file", "B", 2, ms(11000), ms(20000), 2)
	b.Reason = EndReleased
	return History{
		Grants: []Grant{a, b},
		Ops: []StoreOp{
			write(1, "A", "file", 1, 5, ms(500), ms(600), OutcomeAccepted),
			write(2, "B", "file", 2, 20, ms(12000), ms(12100), OutcomeAccepted),
			write(3, "A", "file", 1, 10, ms(15000), ms(15100), staleOut),
			read(4, "C", "file", ms(16000), ms(16100), readVal, readTok),
		},
		Applies: []StoreApply{
			apply("file", "A", 1, 5, true, ms(550), 3),
			apply("file", "B", 2, 20, true, ms(12050), 4),
			apply("file", "A", 1, 10, staleAccepted, ms(15050), 5),
		},
		LockOps: []LockOp{
			lockOp(1, "A", "file", LockAcquire, 1, 0, ms(50), LockGranted),
			lockOp(2, "A", "file", LockRenew, 1, ms(300), ms(350), LockRenewed),
			lockOp(3, "A", "file", LockRenew, 1, ms(640), 0, LockUnknown), // sent as the pause began
			lockOp(4, "B", "file", LockAcquire, 0, ms(5000), ms(5050), LockBusy),
			lockOp(5, "B", "file", LockAcquire, 2, ms(10990), ms(11050), LockGranted),
			lockOp(6, "B", "file", LockRelease, 2, ms(19990), ms(20050), LockReleased),
			lockOp(7, "A", "file", LockAcquire, 0, ms(16000), ms(16050), LockBusy), // A tries again later
		},
		Renewals: []Renewal{{Resource: "file", Client: "A", Token: 1, Request: 2, At: ms(320), Step: 6}},
		Ends: []GrantEnd{
			{Resource: "file", Client: "A", Token: 1, Reason: EndExpired, At: ms(10000), Step: 7},
			{Resource: "file", Client: "B", Token: 2, Reason: EndReleased, At: ms(20000), Step: 8},
		},
		Beliefs: []Belief{
			{Client: "A", Resource: "file", Token: 1, From: ms(50), To: ms(15100), Reason: "fenced-out"},
			{Client: "B", Resource: "file", Token: 2, From: ms(11050), To: ms(19990), Reason: "releasing"},
		},
		End: ms(21000),
	}
}

// lockOp builds a lock op; tok is the token sent (renew, release) or granted
// (acquire).
func lockOp(id int, client, res string, kind LockKind, tok uint64, call, ret time.Duration, out LockStatus) LockOp {
	return LockOp{ID: id, Client: client, Resource: res, Kind: kind, Request: uint64(100 + id), Token: tok, Call: call, Return: ret, Outcome: out}
}

// TestCanaries checks that each hand-built history fails exactly its
// property, proving every check can fire and fires alone.
func TestCanaries(t *testing.T) {
	tests := []struct {
		name string
		h    History
		want string
	}{
		{"S1 token reissued", History{Grants: []Grant{
			grant("x", "A", 1, 0, ms(10), 1),
			grant("y", "B", 1, ms(5), ms(15), 2),
		}}, "S1"},
		{"S1 token decreases", History{Grants: []Grant{
			grant("x", "A", 2, 0, ms(10), 1),
			grant("y", "B", 1, ms(5), ms(15), 2),
		}}, "S1"},
		{"S1 equal start ordered by step", History{Grants: []Grant{
			grant("y", "B", 1, ms(5), ms(15), 7),
			grant("x", "A", 2, ms(5), ms(10), 6),
		}}, "S1"},
		{"S2 overlapping grants", History{Grants: []Grant{
			grant("x", "A", 1, 0, ms(10), 1),
			grant("x", "B", 2, ms(5), ms(15), 2),
		}}, "S2"},
		{"S2 grant while open", History{Grants: []Grant{
			openGrant("x", "A", 1, 0, 1),
			grant("x", "B", 2, ms(50), ms(60), 2),
		}}, "S2"},
		{"S2 overlap with an earlier long grant", History{Grants: []Grant{
			grant("x", "B", 3, ms(100), ms(110), 3), // overlaps nothing...
			grant("x", "C", 4, ms(110), ms(120), 4), // ...and nor does this,
			grant("x", "D", 2, ms(50), ms(60), 2),   // but this starts inside A's
			grant("x", "A", 1, 0, ms(100), 1),
		}}, "S2"},
		{"S3 stale token accepted", History{
			Grants: []Grant{
				grant("x", "A", 1, 0, ms(10), 1),
				grant("x", "B", 2, ms(10), ms(20), 2),
			},
			Applies: []StoreApply{
				apply("x", "B", 2, 20, true, ms(12), 3),
				apply("x", "A", 1, 10, true, ms(13), 4),
			},
		}, "S3"},
		{"S4 wrong client", History{
			Grants:  []Grant{grant("x", "A", 1, 0, ms(10), 1)},
			Applies: []StoreApply{apply("x", "B", 1, 10, true, ms(5), 2)},
		}, "S4"},
		{"S4 wrong resource", History{
			Grants:  []Grant{grant("x", "A", 1, 0, ms(10), 1)},
			Applies: []StoreApply{apply("y", "A", 1, 10, true, ms(5), 2)},
		}, "S4"},
		{"S4 token zero", History{
			Applies: []StoreApply{apply("x", "A", 0, 10, true, ms(5), 2)},
		}, "S4"},
		{"S4 token never granted", History{
			Grants:  []Grant{grant("x", "A", 1, 0, ms(10), 1)},
			Applies: []StoreApply{apply("x", "A", 7, 10, true, ms(5), 2)},
		}, "S4"},
		{"S5 acknowledged write the store rejected", History{
			Grants:  []Grant{grant("x", "A", 1, 0, ms(10), 1)},
			Ops:     []StoreOp{write(1, "A", "x", 1, 10, ms(1), ms(3), OutcomeAccepted)},
			Applies: []StoreApply{apply("x", "A", 1, 10, false, ms(2), 2)},
		}, "S5"},
		{"S5 acknowledged write forgotten across a store restart", History{
			Grants: []Grant{
				grant("x", "B", 1, 0, ms(10), 1),
				grant("x", "A", 2, ms(10), ms(20), 2),
			},
			Ops: []StoreOp{write(1, "A", "x", 2, 20, ms(11), ms(12), OutcomeAccepted)},
			// A's acceptance is missing from the log, and after the restart
			// the store accepts B's late write with token 1.
			Applies:       []StoreApply{apply("x", "B", 1, 10, true, ms(31), 3)},
			StoreRestarts: []StoreRestart{{At: ms(30), Step: 4}},
		}, "S5"},
		{"S5 acknowledged grant the service never made", History{
			Grants: []Grant{grant("x", "A", 1, 0, ms(10), 1)},
			LockOps: []LockOp{
				lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
				lockOp(2, "B", "x", LockAcquire, 2, ms(20), ms(21), LockGranted),
			},
		}, "S5"},
		{"S5 acknowledged grant lost and its token reissued", History{
			Grants:  []Grant{grant("x", "B", 1, ms(5), ms(10), 1)},
			LockOps: []LockOp{lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted)},
		}, "S5"},
		{"S6 renewal after the grant expired", History{
			Grants:   []Grant{{Resource: "x", Client: "A", Token: 1, Start: 0, End: ms(10), Step: 1, Reason: EndExpired}},
			Renewals: []Renewal{{Resource: "x", Client: "A", Token: 1, Request: 7, At: ms(12), Step: 2}},
		}, "S6"},
		{"S6 renewal for a client that does not hold the grant", History{
			Grants:   []Grant{openGrant("x", "A", 1, 0, 1)},
			Renewals: []Renewal{{Resource: "x", Client: "B", Token: 1, Request: 7, At: ms(5), Step: 2}},
		}, "S6"},
		{"S6 renewal of a token never granted", History{
			Grants:   []Grant{openGrant("x", "A", 1, 0, 1)},
			Renewals: []Renewal{{Resource: "x", Client: "A", Token: 2, Request: 7, At: ms(5), Step: 2}},
		}, "S6"},
		{"S6 release after the grant expired", History{
			Grants: []Grant{{Resource: "x", Client: "A", Token: 1, Start: 0, End: ms(10), Step: 1, Reason: EndExpired}},
			Ends: []GrantEnd{
				{Resource: "x", Client: "A", Token: 1, Reason: EndExpired, At: ms(10), Step: 2},
				{Resource: "x", Client: "A", Token: 1, Reason: EndReleased, At: ms(12), Step: 3},
			},
		}, "S6"},
		{"S7 busy while the lock is free", History{
			LockOps: []LockOp{lockOp(1, "B", "x", LockAcquire, 0, 0, ms(1), LockBusy)},
		}, "S7"},
		{"S7 renewed after not-holder", History{
			Grants:   []Grant{openGrant("x", "A", 1, ms(1), 1)},
			Renewals: []Renewal{{Resource: "x", Client: "A", Token: 1, Request: 103, At: ms(5), Step: 2}},
			LockOps: []LockOp{
				lockOp(1, "A", "x", LockAcquire, 1, 0, ms(2), LockGranted),
				lockOp(2, "A", "x", LockRenew, 1, ms(3), ms(4), LockNotHolder),
				lockOp(3, "A", "x", LockRenew, 1, ms(5), ms(6), LockRenewed),
			},
		}, "S7"},
		{"S7 released by a client that does not hold the lock", History{
			Grants: []Grant{openGrant("x", "A", 1, ms(1), 1)},
			LockOps: []LockOp{
				lockOp(1, "A", "x", LockAcquire, 1, 0, ms(2), LockGranted),
				lockOp(2, "B", "x", LockRelease, 1, ms(3), ms(4), LockReleased),
			},
		}, "S7"},
		{"S7 busy for the holder itself", History{
			Grants: []Grant{openGrant("x", "A", 1, ms(1), 1)},
			LockOps: []LockOp{
				lockOp(1, "A", "x", LockAcquire, 1, 0, ms(2), LockGranted),
				lockOp(2, "A", "x", LockAcquire, 0, ms(3), ms(4), LockBusy),
			},
		}, "S7"},
		{"S7 status the service never gives", History{
			LockOps: []LockOp{lockOp(1, "A", "x", LockAcquire, 0, 0, ms(1), LockReleased)},
		}, "S7"},
		{"S8 read of a value never written", History{Ops: []StoreOp{
			read(1, "C", "x", 0, ms(1), 7, 3),
		}}, "S8"},
		{"S8 stale write accepted", History{Ops: []StoreOp{
			write(1, "B", "x", 2, 20, 0, ms(1), OutcomeAccepted),
			write(2, "A", "x", 1, 10, ms(2), ms(3), OutcomeAccepted),
		}}, "S8"},
		{"S8 valid write rejected", History{Ops: []StoreOp{
			write(1, "A", "x", 1, 10, 0, ms(1), OutcomeRejected),
		}}, "S8"},
		{"S11 one acquire request granted twice", History{Grants: []Grant{
			{Resource: "x", Client: "A", Token: 1, Request: 7, Start: 0, End: ms(10), Step: 1, Reason: EndReleased},
			{Resource: "x", Client: "A", Token: 2, Request: 7, Start: ms(12), Open: true, Step: 2},
		}}, "S11"},
		{"S11 one keyed attempt granted twice under two request numbers", History{Grants: []Grant{
			{Resource: "x", Client: "A", Token: 1, Request: 7, Key: "A/1", Start: 0, End: ms(10), Step: 1, Reason: EndReleased},
			{Resource: "x", Client: "A", Token: 2, Request: 9, Key: "A/1", Start: ms(12), Open: true, Step: 2},
		}}, "S11"},
		{"S11 a grant no acquire asked for", History{
			Grants: []Grant{
				{Resource: "x", Client: "A", Token: 1, Start: ms(1) / 2, End: ms(5) / 2, Step: 1, Reason: EndReleased},
				{Resource: "x", Client: "A", Token: 2, Start: ms(5), Open: true, Step: 3}, // a late copy of A's acquire, applied again
			},
			LockOps: []LockOp{
				lockOp(1, "A", "x", LockAcquire, 1, 0, ms(1), LockGranted),
				lockOp(2, "A", "x", LockRelease, 1, ms(2), ms(3), LockReleased),
			},
		}, "S11"},
		{"S8 read goes back in time", History{Ops: []StoreOp{
			write(1, "A", "x", 1, 10, 0, ms(1), OutcomeAccepted),
			write(2, "A", "x", 1, 11, ms(2), ms(3), OutcomeAccepted),
			read(3, "C", "x", ms(4), ms(5), 10, 1),
		}}, "S8"},
		{"S8 unknown write seen then unseen", History{Ops: []StoreOp{
			{ID: 1, Client: "A", Resource: "x", Kind: OpWrite, Token: 1, Value: 10, Call: 0, Outcome: OutcomeUnknown},
			read(2, "C", "x", ms(2), ms(3), 10, 1),
			read(3, "C", "x", ms(4), ms(5), 0, 0),
		}}, "S8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.h, Options{})
			if got, want := properties(v), []string{tt.want}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
			}
			if got, want := v.Kind, VerdictViolation; got != want {
				t.Errorf("got %v, want %v", got, want)
			}
			if got, want := v.Property(), tt.want; got != want {
				t.Errorf("got %v, want %v", got, want)
			}
			for _, x := range v.Violations {
				if x.Detail == "" || !strings.HasSuffix(x.Detail, ".") || strings.ToUpper(x.Detail[:1]) != x.Detail[:1] {
					t.Errorf("got detail %q, want one full sentence", x.Detail)
				}
			}
		})
	}
}

// TestPassing checks realistic and edge-case histories that are safe.
func TestPassing(t *testing.T) {
	unknownWrite := StoreOp{ID: 1, Client: "A", Resource: "x", Kind: OpWrite, Token: 1, Value: 10, Call: 0, Outcome: OutcomeUnknown}
	tests := []struct {
		name string
		h    History
	}{
		{"empty", History{}},
		{"kleppmann stale write rejected", kleppmann(false)},
		{"each request granted once; unnamed and lost grants aside", History{Grants: []Grant{
			{Resource: "x", Client: "A", Token: 1, Request: 7, Start: 0, End: ms(10), Step: 1, Reason: EndReleased},
			{Resource: "x", Client: "B", Token: 2, Request: 7, Start: ms(10), End: ms(20), Step: 2, Reason: EndReleased}, // another client's 7
			{Resource: "x", Client: "A", Token: 3, Request: 8, Start: ms(20), End: ms(30), Step: 3, Reason: EndReleased},
			{Resource: "x", Client: "A", Token: 4, Start: ms(30), End: ms(40), Step: 4, Reason: EndReleased},
			{Resource: "x", Client: "A", Token: 5, Start: ms(40), End: ms(50), Step: 5, Reason: EndReleased},
			{Resource: "y", Client: "C", Token: 6, Request: 9, Start: ms(50), Step: 6, Lost: true},
			{Resource: "y", Client: "C", Token: 7, Request: 9, Start: ms(60), End: ms(70), Step: 7, Reason: EndReleased},             // the lost one's token taken back
			{Resource: "y", Client: "C", Token: 8, Request: 9, Key: "C/2", Start: ms(70), End: ms(80), Step: 8, Reason: EndReleased}, // keyed: another attempt
			{Resource: "y", Client: "C", Token: 9, Request: 10, Key: "C/3", Start: ms(80), Open: true, Step: 9},
		}}},
		{"grant ends exactly when the next starts", History{Grants: []Grant{
			grant("x", "A", 1, 0, ms(10), 1),
			grant("x", "B", 2, ms(10), ms(20), 2),
			openGrant("x", "C", 3, ms(20), 3),
			grant("y", "A", 4, ms(20), ms(30), 4), // other resources may overlap
		}}},
		{"holder writes several times with one token", History{
			Grants: []Grant{openGrant("x", "A", 1, 0, 1)},
			Ops: []StoreOp{
				write(1, "A", "x", 1, 10, ms(1), ms(2), OutcomeAccepted),
				write(2, "A", "x", 1, 11, ms(3), ms(4), OutcomeAccepted),
				read(3, "A", "x", ms(5), ms(6), 11, 1),
			},
			Applies: []StoreApply{
				apply("x", "A", 1, 10, true, ms(1), 2),
				apply("x", "A", 1, 11, true, ms(3), 3),
			},
		}},
		{"unknown write applied", History{
			Grants:  []Grant{openGrant("x", "A", 1, 0, 1)},
			Ops:     []StoreOp{unknownWrite, read(2, "C", "x", ms(5), ms(6), 10, 1)},
			Applies: []StoreApply{apply("x", "A", 1, 10, true, ms(1), 2)},
		}},
		{"unknown write lost", History{
			Grants: []Grant{openGrant("x", "A", 1, 0, 1)},
			Ops:    []StoreOp{unknownWrite, read(2, "C", "x", ms(5), ms(6), 0, 0)},
		}},
		{"unknown write applied late", History{
			Grants: []Grant{openGrant("x", "A", 1, 0, 1)},
			Ops: []StoreOp{
				unknownWrite,
				read(2, "C", "x", ms(5), ms(6), 0, 0),
				read(3, "C", "x", ms(50), ms(60), 10, 1),
			},
			Applies: []StoreApply{apply("x", "A", 1, 10, true, ms(40), 2)},
		}},
		{"unknown stale write", History{
			Grants: []Grant{
				grant("x", "A", 1, 0, ms(10), 1),
				openGrant("x", "B", 2, ms(10), 2),
			},
			Ops: []StoreOp{
				write(1, "B", "x", 2, 20, ms(11), ms(12), OutcomeAccepted),
				{ID: 2, Client: "A", Resource: "x", Kind: OpWrite, Token: 1, Value: 10, Call: ms(13), Outcome: OutcomeUnknown},
				read(3, "C", "x", ms(20), ms(21), 20, 2),
			},
			Applies: []StoreApply{
				apply("x", "B", 2, 20, true, ms(11), 3),
				apply("x", "A", 1, 10, false, ms(14), 4),
			},
		}},
		{"unknown read constrains nothing", History{Ops: []StoreOp{
			{ID: 1, Client: "C", Resource: "x", Kind: OpRead, Call: 0, Outcome: OutcomeUnknown, ReadValue: 99, ReadToken: 99},
		}}},
		{"concurrent writes linearize in token order", History{Ops: []StoreOp{
			write(1, "A", "x", 1, 10, 0, ms(10), OutcomeAccepted),
			write(2, "B", "x", 2, 20, ms(1), ms(9), OutcomeAccepted), // B inside A's interval
			read(3, "C", "x", ms(11), ms(12), 20, 2),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.h, Options{})
			if got, want := v.Kind, VerdictPass; got != want {
				t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
			}
			if got, want := v.Property(), ""; got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestKleppmannStaleAccepted checks that a store accepting the paused
// client's stale write is caught both from its own log (S3) and from what
// clients saw (S8).
func TestKleppmannStaleAccepted(t *testing.T) {
	v := Check(kleppmann(true), Options{})
	if got, want := properties(v), []string{"S3", "S8"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
	}
	if got, want := v.Kind, VerdictViolation; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	s8 := v.Violations[len(v.Violations)-1]
	if got, want := s8.Ops, []int{3}; !slices.Equal(got, want) {
		t.Errorf("got S8 ops %v, want %v", got, want)
	}
	if got, want := s8.At, ms(15000); got != want {
		t.Errorf("got S8 at %v, want %v", got, want)
	}
	if !strings.Contains(s8.Detail, `"file"`) || !strings.Contains(s8.Detail, "4 store ops") {
		t.Errorf("got S8 detail %q, want it to name the resource and op count", s8.Detail)
	}
}

// TestViolationOrder checks that violations are ordered by property, then
// time, whatever order they were found in.
func TestViolationOrder(t *testing.T) {
	h := History{
		Grants: []Grant{
			grant("x", "A", 3, 0, ms(10), 1),
			grant("x", "B", 2, ms(5), ms(15), 2), // S1 and S2
			grant("y", "C", 1, ms(1), ms(15), 3), // S1 (before B's)
		},
		Applies: []StoreApply{apply("z", "D", 9, 1, true, ms(2), 4)}, // S4
	}
	v := Check(h, Options{})
	var got []string
	for _, x := range v.Violations {
		got = append(got, x.Property+"@"+x.At.String())
	}
	want := []string{"S1@1ms", "S1@5ms", "S2@5ms", "S4@2ms"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestStepBudgetIsUnknown checks that a search out of steps yields Unknown,
// never Pass, naming the resource and the budget, and that it does so for
// every run: the budget counts model steps, not time. The history has a
// read in the middle of resource r0 that saw a value nobody wrote, so the
// quick search cannot prove it, and the complete search needs more than
// 100 steps to refute it.
func TestStepBudgetIsUnknown(t *testing.T) {
	h := genHistory(rand.New(rand.NewPCG(1, 2)), genConfig{resources: 2, clients: 3, ops: 4000, unknownRate: 0.1, staleRate: 0.5, readers: 6})
	for i := len(h.Ops) / 2; i < len(h.Ops); i++ {
		if op := &h.Ops[i]; op.Resource == "r0" && op.Kind == OpRead && op.Outcome == OutcomeAccepted {
			op.ReadValue = -1
			break
		}
	}
	if got, want := properties(Check(h, Options{})), []string{"S8"}; !slices.Equal(got, want) {
		t.Fatalf("sanity: got %v, want %v", got, want)
	}
	if v := Check(h, Options{Steps: 100}); v.Kind != VerdictViolation {
		t.Fatalf("got %v, want the token-order procedure to refute it without the search (verdict %+v)", v.Kind, v)
	}
	v := Check(h, Options{Steps: 100, SearchOnly: true})
	if got, want := v.Kind, VerdictUnknown; got != want {
		t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
	}
	if !strings.Contains(v.Unknown, "budget of 100 model steps") || !strings.Contains(v.Unknown, `"r0"`) {
		t.Errorf("got unknown reason %q, want it to name the budget and resource", v.Unknown)
	}
	for range 3 {
		if again := Check(h, Options{Steps: 100, SearchOnly: true}); !reflect.DeepEqual(again, v) {
			t.Fatalf("the same budget gave %+v, then %+v", v, again)
		}
	}
	if got, want := v.Property(), ""; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestViolationBeatsUnknown checks that a refutation found elsewhere wins over
// an inconclusive linearizability check.
func TestViolationBeatsUnknown(t *testing.T) {
	h := genHistory(rand.New(rand.NewPCG(3, 4)), genConfig{resources: 1, clients: 3, ops: 3000, unknownRate: 0.1, staleRate: 0.5, readers: 6})
	h.Grants = append(h.Grants, h.Grants[0]) // S1: token reissued, S2: overlap
	v := Check(h, Options{Steps: 1})
	if got, want := v.Kind, VerdictViolation; got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, want := properties(v), []string{"S1", "S2"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestGeneratedHistoriesPass checks that histories of a correct simulation
// pass at several shapes, including heavy ambiguity.
func TestGeneratedHistoriesPass(t *testing.T) {
	tests := []struct {
		name string
		cfg  genConfig
	}{
		{"small", genConfig{resources: 1, clients: 2, ops: 50}},
		{"stale writers", genConfig{resources: 3, clients: 3, ops: 600, staleRate: 1}},
		{"ambiguous", genConfig{resources: 2, clients: 3, ops: 600, unknownRate: 0.3, staleRate: 0.5, readers: 3}},
		{"with locks", genConfig{resources: 3, clients: 3, ops: 600, staleRate: 0.5, readers: 1, locks: true}},
		{"with ambiguous locks", genConfig{resources: 2, clients: 4, ops: 600, unknownRate: 0.3, staleRate: 0.5, readers: 2, locks: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := genHistory(rand.New(rand.NewPCG(uint64(i), 99)), tt.cfg)
			v := Check(h, Options{})
			if got, want := v.Kind, VerdictPass; got != want {
				t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
			}
		})
	}
}

// TestDeterminism checks that identical input gives identical output, and
// that the order of Ops and Grants (which carry their own times) does not
// matter.
func TestDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	h := genHistory(rng, genConfig{resources: 3, clients: 3, ops: 900, unknownRate: 0.1, staleRate: 0.5, readers: 2})
	// Break every property.
	h.Grants = append(h.Grants, h.Grants[3], grant("r1", "X", 1000, ms(1), ms(2000), 0))
	for i := range h.Applies {
		if h.Applies[i].Accepted && h.Applies[i].Resource == "r1" && h.Applies[i].Token > 3 {
			h.Applies = append(h.Applies, apply("r1", "Y", 1, 1, true, h.Applies[i].At+1, 0))
			break
		}
	}
	for i := range h.Ops {
		if h.Ops[i].Kind == OpRead && h.Ops[i].Outcome == OutcomeAccepted {
			h.Ops[i].ReadValue = -1
		}
	}

	want := Check(h, Options{})
	if got, wantP := properties(want), []string{"S1", "S2", "S3", "S4", "S8"}; !slices.Equal(got, wantP) {
		t.Fatalf("got %v, want %v", got, wantP)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		shuffled := h
		shuffled.Ops = slices.Clone(h.Ops)
		shuffled.Grants = slices.Clone(h.Grants)
		rng.Shuffle(len(shuffled.Ops), func(i, j int) { shuffled.Ops[i], shuffled.Ops[j] = shuffled.Ops[j], shuffled.Ops[i] })
		rng.Shuffle(len(shuffled.Grants), func(i, j int) { shuffled.Grants[i], shuffled.Grants[j] = shuffled.Grants[j], shuffled.Grants[i] })
		got := Check(shuffled, Options{})
		gotJSON, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("run %d: got %s, want %s", i, gotJSON, wantJSON)
		}
	}
}

// TestLinearizabilityInfoVisualizes checks that the exported porcupine pieces
// work with porcupine.Visualize and agree with Check.
func TestLinearizabilityInfoVisualizes(t *testing.T) {
	tests := []struct {
		name string
		h    History
		want porcupine.CheckResult
	}{
		{"pass", kleppmann(false), porcupine.Ok},
		{"fail", kleppmann(true), porcupine.Illegal},
		{"multi-resource", genHistory(rand.New(rand.NewPCG(7, 8)), genConfig{resources: 3, clients: 2, ops: 120, unknownRate: 0.2, readers: 1}), porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, ops, res, info, _ := LinearizabilityInfo(tt.h, 0)
			if got, want := res, tt.want; got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
			answered := 0 // reads without an answer constrain nothing and are left out
			for _, op := range tt.h.Ops {
				if op.Kind == OpWrite || op.Outcome == OutcomeAccepted {
					answered++
				}
			}
			if got, want := len(ops), answered; got != want {
				t.Errorf("got %v ops, want %v", got, want)
			}
			var buf bytes.Buffer
			if err := porcupine.Visualize(model, info, &buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "write(") {
				t.Errorf("got visualization without described ops")
			}
		})
	}
}

// TestStrings checks the String methods, including out-of-range values.
func TestStrings(t *testing.T) {
	tests := []struct {
		got  interface{ String() string }
		want string
	}{
		{OpWrite, "write"},
		{OpRead, "read"},
		{OpKind(9), "OpKind(9)"},
		{OutcomeAccepted, "accepted"},
		{OutcomeRejected, "rejected"},
		{OutcomeUnknown, "unknown"},
		{Outcome(9), "Outcome(9)"},
		{VerdictPass, "pass"},
		{VerdictViolation, "violation"},
		{VerdictLiveness, "liveness"},
		{VerdictUnknown, "unknown"},
		{VerdictKind(9), "VerdictKind(9)"},
	}
	for _, tt := range tests {
		if got := tt.got.String(); got != tt.want {
			t.Errorf("got %v, want %v", got, tt.want)
		}
	}
}

// TestJSON checks that histories and verdicts round-trip through JSON with
// their enums spelled out.
func TestJSON(t *testing.T) {
	h := kleppmann(false)
	h.Ops = append(h.Ops, StoreOp{ID: 9, Client: "D", Resource: "file", Kind: OpRead, Call: ms(1), Outcome: OutcomeUnknown})
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"write"`, `"kind":"read"`, `"outcome":"rejected"`, `"outcome":"unknown"`, `"read_token":2`, `"grants":[`, `"open":false`} {
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

	for _, v := range []Verdict{Check(kleppmann(true), Options{}), {Kind: VerdictUnknown, Unknown: "why"}, {Kind: VerdictLiveness}, {Kind: VerdictPass}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"kind":"`+v.Kind.String()+`"`) {
			t.Errorf("got %s, want kind spelled out", b)
		}
		var back Verdict
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Errorf("got %+v, want %+v", back, v)
		}
	}

	for _, bad := range []string{`{"kind":"maybe"}`, `{"kind":3}`} {
		var v Verdict
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("got no error for %s, want one", bad)
		}
	}
	if _, err := json.Marshal(StoreOp{Outcome: Outcome(7)}); err == nil {
		t.Errorf("got no error for an invalid outcome, want one")
	}
}

// TestEmptyGrantOverlapsNothing: a grant holds [Start, End), so one with
// End == Start holds no instant and S2 cannot set it against another (a
// live run derives such a grant when a client learned of it only after its
// lease could have run out); the same grant holding one nanosecond inside
// another's lease is the canary.
func TestEmptyGrantOverlapsNothing(t *testing.T) {
	held := Grant{Resource: "r", Client: "a", Token: 5, Start: time.Second, End: 2 * time.Second, Reason: "released"}
	for _, c := range []struct {
		name string
		g    Grant
		want int
	}{
		{"empty, inside another's lease", Grant{Resource: "r", Client: "b", Token: 3, Start: 1500 * time.Millisecond, End: 1500 * time.Millisecond, Reason: "expired"}, 0},
		{"one nanosecond, inside another's lease", Grant{Resource: "r", Client: "b", Token: 3, Start: 1500 * time.Millisecond, End: 1500*time.Millisecond + 1, Reason: "expired"}, 1},
	} {
		if vs := checkGrantOverlap([]Grant{held, c.g}); len(vs) != c.want {
			t.Errorf("%s: %d S2 violations %v, want %d", c.name, len(vs), vs, c.want)
		}
	}
}
