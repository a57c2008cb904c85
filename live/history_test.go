package live

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/live/liveclient"
)

const ms = time.Millisecond

func acq(id int, client, res string, tok uint64, call, ret time.Duration, out checker.LockStatus) checker.LockOp {
	return checker.LockOp{ID: id, Client: client, Resource: res, Kind: checker.LockAcquire, Token: tok, Call: call, Return: ret, Outcome: out}
}

func s2(ops []checker.LockOp, skews []span) bool {
	h := checker.History{LockOps: ops, End: 10 * time.Second,
		Grants: deriveGrants(ops, map[string]time.Duration{"a": time.Second, "b": time.Second}, 1000, skews, 10*time.Second)}
	for _, v := range checker.Check(h, checker.Options{}).Violations {
		if v.Property == "S2" {
			return true
		}
	}
	return false
}

func TestDerivedGrants(t *testing.T) {
	for _, c := range []struct {
		name  string
		ops   []checker.LockOp
		skews []span
		want  bool
	}{
		{"canary: b granted inside a's lease", []checker.LockOp{
			acq(0, "a", "r", 1, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r", 2, 500*ms, 510*ms, checker.LockGranted),
		}, nil, true},
		{"b granted after a's release call", []checker.LockOp{
			acq(0, "a", "r", 1, 0, 10*ms, checker.LockGranted),
			{ID: 1, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 1, Call: 300 * ms, Outcome: checker.LockUnknown},
			acq(2, "b", "r", 2, 400*ms, 410*ms, checker.LockGranted),
		}, nil, false},
		{"b granted after a's lease, renewal included", []checker.LockOp{
			acq(0, "a", "r", 1, 0, 10*ms, checker.LockGranted),
			{ID: 1, Client: "a", Resource: "r", Kind: checker.LockRenew, Token: 1, Call: 400 * ms, Return: 410 * ms, Outcome: checker.LockRenewed},
			acq(2, "b", "r", 2, 1200*ms, 1210*ms, checker.LockGranted),
		}, nil, true},
		{"a's grant may come from its unanswered acquire: its lease from then", []checker.LockOp{
			acq(0, "a", "r", 0, 0, 0, checker.LockUnknown),
			acq(1, "a", "r", 5, 790*ms, 800*ms, checker.LockGranted),
			acq(2, "b", "r", 7, 1200*ms, 1210*ms, checker.LockGranted),
		}, nil, false},
		{"a skewed server clock voids the lease bound", []checker.LockOp{
			acq(0, "a", "r", 1, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r", 2, 500*ms, 510*ms, checker.LockGranted),
		}, []span{{200 * ms, 300 * ms}}, false},
		{"a skew long before leaves the bound", []checker.LockOp{
			acq(0, "a", "r", 1, 5*time.Second, 5010*ms, checker.LockGranted),
			acq(1, "b", "r", 2, 5500*ms, 5510*ms, checker.LockGranted),
		}, []span{{200 * ms, 300 * ms}}, true},
	} {
		if got := s2(c.ops, c.skews); got != c.want {
			t.Errorf("%s: S2 %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTokensFeasible(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []checker.LockOp
		want bool
	}{
		{"concurrent acquires of two resources returned out of token order", []checker.LockOp{
			acq(0, "a", "r1", 2, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r2", 1, 5*ms, 20*ms, checker.LockGranted),
		}, true},
		{"token 1 asked for after token 2 returned", []checker.LockOp{
			acq(0, "a", "r1", 2, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r2", 1, 15*ms, 20*ms, checker.LockGranted),
		}, false},
		{"the same, but b's unanswered acquire came first", []checker.LockOp{
			acq(0, "b", "r2", 0, 0, 0, checker.LockUnknown),
			acq(1, "a", "r1", 2, 1*ms, 10*ms, checker.LockGranted),
			acq(2, "b", "r2", 1, 15*ms, 20*ms, checker.LockGranted),
		}, true},
		{"a holder told its grant twice", []checker.LockOp{
			acq(0, "a", "r1", 1, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r2", 2, 20*ms, 30*ms, checker.LockGranted),
			acq(2, "a", "r1", 1, 40*ms, 50*ms, checker.LockGranted),
		}, true},
		{"a token granted twice", []checker.LockOp{
			acq(0, "a", "r1", 1, 0, 10*ms, checker.LockGranted),
			acq(1, "b", "r2", 1, 0, 10*ms, checker.LockGranted),
		}, false},
	} {
		if got := tokensFeasible(c.ops); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCheckDropsOnlyDerivationS1: an S1 finding the windows explain is
// dropped, one they cannot explain stays.
func TestCheckDropsOnlyDerivationS1(t *testing.T) {
	for _, c := range []struct {
		ops  []checker.LockOp
		want checker.VerdictKind
	}{
		{[]checker.LockOp{acq(0, "a", "r1", 2, 0, 10*ms, checker.LockGranted), acq(1, "b", "r2", 1, 5*ms, 20*ms, checker.LockGranted)}, checker.VerdictPass},
		{[]checker.LockOp{acq(0, "a", "r1", 2, 0, 10*ms, checker.LockGranted), acq(1, "b", "r2", 1, 15*ms, 20*ms, checker.LockGranted)}, checker.VerdictViolation},
	} {
		h := checker.History{LockOps: c.ops, End: time.Second,
			Grants: deriveGrants(c.ops, map[string]time.Duration{"a": 100 * ms, "b": 100 * ms}, 1000, nil, time.Second)}
		if v := check(h, &run{}); v.Kind != c.want {
			t.Errorf("%+v: verdict %v %v, want %v", c.ops, v.Kind, v.Violations, c.want)
		}
	}
}

// TestCheckTokensPerResource: a target with per-resource tokens is not
// held to one order across resources, but still to one per resource.
func TestCheckTokensPerResource(t *testing.T) {
	for _, c := range []struct {
		ops  []checker.LockOp
		want checker.VerdictKind
	}{
		{[]checker.LockOp{acq(0, "a", "r1", 1, 0, 10*ms, checker.LockGranted), acq(1, "b", "r2", 1, 20*ms, 30*ms, checker.LockGranted)}, checker.VerdictPass},
		{[]checker.LockOp{acq(0, "a", "r1", 2, 0, 10*ms, checker.LockGranted), acq(1, "b", "r1", 1, 200*ms, 210*ms, checker.LockGranted)}, checker.VerdictViolation},
	} {
		h := checker.History{LockOps: c.ops, End: time.Second,
			Grants: deriveGrants(c.ops, map[string]time.Duration{"a": 100 * ms, "b": 100 * ms}, 1000, nil, time.Second)}
		if v := check(h, &run{info: TargetInfo{Name: "x", TokensPerResource: true}}); v.Kind != c.want {
			t.Errorf("%+v: verdict %v %v, want %v", c.ops, v.Kind, v.Violations, c.want)
		}
	}
}

// TestCheckHolderBusyAfterUnknownAcquire: the lock API answers a
// holder's acquire under a new request id "held" (409), so after an
// acquire whose answer was lost — which may have granted — the same
// client's next acquire may be answered busy with nobody else near the
// lock. That is the service keeping its contract, not an answer no lock
// could give: no violation. A busy answer that nothing can explain (no
// unknown acquire of the client before it) still is one.
func TestCheckHolderBusyAfterUnknownAcquire(t *testing.T) {
	unknown := checker.LockOp{ID: 0, Client: "a", Resource: "r", Kind: checker.LockAcquire, Call: 0, Outcome: checker.LockUnknown}
	busy := acq(1, "a", "r", 0, 500*ms, 510*ms, checker.LockBusy)
	for _, c := range []struct {
		name string
		ops  []checker.LockOp
		want checker.VerdictKind
	}{
		{"busy after the client's unknown acquire", []checker.LockOp{unknown, busy}, checker.VerdictPass},
		{"busy with nobody holding", []checker.LockOp{{ID: 0, Client: "a", Resource: "r", Kind: checker.LockAcquire, Call: 0, Return: 10 * ms, Outcome: checker.LockBusy}}, checker.VerdictViolation},
		// The unanswered acquire (a waiter parked at the leader) may be
		// granted after the client's next grant and release (live swarm
		// seed 4): the busy answer after them is still explained.
		{"busy after the client's unknown acquire, its own grant and release", []checker.LockOp{unknown,
			acq(1, "a", "r", 5, 100*ms, 110*ms, checker.LockGranted),
			{ID: 2, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 5, Call: 150 * ms, Return: 160 * ms, Outcome: checker.LockReleased},
			acq(3, "a", "r", 0, 500*ms, 510*ms, checker.LockBusy)}, checker.VerdictPass},
	} {
		h := checker.History{LockOps: c.ops, End: time.Second,
			Grants: deriveGrants(c.ops, map[string]time.Duration{"a": 100 * ms}, 1000, nil, time.Second)}
		if v := check(h, &run{}); v.Kind != c.want {
			t.Errorf("%s: verdict %v %v, want %v", c.name, v.Kind, v.Violations, c.want)
		}
	}
}

// TestCheckHolderBusyAfterUnknownRelease: a holder whose release (or
// renewal) got no answer may still hold the lock — the release never took
// effect, or the renewal stretched the lease — so its next acquire under
// a new request id may be answered busy with nobody else near the lock
// (etcd's mutex with quorum lost; the reference's restart-all-replicas).
// Once the client was granted again, its old hold is over, and a busy
// answer with nobody holding is a violation again.
func TestCheckHolderBusyAfterUnknownRelease(t *testing.T) {
	grant := acq(0, "a", "r", 5, 0, 10*ms, checker.LockGranted)
	unknownRelease := checker.LockOp{ID: 1, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 5, Call: 50 * ms, Outcome: checker.LockUnknown}
	unknownRenew := checker.LockOp{ID: 1, Client: "a", Resource: "r", Kind: checker.LockRenew, Token: 5, Call: 50 * ms, Outcome: checker.LockUnknown}
	busy := acq(2, "a", "r", 0, 80*ms, 90*ms, checker.LockBusy)
	for _, c := range []struct {
		name string
		ops  []checker.LockOp
		want checker.VerdictKind
	}{
		{"busy after the client's unknown release", []checker.LockOp{grant, unknownRelease, busy}, checker.VerdictPass},
		{"busy after the client's unknown renewal", []checker.LockOp{grant, unknownRenew, busy}, checker.VerdictPass},
		{"busy after the client's answered release", []checker.LockOp{grant,
			{ID: 1, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 5, Call: 50 * ms, Return: 60 * ms, Outcome: checker.LockReleased}, busy}, checker.VerdictViolation},
		{"busy after the client's unknown release and a later grant and release", []checker.LockOp{grant, unknownRelease,
			acq(2, "a", "r", 9, 200*ms, 210*ms, checker.LockGranted),
			{ID: 3, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 9, Call: 250 * ms, Return: 260 * ms, Outcome: checker.LockReleased},
			acq(4, "a", "r", 0, 300*ms, 310*ms, checker.LockBusy)}, checker.VerdictViolation},
	} {
		h := checker.History{LockOps: c.ops, End: time.Second,
			Grants: deriveGrants(c.ops, map[string]time.Duration{"a": 100 * ms}, 1000, nil, time.Second)}
		if v := check(h, &run{}); v.Kind != c.want {
			t.Errorf("%s: verdict %v %v, want %v", c.name, v.Kind, v.Violations, c.want)
		}
	}
}

// TestSyntheticTokensLeaveRoom: for a target without tokens, a grant
// leaves room below its synthetic token for an acquire still in flight
// (or unanswered) that may have taken effect first. The case is the
// Kleppmann pause landing on a's acquire: the service granted it, a
// stopped before it could say so, b was answered busy while a held and
// granted once a's lease ran out. S7 must accept it; and with the same
// acquire in flight, a renewal answered to a while b holds is still S7.
func TestSyntheticTokensLeaveRoom(t *testing.T) {
	granted := liveclient.Reply{OK: true}
	busy := liveclient.Reply{Error: liveclient.ErrorBusy}
	for _, c := range []struct {
		name string
		ops  func(r *recorder)
		want bool // S7
	}{
		{"a's unanswered acquire took effect before b's grant", func(r *recorder) {
			r.acquiring() // a's, at 0
			r.acquiring()
			r.lock("b", "r", checker.LockAcquire, 0, 100*ms, 110*ms, busy, true)
			r.acquiring()
			r.lock("b", "r", checker.LockAcquire, 0, 1500*ms, 1510*ms, granted, true)
			r.lock("a", "r", checker.LockAcquire, 0, 0, 0, liveclient.Reply{}, false)
		}, false},
		{"the same after a's acquire was recorded unanswered", func(r *recorder) {
			r.acquiring()
			r.acquiring()
			r.lock("b", "r", checker.LockAcquire, 0, 100*ms, 110*ms, busy, true)
			r.lock("a", "r", checker.LockAcquire, 0, 0, 0, liveclient.Reply{}, false)
			r.acquiring()
			r.lock("b", "r", checker.LockAcquire, 0, 1500*ms, 1510*ms, granted, true)
		}, false},
		{"canary: a renewed while b holds, c's acquire in flight", func(r *recorder) {
			r.acquiring()
			ta := r.lock("a", "r", checker.LockAcquire, 0, 0, 10*ms, granted, true)
			r.acquiring() // c's, never answered
			r.acquiring()
			r.lock("b", "r", checker.LockAcquire, 0, 500*ms, 510*ms, granted, true)
			r.lock("a", "r", checker.LockRenew, ta, 600*ms, 610*ms, granted, true)
			r.lock("c", "r", checker.LockAcquire, 0, 20*ms, 0, liveclient.Reply{}, false)
		}, true},
	} {
		r := newRecorder(false)
		c.ops(r)
		h := checker.History{End: 3 * time.Second}
		r.clients.Fill(&h)
		ttl := map[string]time.Duration{"a": time.Second, "b": time.Second, "c": time.Second}
		h.Grants = deriveGrants(h.LockOps, ttl, 1000, nil, h.End)
		got := false
		for _, v := range checker.Check(h, checker.Options{}).Violations {
			got = got || v.Property == "S7"
		}
		if got != c.want {
			t.Errorf("%s: S7 %v, want %v (ops %+v)", c.name, got, c.want, h.LockOps)
		}
	}
}

// A target whose busy answers do not prove a holder (etcd's TryLock:
// SpuriousBusy) has them left out of the judged history, with a note; any
// other target's busy answer while nobody holds is S7. The refusal is
// left out only from what is judged: the history reported keeps it.
func TestSpuriousBusyIsNotJudged(t *testing.T) {
	rel := checker.LockOp{ID: 2, Client: "a", Resource: "r", Kind: checker.LockRelease, Token: 7, Call: 20 * ms, Return: 30 * ms, Outcome: checker.LockReleased}
	h := checker.History{End: time.Second, LockOps: []checker.LockOp{
		acq(1, "a", "r", 7, 0, 10*ms, checker.LockGranted), rel,
		acq(3, "b", "r", 0, 40*ms, 50*ms, checker.LockBusy), // nobody holds r
	}}
	s7 := func(v checker.Verdict) bool {
		return slices.ContainsFunc(v.Violations, func(v checker.Violation) bool { return v.Property == "S7" })
	}
	strict := &run{info: TargetInfo{Name: "t"}}
	if v := check(h, strict); !s7(v) {
		t.Fatalf("canary: a busy answer while nobody holds, judged: %v, want S7", v)
	}
	lenient := &run{info: TargetInfo{Name: "t", SpuriousBusy: "its refusals may be spurious"}}
	if v := check(h, lenient); s7(v) || v.Kind != checker.VerdictPass {
		t.Fatalf("with SpuriousBusy: %v, want a pass", v)
	}
	if len(lenient.notes) != 1 || !strings.Contains(lenient.notes[0], "1 busy answers not judged: its refusals may be spurious") {
		t.Fatalf("notes %q", lenient.notes)
	}
	if len(h.LockOps) != 3 {
		t.Fatal("the history itself lost the busy answer")
	}
	if (etcdTarget{fenced: true}).Info().SpuriousBusy == "" {
		t.Fatal("etcd's targets must say why their busy answers are not judged")
	}
}
