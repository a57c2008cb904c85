package reference

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/coverage"
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
// granted in arrival order, each by the previous holder's release entry
// itself (the hand-over): one commit after the release reaches the
// leader, with the release entry's index as token, and no acquire entry
// of their own.
func TestWaitQueueHandOverGrantsInArrivalOrderInTheReleaseEntry(t *testing.T) {
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
		// The release reaches the leader at +d carrying the waiter's
		// acquire, commits and applies at +3d, and both answers arrive d
		// after that: one commit, not two.
		if rep.Status != lockservice.Granted || when != at+4*wd {
			t.Fatalf("waiter %s: %+v at %v, want granted at %v", c, rep, when, at+4*wd)
		}
		// It waited from its arrival to the release's proposal.
		if parked := t0 + time.Duration(10+i)*time.Millisecond + wd; rep.Waited != at+wd-parked {
			t.Fatalf("waiter %s: Waited %v, want %v (parked at %v, handed over at %v)", c, rep.Waited, at+wd-parked, parked, at+wd)
		}
		cmd, ok := commandAt(t, g.w.Disk(lead), rep.Token)
		if !ok || cmd.Kind != CmdRelease || cmd.Client != holder || cmd.Next.Client != c {
			t.Fatalf("token %d is not %s's release handing the lock to %s: %+v", rep.Token, holder, c, cmd)
		}
		if e, ok := g.rec.ended(token); !ok || e.Reason != "released" {
			t.Fatalf("%s's lease %d did not end released: %+v", holder, token, e)
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
	if acq := acquireCommands(t, g.w.Disk(lead)); len(acq) != 1 {
		t.Errorf("the log holds %d acquires, want only the first holder's (the others rode the releases)", len(acq))
	}
	checkGrantsFromDistinctRequests(t, g.rec.grants(), g.w.Disk(lead))
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

// handOver is a group whose replicas count coverage marks, with a
// holder h of resource r granted at the leader by at.
type handOver struct {
	g     *replicaGroup
	p     *simtest.Probe
	probe sim.NodeID
	lead  sim.NodeID
	marks *coverage.Counts
	token uint64 // h's
	at    time.Duration
}

func newHandOver(t *testing.T, seed uint64, edit func(*ReplicaConfig)) handOver {
	t.Helper()
	h := handOver{marks: &coverage.Counts{}}
	h.g = newReplicaGroup(t, 3, groupOpts{seed: seed, net: fixedLatency(wd), edit: func(c *ReplicaConfig) {
		c.Marks = h.marks
		if edit != nil {
			edit(c)
		}
	}})
	h.p, h.probe = simtest.AddProbe(t, h.g.w, "p")
	h.lead, _ = h.g.awaitLeader(t, h.g.ids, 1, time.Second)
	t0 := h.g.w.Now() + 10*time.Millisecond
	h.p.SendAt(t0, h.lead, lockservice.AcquireRequest{Resource: "r", Client: "h", TTL: 30 * time.Second, Request: 1})
	h.at = t0 + 100*time.Millisecond
	h.g.runTo(t, h.at)
	rep := h.p.OnlyLockReply(t, 1)
	if rep.Status != lockservice.Granted {
		t.Fatalf("holder: %+v", rep)
	}
	h.token = rep.Token
	return h
}

// A release entry carrying a hand-over whose own release is refused (its
// owner check fails: an earlier release of the same lease, still in
// flight when the leader proposed this one, ended it) grants nothing, even
// though the resource is free when it applies: the waiter is parked again
// at the head of the queue, ahead of a waiter that arrived while it was in
// flight, and is granted by an acquire entry of its own. A grant made
// without the release succeeding would give w the refused release's
// index as token; this test fails then.
func TestWaitQueueHandOverRefusedWhenTheReleaseFails(t *testing.T) {
	ho := newHandOver(t, 17, nil)
	g, p, lead, marks, token, at := ho.g, ho.p, ho.lead, ho.marks, ho.token, ho.at
	// The first release is proposed before anyone waits: no hand-over.
	p.SendAt(at, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: token, Request: 4})
	// w parks: the leader's applied table still shows h's lease.
	p.SendAt(at+100*time.Microsecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: time.Second, Request: 2, Wait: 5 * time.Second})
	// A second release of the same lease under another request number (a
	// front end's renumbered retry): the applied table says it would take
	// effect, so it carries w's acquire.
	p.SendAt(at+200*time.Microsecond, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: token, Request: 5})
	// x parks behind w's hand-over in flight.
	p.SendAt(at+300*time.Microsecond, lead, lockservice.AcquireRequest{Resource: "r", Client: "x", TTL: time.Second, Request: 3, Wait: 5 * time.Second})
	g.runTo(t, at+100*time.Millisecond)

	if rep := p.OnlyLockReply(t, 4); rep.Status != lockservice.Released {
		t.Fatalf("first release: %+v", rep)
	}
	if rep := p.OnlyLockReply(t, 5); rep.Status != lockservice.NotHolder {
		t.Fatalf("second release: %+v, want not-holder (the lease had ended)", rep)
	}
	var handOver loggedCommand
	for _, c := range diskCommands(t, g.w.Disk(lead)) {
		if c.Kind == CmdRelease && c.Request == 5 {
			handOver = c
		}
	}
	if handOver.Next.Client != "w" {
		t.Fatalf("the second release %+v does not carry w's acquire", handOver)
	}
	w := p.OnlyLockReply(t, 2)
	if w.Status != lockservice.Granted || w.Token == handOver.index {
		t.Fatalf("w: %+v; want granted, not by the refused release at index %d", w, handOver.index)
	}
	if c, ok := commandAt(t, g.w.Disk(lead), w.Token); !ok || c.Kind != CmdAcquire || c.Client != "w" {
		t.Fatalf("w's token %d is not its own acquire entry: %+v", w.Token, c)
	}
	for _, gr := range g.rec.grants() {
		if gr.Token == handOver.index {
			t.Errorf("the refused hand-over granted %+v", gr)
		}
	}
	if got := p.LockReplies(3); len(got) != 0 {
		t.Fatalf("x answered %+v while w holds the lock: the queue's order was lost", got)
	}
	if marks.Get(coverage.ReplicaHandOverRefused) == 0 {
		t.Errorf("marks %v: no refused hand-over", marks.Map())
	}

	// w's release hands the lock to x in one entry.
	rel := at + 100*time.Millisecond
	p.SendAt(rel, lead, lockservice.ReleaseRequest{Resource: "r", Client: "w", Token: w.Token, Request: 6})
	g.runTo(t, rel+50*time.Millisecond)
	x, when := replyAt(t, p, 3)
	if c, ok := commandAt(t, g.w.Disk(lead), x.Token); x.Status != lockservice.Granted || when != rel+4*wd || !ok || c.Kind != CmdRelease || c.Next.Client != "x" {
		t.Fatalf("x: %+v at %v, entry %+v; want granted at %v by w's release", x, when, c, rel+4*wd)
	}
	if marks.Get(coverage.ReplicaHandOver) == 0 {
		t.Errorf("marks %v: no hand-over", marks.Map())
	}
	checkGrantOrder(t, g.rec.service())
	checkGrantsFromDistinctRequests(t, g.rec.grants(), g.w.Disk(lead))
	g.checkTablesAgree(t)
}

// The release and the grant of a hand-over are one entry, so no snapshot
// can fall between them: a snapshot holds the holder's lease (taken before
// the entry) or the waiter's (after it). Both restart paths stay
// consistent: a follower that restarts from a snapshot taken before the
// hand-over and catches up by appends, and one that restarts from a
// snapshot that covers it, hold the waiter's grant with the entry's index
// as token, like the leader.
func TestWaitQueueHandOverAcrossSnapshotRestarts(t *testing.T) {
	ho := newHandOver(t, 19, func(c *ReplicaConfig) {
		c.SnapshotEntries, c.SnapshotKeep = 1, 100 // a snapshot after every entry; laggards catch up by appends
	})
	g, p, lead, token, at := ho.g, ho.p, ho.lead, ho.token, ho.at
	early, late := g.others(lead)[0], g.others(lead)[1]
	p.SendAt(at, lead, lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: 30 * time.Second, Request: 2, Wait: 5 * time.Second})
	// early goes down before the release: its snapshot holds h's lease.
	g.w.At(at+10*time.Millisecond, "crash early", func() { g.w.Crash(early) })
	rel := at + 20*time.Millisecond
	p.SendAt(rel, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: token, Request: 4})
	// late goes down after applying the hand-over (it learns the commit
	// with the next heartbeat): its snapshot covers it.
	g.w.At(rel+80*time.Millisecond, "crash late", func() { g.w.Crash(late) })
	g.w.At(rel+100*time.Millisecond, "restart", func() { g.w.Restart(early); g.w.Restart(late) })
	g.runTo(t, rel+time.Second)

	w := p.OnlyLockReply(t, 2)
	c, ok := commandAt(t, g.w.Disk(lead), w.Token)
	if w.Status != lockservice.Granted || !ok || c.Kind != CmdRelease || c.Next.Client != "w" {
		t.Fatalf("w: %+v, entry %+v; want granted by h's release", w, c)
	}
	if snap, _ := g.replica(early).Loaded(); snap == 0 || snap >= w.Token {
		t.Errorf("early restarted from the snapshot at %d, want one before the hand-over at %d", snap, w.Token)
	}
	if snap, _ := g.replica(late).Loaded(); snap < w.Token {
		t.Errorf("late restarted from the snapshot at %d, want one covering the hand-over at %d", snap, w.Token)
	}
	table := g.checkTablesAgree(t)
	if len(table.Leases) != 1 || table.Leases[0].Holder != "w" || table.Leases[0].Token != w.Token {
		t.Fatalf("leases %+v, want w's with token %d", table.Leases, w.Token)
	}
	for _, id := range g.ids {
		if s := g.replica(id).started["r"]; s != w.Token {
			t.Errorf("replica %d: the lease started at %d, want the hand-over's index %d", id, s, w.Token)
		}
	}
}

// The lead changes while a hand-over is in flight: the followers have the
// entry, the leader is cut off before it commits. The new leader commits
// it and it grants the waiter once; the waiter's retry at the new leader,
// under the same request number, is answered with that grant from the
// table, and no second entry grants it.
func TestWaitQueueHandOverAcrossALeaderChange(t *testing.T) {
	ho := newHandOver(t, 21, nil)
	g, p, lead, probe, token, at := ho.g, ho.p, ho.lead, ho.probe, ho.token, ho.at
	w := lockservice.AcquireRequest{Resource: "r", Client: "w", TTL: 30 * time.Second, Request: 2, Wait: 5 * time.Second}
	p.SendAt(at, lead, w)
	rel := at + 20*time.Millisecond
	p.SendAt(rel, lead, lockservice.ReleaseRequest{Resource: "r", Client: "h", Token: token, Request: 4})
	// The release reaches the leader at +d, its append the followers at
	// +2d; the leader is cut off before their acknowledgements arrive.
	cut := rel + 2*wd + wd/2
	g.w.At(cut, "isolate the leader", func() { g.isolate(lead, probe) })
	next, _ := g.awaitLeader(t, g.others(lead), 2, cut+2*time.Second)
	g.runTo(t, g.w.Now()+100*time.Millisecond)
	if got := p.LockReplies(2); len(got) != 0 {
		t.Fatalf("w answered %+v by the cut-off leader", got)
	}
	retry := g.w.Now()
	p.SendAt(retry, next, w)
	g.runTo(t, retry+100*time.Millisecond)
	rep := p.OnlyLockReply(t, 2)
	c, ok := commandAt(t, g.w.Disk(next), rep.Token)
	if rep.Status != lockservice.Granted || !ok || c.Kind != CmdRelease || c.Next.Client != "w" {
		t.Fatalf("w's retry: %+v, entry %+v; want the hand-over's grant", rep, c)
	}
	grants := g.rec.grants()
	checkGrantsFromDistinctRequests(t, grants, g.w.Disk(next))
	n := 0
	for _, gr := range grants {
		if gr.Client == "w" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("w granted %d times (%+v), want once", n, grants)
	}
	g.w.At(g.w.Now(), "heal", func() {
		for _, id := range g.others(lead) {
			g.w.Unblock(lead, id)
			g.w.Unblock(id, lead)
		}
	})
	g.runTo(t, g.w.Now()+time.Second)
	g.checkTablesAgree(t)
}
