package scenarios

import (
	"reflect"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// TestRecorderLockRecords feeds the recorder a scripted sequence of events
// and checks the lock records it builds: first reports win, lock ops pair
// calls with their first answer, beliefs open at a grant and close at their
// end or at the client's restart, and store restarts are recorded.
func TestRecorderLockRecords(t *testing.T) {
	w, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(w, map[string]sim.NodeID{}, false)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(n int, f func()) { w.At(ms(n), "script", f) }
	ev := func(e lockservice.Event) func() { return func() { rec.Observe(e) } }
	a, b := "a", "b"
	call := func(client string, op lockservice.Op, req, tok uint64) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvCall, Op: op, Client: client, Resource: "r", Request: req, Token: tok}
	}
	ret := func(client string, op lockservice.Op, req, tok uint64, st lockservice.Status) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvReturn, Op: op, Client: client, Resource: "r", Request: req, Token: tok, Status: st}
	}
	svc := func(kind lockservice.EventKind, client string, tok, req uint64, reason string) lockservice.Event {
		return lockservice.Event{Kind: kind, Client: client, Resource: "r", Token: tok, Request: req, Reason: reason}
	}

	at(0, func() { rec.NodeStarted(storeNode); rec.NodeStarted(a); rec.NodeStarted(b) }) // boots
	at(1, ev(call(a, lockservice.OpAcquire, 1, 0)))
	at(2, ev(svc(lockservice.EvGranted, a, 5, 0, "")))
	at(3, ev(svc(lockservice.EvGranted, a, 5, 0, ""))) // another replica's report
	at(4, ev(ret(a, lockservice.OpAcquire, 1, 5, lockservice.Granted)))
	at(5, ev(call(a, lockservice.OpRenew, 2, 5)))
	at(6, ev(svc(lockservice.EvRenewed, a, 5, 2, "")))
	at(7, ev(svc(lockservice.EvRenewed, a, 5, 2, ""))) // another replica's report
	at(8, ev(ret(a, lockservice.OpRenew, 2, 0, lockservice.NotLeader)))
	at(9, ev(ret(a, lockservice.OpRenew, 2, 5, lockservice.Renewed))) // a later answer is ignored
	at(10, ev(call(b, lockservice.OpAcquire, 3, 0)))
	at(11, ev(ret(b, lockservice.OpAcquire, 3, 0, lockservice.Busy)))
	at(12, ev(lockservice.Event{Kind: lockservice.EvBeliefEnd, Client: a, Resource: "r", Token: 5, Reason: "releasing"}))
	at(12, ev(call(a, lockservice.OpRelease, 4, 5)))
	at(13, ev(svc(lockservice.EvEnded, a, 5, 0, "released")))
	at(14, ev(svc(lockservice.EvEnded, a, 5, 0, "released")))
	at(15, ev(svc(lockservice.EvEnded, a, 5, 0, "expired"))) // a second, different decision
	at(20, ev(call(b, lockservice.OpAcquire, 6, 0)))
	at(21, ev(svc(lockservice.EvGranted, b, 7, 0, "")))
	at(22, ev(ret(b, lockservice.OpAcquire, 6, 7, lockservice.Granted)))
	at(23, ev(call(b, lockservice.OpAcquire, 8, 0))) // never answered
	at(30, func() { rec.NodeStarted(b); rec.NodeStarted(storeNode); rec.NodeStarted("n1") })
	at(40, ev(call(a, lockservice.OpAcquire, 9, 0)))
	at(41, ev(svc(lockservice.EvGranted, a, 10, 0, "")))
	at(42, ev(ret(a, lockservice.OpAcquire, 9, 10, lockservice.Granted)))
	w.Run(ms(50), 1000)
	h := rec.history()

	// Every scripted action is one step of the world.
	wantGrants := []checker.Grant{
		{Resource: "r", Client: a, Token: 5, Start: ms(2), End: ms(13), Reason: "released", Step: 3},
		{Resource: "r", Client: b, Token: 7, Start: ms(21), Open: true, Step: 19},
		{Resource: "r", Client: a, Token: 10, Start: ms(41), Open: true, Step: 24},
	}
	wantLockOps := []checker.LockOp{
		{ID: 0, Client: a, Resource: "r", Kind: checker.LockAcquire, Request: 1, Token: 5, Call: ms(1), Return: ms(4), Outcome: checker.LockGranted},
		{ID: 1, Client: a, Resource: "r", Kind: checker.LockRenew, Request: 2, Token: 5, Call: ms(5), Return: ms(8), Outcome: checker.LockNotLeader},
		{ID: 2, Client: b, Resource: "r", Kind: checker.LockAcquire, Request: 3, Call: ms(10), Return: ms(11), Outcome: checker.LockBusy},
		{ID: 3, Client: a, Resource: "r", Kind: checker.LockRelease, Request: 4, Token: 5, Call: ms(12), Outcome: checker.LockUnknown},
		{ID: 4, Client: b, Resource: "r", Kind: checker.LockAcquire, Request: 6, Token: 7, Call: ms(20), Return: ms(22), Outcome: checker.LockGranted},
		{ID: 5, Client: b, Resource: "r", Kind: checker.LockAcquire, Request: 8, Call: ms(23), Outcome: checker.LockUnknown},
		{ID: 6, Client: a, Resource: "r", Kind: checker.LockAcquire, Request: 9, Token: 10, Call: ms(40), Return: ms(42), Outcome: checker.LockGranted},
	}
	wantRenewals := []checker.Renewal{{Resource: "r", Client: a, Token: 5, Request: 2, At: ms(6), Step: 7}}
	wantEnds := []checker.GrantEnd{
		{Resource: "r", Client: a, Token: 5, Reason: "released", At: ms(13), Step: 15},
		{Resource: "r", Client: a, Token: 5, Reason: "expired", At: ms(15), Step: 17},
	}
	wantBeliefs := []checker.Belief{
		{Client: a, Resource: "r", Token: 5, From: ms(4), To: ms(12), Reason: "releasing"},
		{Client: b, Resource: "r", Token: 7, From: ms(22), To: ms(30), Reason: "restarted"},
		{Client: a, Resource: "r", Token: 10, From: ms(42), Open: true},
	}
	wantRestarts := []checker.StoreRestart{{At: ms(30), Step: 22}}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"grants", h.Grants, wantGrants},
		{"lock ops", h.LockOps, wantLockOps},
		{"renewals", h.Renewals, wantRenewals},
		{"ends", h.Ends, wantEnds},
		{"beliefs", h.Beliefs, wantBeliefs},
		{"store restarts", h.StoreRestarts, wantRestarts},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, c.got, c.want)
		}
	}
}

// pausedHolderRenews is the built-in scenario in which A's renewal of its
// expired token reaches the service while B holds the lock.
func pausedHolderRenews(t *testing.T) Spec {
	t.Helper()
	spec, ok := Lookup("paused-holder-renews")
	if !ok {
		t.Fatal("paused-holder-renews is missing")
	}
	return spec
}

// TestPausedHolderRenews checks that the reference service passes every
// safety property when a woken holder renews a token that has since been
// re-granted, and that the run records what S6 and S7 judge.
func TestPausedHolderRenews(t *testing.T) {
	spec := pausedHolderRenews(t)
	for seed := uint64(1); seed <= 50; seed++ {
		res, err := Run(spec, seed, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict.Kind != checker.VerdictPass {
			t.Fatalf("seed %d: got %+v, want a pass", seed, res.Verdict)
		}
		h := res.History
		var aToken, bToken uint64
		for _, g := range h.Grants {
			switch g.Client {
			case "a":
				aToken = g.Token
			case "b":
				bToken = g.Token
			}
		}
		wokeAndRenewed := false
		for _, op := range h.LockOps {
			if op.Client == "a" && op.Kind == checker.LockRenew && op.Token == aToken && op.Call > 3*time.Second {
				wokeAndRenewed = true
			}
		}
		renewedB := 0
		for _, n := range h.Renewals {
			if n.Client == "b" && n.Token == bToken {
				renewedB++
			}
		}
		if !wokeAndRenewed || renewedB < 3 || res.Verdict.Metrics.BeliefOverlap.Windows == 0 {
			t.Fatalf("seed %d: want a's renewal of token %d after waking, b's renewals of token %d and a belief overlap; got %v, %d, %+v",
				seed, aToken, bToken, wokeAndRenewed, renewedB, res.Verdict.Metrics.BeliefOverlap)
		}
	}
}

// TestBuiltinLockRecords guards against S5–S7 passing because nothing was
// recorded: every built-in run records lock ops, each granted acquire starts
// a belief, and each ended belief says why.
func TestBuiltinLockRecords(t *testing.T) {
	for _, spec := range Builtin() {
		res, err := Run(spec, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := res.History
		granted := 0
		for _, op := range h.LockOps {
			if op.Kind == checker.LockAcquire && op.Outcome == checker.LockGranted {
				granted++
			}
		}
		if granted == 0 || granted != len(h.Beliefs) || len(h.Ends) == 0 {
			t.Errorf("%s: got %d granted acquires, %d beliefs and %d lease ends, want grants, one belief each, and ends",
				spec.Name, granted, len(h.Beliefs), len(h.Ends))
		}
		for _, b := range h.Beliefs {
			if !b.Open && b.Reason == "" {
				t.Errorf("%s: belief %+v ended without a reason", spec.Name, b)
			}
		}
	}
}
