package reference

import (
	"errors"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/sim"
)

// TestReplicaTransferLeadership: the leader hands over while a client's
// acquire is in flight and another holds a lease. The in-flight acquire is
// granted by the old leader (its entry commits as the target catches up);
// a request arriving during the hand-over is redirected, not lost; the
// target leads the next term within a few message delays, far sooner than
// an election timeout; and the held lease is not shortened: the new leader
// restarts it at its full TTL, so it ends a full TTL after the hand-over.
func TestReplicaTransferLeadership(t *testing.T) {
	const d = time.Millisecond
	const ttl = time.Second
	g := newReplicaGroup(t, 3, groupOpts{seed: 4, net: fixedLatency(d)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	old, oldTerm := g.awaitLeader(t, g.ids, 1, time.Second)

	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, old, lockservice.AcquireRequest{Resource: "held", Client: "a", TTL: ttl, Request: 1})
	at := t0 + 600*time.Millisecond // the hand-over, well into the lease
	// Proposed at at-d, so in flight (not yet acknowledged) at the hand-over.
	p.SendAt(at-2*d, old, lockservice.AcquireRequest{Resource: "inflight", Client: "b", TTL: ttl, Request: 2})
	// Reaches the old leader while it hands over.
	p.SendAt(at, old, lockservice.AcquireRequest{Resource: "during", Client: "c", TTL: ttl, Request: 3})
	var target sim.NodeID
	var terr error
	g.w.At(at, "transfer", func() { target, terr = g.replica(old).TransferLeadership(lockservice.NoLeader) })

	g.runTo(t, at+20*d)
	if terr != nil {
		t.Fatalf("TransferLeadership: %v", terr)
	}
	if target == old || target == lockservice.NoLeader {
		t.Fatalf("transfer target %d from leader %d", target, old)
	}
	lead, term, ok := g.soleLeader(g.ids, oldTerm+1)
	if !ok || lead != target || term != oldTerm+1 {
		t.Fatalf("%v after the hand-over: believers %v, want %d alone in term %d", 20*d, g.believers(), target, oldTerm+1)
	}
	if got := g.replica(old).Leader(); got != target {
		t.Errorf("the old leader knows %d as leader, want %d", got, target)
	}
	held, inflight, during := p.OnlyLockReply(t, 1), p.OnlyLockReply(t, 2), p.OnlyLockReply(t, 3)
	if held.Status != lockservice.Granted || inflight.Status != lockservice.Granted || during.Status != lockservice.NotLeader || during.Leader != target {
		t.Fatalf("replies %+v, %+v, %+v; want a granted, the in-flight b granted, c redirected to the target %d", held, inflight, during, target)
	}
	heldToken := held.Token

	g.runTo(t, at+3*ttl)
	e, ok := g.rec.ended(heldToken)
	if !ok || e.Reason != "expired" {
		t.Fatalf("the held lease (token %d) ended %+v (%v), want expired", heldToken, e, ok)
	}
	// Granted at t0+3d on the old leader's clock; the new leader took over
	// by at+20d and restarted it in full.
	if lo, hi := at+ttl, at+20*d+ttl+2*d; e.At < lo || e.At > hi {
		t.Errorf("the held lease expired at %v, want within [%v, %v]: a full TTL after the hand-over", e.At, lo, hi)
	}
}

// TestReplicaTransferAbandonedStillExpires: a transfer to a replica that is
// cut off is abandoned after an election timeout; a lease that fell due
// while the leader refused proposals is still ended by it, a tick later.
func TestReplicaTransferAbandonedStillExpires(t *testing.T) {
	const d = time.Millisecond
	const ttl = 300 * time.Millisecond
	g := newReplicaGroup(t, 3, groupOpts{seed: 4, net: fixedLatency(d)})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: ttl, Request: 1})
	to := g.others(lead)[0]
	// Cut the target off from everyone but the leader's messages never
	// arrive: it cannot take over.
	at := t0 + ttl - 20*time.Millisecond
	g.w.At(at, "cut and transfer", func() {
		g.isolate(to)
		if _, err := g.replica(lead).TransferLeadership(to); err != nil {
			t.Errorf("TransferLeadership: %v", err)
		}
	})
	g.runTo(t, at+10*time.Millisecond)
	if _, _, err := g.replica(lead).node.Propose([]byte("x")); !errors.Is(err, raft.ErrTransferring) {
		t.Fatalf("proposal during the transfer: %v, want ErrTransferring", err)
	}
	g.runTo(t, at+time.Second)
	if b := g.believers(); b[lead] != term {
		t.Fatalf("believers %v, want %d still leading term %d", b, lead, term)
	}
	rep := p.OnlyLockReply(t, 1)
	e, ok := g.rec.ended(rep.Token)
	if !ok || e.Reason != "expired" {
		t.Fatalf("the lease ended %+v (%v), want expired though it fell due during the transfer", e, ok)
	}
	// Due at about at+20ms, refused until the transfer is abandoned one
	// election timeout (100 ms) after it began.
	if e.At < at+100*time.Millisecond || e.At > at+150*time.Millisecond {
		t.Errorf("expired at %v, want soon after the transfer was abandoned at about %v", e.At, at+100*time.Millisecond)
	}
}
