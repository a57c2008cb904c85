package reference

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// Tests of the leader's wait queue (waitqueue.go), on a network where
// every message takes exactly d: a proposal at the leader commits and is
// answered 2d later, a request sent at t reaches the leader at t+d.

const wd = time.Millisecond

// acquireCommands returns the acquires of a persisted log, in log order.
func acquireCommands(t *testing.T, d *sim.Disk) []loggedCommand {
	t.Helper()
	var out []loggedCommand
	for _, c := range diskCommands(t, d) {
		if c.Kind == CmdAcquire {
			out = append(out, c)
		}
	}
	return out
}

// replyAt returns the single reply to req and when it arrived.
func replyAt(t *testing.T, p *simtest.Probe, req uint64) (lockservice.LockReply, time.Duration) {
	t.Helper()
	var out []simtest.Stamped[lockservice.LockReply]
	for _, r := range p.Lock {
		if r.Msg.Request == req {
			out = append(out, r)
		}
	}
	if len(out) != 1 {
		t.Fatalf("request %d: %d replies %+v, want 1", req, len(out), out)
	}
	return out[0].Msg, out[0].At
}

// Three waiters on a held lock are parked without a log entry, and are
// granted in arrival order, each one commit after the previous holder's
// release applies, through the log: the token is the index of the
// waiter's own acquire entry.
func TestWaitQueueGrantsInArrivalOrderWithoutEntriesWhileParked(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 3, net: fixedLatency(wd)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	// Arrival order c, a, b (not the names' order).
	for i, c := range []string{"c", "a", "b"} {
		p.SendAt(t0+time.Duration(10+i)*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: c, TTL: 30 * time.Second, Request: uint64(10 + i), Wait: 10 * time.Second})
	}
	g.runTo(t, t0+200*time.Millisecond)
	h := p.OnlyLockReply(t, 1)
	if h.Status != lockservice.Granted {
		t.Fatalf("holder: %+v", h)
	}
	if n := len(p.Lock); n != 1 {
		t.Fatalf("waiters were answered while the lock is held: %+v", p.Lock)
	}
	if acq := acquireCommands(t, g.w.Disk(lead)); len(acq) != 1 {
		t.Fatalf("the log holds %d acquires while three wait, want only the holder's: %+v", len(acq), acq)
	}
	if n := g.replica(lead).Waiting(); n != 3 {
		t.Fatalf("%d waiting at the leader, want 3", n)
	}

	// Each holder releases 100 ms after its grant; the next is granted.
	holder, token, req := "h", h.Token, uint64(100)
	at := t0 + 200*time.Millisecond
	var tokens []uint64
	for i, c := range []string{"c", "a", "b"} {
		p.SendAt(at, lead, lockservice.ReleaseRequest{Resource: "r", Client: holder, Token: token, Request: req})
		g.runTo(t, at+100*time.Millisecond)
		if rep := p.OnlyLockReply(t, req); rep.Status != lockservice.Released {
			t.Fatalf("release by %s: %+v", holder, rep)
		}
		rep, when := replyAt(t, p, uint64(10+i))
		// release reaches the leader at +d, commits at +3d; the waiter's
		// acquire is proposed then, commits 2d later and its answer
		// arrives d after that.
		if rep.Status != lockservice.Granted || when != at+6*wd {
			t.Fatalf("waiter %s: %+v at %v, want granted at %v", c, rep, when, at+6*wd)
		}
		// It waited from its arrival to the release's apply at the leader.
		if parked := t0 + time.Duration(10+i)*time.Millisecond + wd; rep.Waited != at+3*wd-parked {
			t.Fatalf("waiter %s: Waited %v, want %v (parked at %v, promoted at %v)", c, rep.Waited, at+3*wd-parked, parked, at+3*wd)
		}
		cmd, ok := commandAt(t, g.w.Disk(lead), rep.Token)
		if !ok || cmd.Kind != CmdAcquire || cmd.Client != c {
			t.Fatalf("token %d is not %s's acquire entry: %+v", rep.Token, c, cmd)
		}
		for j, later := range []string{"c", "a", "b"}[i+1:] {
			if got := p.LockReplies(uint64(10 + i + 1 + j)); len(got) != 0 {
				t.Fatalf("%s answered %+v before its turn", later, got)
			}
		}
		tokens = append(tokens, rep.Token)
		holder, token, req, at = c, rep.Token, req+1, at+100*time.Millisecond
	}
	if !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
		t.Errorf("tokens %v do not increase in grant order", tokens)
	}
	if acq := acquireCommands(t, g.w.Disk(lead)); len(acq) != 4 {
		t.Errorf("the log holds %d acquires, want 4 (one per grant, none for waiting)", len(acq))
	}
	g.checkTablesAgree(t)
}

// A waiter is granted when the holder's lease expires at the leader.
func TestWaitQueueGrantsOnExpiry(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 5, net: fixedLatency(wd)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	const ttl = 300 * time.Millisecond
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: ttl, Request: 1})
	p.SendAt(t0+10*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: ttl, Request: 2, Wait: 5 * time.Second})
	g.runTo(t, t0+time.Second)
	h := p.OnlyLockReply(t, 1)
	e, ok := g.rec.ended(h.Token)
	if !ok || e.Reason != "expired" {
		t.Fatalf("the holder's lease did not expire: %+v %v", e, ok)
	}
	rep, when := replyAt(t, p, 2)
	// The Expire applies at e.At on the first replica to apply it; the
	// leader proposes the waiter then, answered 3d later at the latest.
	if rep.Status != lockservice.Granted || when < e.At || when > e.At+3*wd {
		t.Fatalf("waiter: %+v at %v, want granted within 3d of the expiry at %v", rep, when, e.At)
	}
}

// A waiter whose bound passes is proposed as a plain acquire and answered
// Busy by the log; an acquire beyond the queue's bound is proposed at once.
func TestWaitQueueBoundAndDepth(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 7, net: fixedLatency(wd), edit: func(c *ReplicaConfig) { c.WaitQueueDepth = 1 }})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	p.SendAt(t0+10*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: time.Second, Request: 2, Wait: 200 * time.Millisecond})
	p.SendAt(t0+20*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "x", TTL: time.Second, Request: 3, Wait: 200 * time.Millisecond})
	g.runTo(t, t0+time.Second)
	rep, when := replyAt(t, p, 2)
	// Parked at t0+10ms+d for 200 ms, then proposed: answered 3d later.
	if want := t0 + 10*time.Millisecond + wd + 200*time.Millisecond + 3*wd; rep.Status != lockservice.Busy || when != want {
		t.Fatalf("waiter past its bound: %+v at %v, want busy at %v", rep, when, want)
	}
	rep, when = replyAt(t, p, 3)
	if want := t0 + 20*time.Millisecond + 4*wd; rep.Status != lockservice.Busy || when != want {
		t.Fatalf("acquire beyond the queue's depth: %+v at %v, want busy at once (%v)", rep, when, want)
	}
	var clients []string
	for _, c := range acquireCommands(t, g.w.Disk(lead)) {
		clients = append(clients, c.Client)
	}
	if len(clients) != 3 || clients[1] != "x" || clients[2] != "w" {
		t.Errorf("acquires in the log %v, want h, x (not parked), w (its bound passed)", clients)
	}
}

// A retried waiter keeps its place and is granted once: a copy of the
// parked request parks nothing new, and a copy after the grant is
// answered from the dedup table without an entry.
func TestWaitQueueRetriedWaiterIsGrantedOnce(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 9, net: fixedLatency(wd)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	w := lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: time.Second, Request: 2, Wait: 5 * time.Second}
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	p.SendAt(t0+10*time.Millisecond, lead, w)
	p.SendAt(t0+20*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "x", TTL: time.Second, Request: 3, Wait: 5 * time.Second})
	p.SendAt(t0+30*time.Millisecond, lead, w) // the client's retry
	g.runTo(t, t0+100*time.Millisecond)
	if n := g.replica(lead).Waiting(); n != 2 {
		t.Fatalf("%d waiting, want 2 (the retry keeps w's place)", n)
	}
	h := p.OnlyLockReply(t, 1)
	p.SendAt(t0+100*time.Millisecond, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: h.Token, Request: 4})
	g.runTo(t, t0+200*time.Millisecond)
	first := p.OnlyLockReply(t, 2)
	if first.Status != lockservice.Granted {
		t.Fatalf("w: %+v, want granted ahead of x", first)
	}
	if got := p.LockReplies(3); len(got) != 0 {
		t.Fatalf("x answered %+v while w holds the lock", got)
	}
	entries := len(diskCommands(t, g.w.Disk(lead)))
	p.SendAt(t0+200*time.Millisecond, lead, w) // a late copy
	g.runTo(t, t0+300*time.Millisecond)
	reps := p.LockReplies(2)
	replayed := first
	replayed.Waited = 0 // the table's reply: it does not know this copy waited
	if len(reps) != 2 || reps[1] != replayed {
		t.Fatalf("replies to w %+v, want the grant replayed", reps)
	}
	if n := len(diskCommands(t, g.w.Disk(lead))); n != entries {
		t.Errorf("the late copy made %d entries, want none", n-entries)
	}
}

// When the leader stops leading (isolated, it steps down at CheckQuorum)
// its waiters are answered NotLeader at once; retried with the same
// request id at the new leader, the waiter parks again and is granted
// once when the holder releases there. A hand-over answers them too,
// naming the target.
func TestWaitQueueLeaderChangeAnswersWaiters(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 11, net: fixedLatency(wd)})
	p, probe := simtest.AddProbe(t, g.w, "p")
	old, oldTerm := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, old, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	w := lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: time.Second, Request: 2, Wait: 10 * time.Second}
	p.SendAt(t0+10*time.Millisecond, old, w)
	g.runTo(t, t0+50*time.Millisecond)
	if n := g.replica(old).Waiting(); n != 1 {
		t.Fatalf("%d waiting, want 1", n)
	}
	cut := t0 + 50*time.Millisecond
	g.w.At(cut, "isolate the leader", func() { g.isolate(old, probe) })
	lead, _ := g.awaitLeader(t, g.others(old), oldTerm+1, cut+2*time.Second)
	g.runTo(t, g.w.Now()+500*time.Millisecond) // the old leader steps down
	rep, when := replyAt(t, p, 2)
	if rep.Status != lockservice.NotLeader || when < cut {
		t.Fatalf("waiter at the deposed leader: %+v at %v, want not-leader after the cut at %v", rep, when, cut)
	}
	if n := g.replica(old).Waiting(); n != 0 {
		t.Fatalf("the deposed leader keeps %d waiters", n)
	}

	at := g.w.Now()
	p.SendAt(at, lead, w) // the retry, same request id
	p.SendAt(at+10*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "x", TTL: time.Second, Request: 3, Wait: 10 * time.Second})
	g.runTo(t, at+50*time.Millisecond)
	if n := g.replica(lead).Waiting(); n != 2 {
		t.Fatalf("%d waiting at the new leader, want 2", n)
	}
	h := p.OnlyLockReply(t, 1)
	p.SendAt(at+50*time.Millisecond, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: h.Token, Request: 4})
	g.runTo(t, at+100*time.Millisecond)
	reps := p.LockReplies(2)
	if len(reps) != 2 || reps[1].Status != lockservice.Granted {
		t.Fatalf("replies to the waiter %+v, want not-leader then granted", reps)
	}

	// A hand-over answers the remaining waiter x, naming the target.
	var target sim.NodeID
	g.w.At(at+100*time.Millisecond, "transfer", func() {
		var err error
		if target, err = g.replica(lead).TransferLeadership(lockservice.NoLeader); err != nil {
			t.Errorf("TransferLeadership: %v", err)
		}
	})
	g.runTo(t, at+150*time.Millisecond)
	rep = p.OnlyLockReply(t, 3)
	if rep.Status != lockservice.NotLeader || rep.Leader != target {
		t.Fatalf("waiter at a handing-over leader: %+v, want not-leader naming %d", rep, target)
	}
	grants := g.rec.grants()
	checkGrantOrder(t, g.rec.service())
	checkGrantsFromDistinctRequests(t, grants, g.w.Disk(lead))
}

// A keyed attempt parked twice under two request numbers (the HTTP front
// end submits every call afresh, nodesvc) is one attempt: when the first
// copy is granted, the second is answered with that grant at once, not
// left parked behind its own client's lease until its bound, and the
// answer claims no wait (Waited 0): the lease began when the first copy's
// entry applied, before the second copy's wait ended, so a Waited counted
// to the bound would make the client believe in a lease the leader has
// already started timing (two holders).
func TestWaitQueueKeyedCopyAnsweredWithTheGrant(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 13, net: fixedLatency(wd)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	first := lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: 5 * time.Second, Request: 2, Key: "k", Wait: 2 * time.Second}
	p.SendAt(t0+10*time.Millisecond, lead, first)
	again := first
	again.Request = 3 // the HTTP client's retry of request_id k, renumbered
	p.SendAt(t0+20*time.Millisecond, lead, again)
	g.runTo(t, t0+100*time.Millisecond)
	if n := g.replica(lead).Waiting(); n != 2 {
		t.Fatalf("%d waiting, want 2", n)
	}
	h := p.OnlyLockReply(t, 1)
	rel := t0 + 100*time.Millisecond
	p.SendAt(rel, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: h.Token, Request: 4})
	g.runTo(t, t0+5*time.Second)
	grant, _ := replyAt(t, p, 2)
	if grant.Status != lockservice.Granted {
		t.Fatalf("first copy: %+v, want granted", grant)
	}
	rep, when := replyAt(t, p, 3)
	if rep.Status != lockservice.Granted || rep.Token != grant.Token {
		t.Fatalf("second copy: %+v, want the grant %d", rep, grant.Token)
	}
	if rep.Waited != 0 || when > rel+10*wd {
		t.Errorf("second copy answered at %v with Waited %v; want Waited 0, answered with the grant (by %v)", when, rep.Waited, rel+10*wd)
	}
}

// A keyed attempt the table has already decided is not parked again
// under a new request number: it is answered from the log at once (the
// replayed grant), not after the next holder's lease or its own bound.
func TestWaitQueueDecidedKeyIsNotParked(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 15, net: fixedLatency(wd)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	first := lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: 5 * time.Second, Request: 1, Key: "k", Wait: 2 * time.Second}
	p.SendAt(t0, lead, first)
	g.runTo(t, t0+50*time.Millisecond)
	grant := p.OnlyLockReply(t, 1)
	p.SendAt(t0+50*time.Millisecond, lead, lockservice.ReleaseRequest{Resource: "r", Client: "w", Token: grant.Token, Request: 2})
	p.SendAt(t0+100*time.Millisecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 3})
	again := first
	again.Request = 4 // a late copy of attempt k, renumbered by the front end
	at := t0 + 150*time.Millisecond
	p.SendAt(at, lead, again)
	g.runTo(t, t0+3*time.Second)
	rep, when := replyAt(t, p, 4)
	if rep.Status != lockservice.Granted || rep.Token != grant.Token || when > at+10*wd {
		t.Errorf("late keyed copy: %+v at %v, want attempt k's grant %d replayed by %v", rep, when, grant.Token, at+10*wd)
	}
}
