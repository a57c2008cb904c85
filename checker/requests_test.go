package checker

import (
	"testing"
	"time"
)

// TestGrantsAnswerAcquires: S11 from the clients' side. Every grant must be
// accounted for by an acquire of its client: one answered granted by the
// grant of its token (any number of such acquires may name one token, as a
// holder's fresh acquire answered with its own grant does), one of unknown
// outcome by at most one grant made after its call. Clients without an
// acquire, and lost grants, are not judged.
func TestGrantsAnswerAcquires(t *testing.T) {
	acq := func(id int, client string, tok uint64, call, ret time.Duration, out LockStatus) LockOp {
		return lockOp(id, client, "x", LockAcquire, tok, call, ret, out)
	}
	g := func(client string, tok uint64, start time.Duration) Grant {
		return Grant{Resource: "x", Client: client, Token: tok, Start: start, Open: true, Step: uint64(tok)}
	}
	tests := []struct {
		name       string
		grants     []Grant
		ops        []LockOp
		violations int
	}{
		{"granted acquires account for their tokens", []Grant{g("A", 1, ms(1)), g("A", 2, ms(5))},
			[]LockOp{acq(1, "A", 1, 0, ms(2), LockGranted), acq(2, "A", 2, ms(4), ms(6), LockGranted), acq(3, "A", 2, ms(7), ms(8), LockGranted)}, 0},
		{"a second grant of an answered acquire", []Grant{g("A", 1, ms(1)), g("A", 2, ms(5))},
			[]LockOp{acq(1, "A", 1, 0, ms(2), LockGranted)}, 1},
		{"a grant after a busy answer", []Grant{g("A", 1, ms(5))},
			[]LockOp{acq(1, "A", 0, 0, ms(2), LockBusy)}, 1},
		{"each acquire of unknown outcome takes one grant, made after its call", []Grant{g("A", 1, ms(3)), g("A", 2, ms(9))},
			[]LockOp{acq(1, "A", 0, ms(1), 0, LockUnknown), acq(2, "A", 0, ms(2), ms(4), LockOverloaded)}, 0},
		{"two grants for one acquire of unknown outcome", []Grant{g("A", 1, ms(3)), g("A", 2, ms(9))},
			[]LockOp{acq(1, "A", 0, ms(1), 0, LockNotLeader)}, 1},
		{"a grant before the acquire was called", []Grant{g("A", 1, ms(3))},
			[]LockOp{acq(1, "A", 0, ms(4), 0, LockStale)}, 1},
		{"another client's acquire does not count", []Grant{g("B", 1, ms(3))},
			[]LockOp{acq(1, "A", 0, ms(1), 0, LockUnknown), acq(2, "B", 0, 0, ms(1), LockBusy)}, 1},
		{"a client without acquires, a lost grant", []Grant{g("C", 1, ms(3)), {Resource: "x", Client: "A", Token: 2, Start: ms(4), Lost: true}},
			[]LockOp{acq(1, "A", 0, 0, ms(1), LockBusy)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := checkGrantsAnswerAcquires(History{Grants: tt.grants, LockOps: tt.ops})
			if len(vs) != tt.violations {
				t.Fatalf("%d violations, want %d: %+v", len(vs), tt.violations, vs)
			}
			for _, v := range vs {
				if v.Property != "S11" || v.Detail == "" {
					t.Errorf("violation %+v, want S11 with a detail", v)
				}
			}
		})
	}
}
