package frontend

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/sim"
)

// group is three nodes (front end + replica) in a simulated world, and a
// probe client.
type group struct {
	w     *sim.World
	ids   []sim.NodeID
	p     *simtest.Probe
	marks *coverage.Counts
}

func newGroup(t *testing.T, fc Config) *group {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: 7, Network: sim.NetworkConfig{Latency: sim.Latency{Shape: sim.Uniform, Min: time.Millisecond, Max: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	g := &group{w: w, marks: &coverage.Counts{}}
	ids := []sim.NodeID{0, 1, 2}
	fc.Marks = g.marks
	for i := range ids {
		rc := reference.DefaultReplicaConfig(ids)
		rc.Marks = g.marks
		simtest.AddNode(t, w, fmt.Sprintf("n%d", i+1), func() sim.Process { return NewNode(rc, fc) }, fakeclock.Config{})
	}
	g.ids = ids
	g.p, _ = simtest.AddProbe(t, w, "p")
	return g
}

func (g *group) node(id sim.NodeID) *Node { n, _ := g.w.Process(id).(*Node); return n }

func (g *group) run(t *testing.T, until time.Duration) {
	t.Helper()
	if out := g.w.Run(until, 5_000_000); out == sim.StepLimit {
		t.Fatalf("step limit at %v", g.w.Now())
	}
}

// leader runs until one node leads and returns it and a follower.
func (g *group) leader(t *testing.T) (lead, follower sim.NodeID) {
	t.Helper()
	for g.w.Now() < 2*time.Second {
		g.run(t, g.w.Now()+5*time.Millisecond)
		for _, id := range g.ids {
			if l, _ := g.node(id).IsLeader(); l {
				return id, g.ids[(int(id)+1)%len(g.ids)]
			}
		}
	}
	t.Fatal("no leader within 2s")
	return 0, 0
}

func acq(client, key string, req uint64, wait time.Duration) lockservice.AcquireRequest {
	return lockservice.AcquireRequest{Resource: "r", Client: client, TTL: 2 * time.Second, Request: req, Key: key, Wait: wait}
}

// TestRetryUnderTheSameKeyAtAnotherNode: a client's request id is its
// attempt's key in the log, so the same attempt taken again — under the
// client's new request number, and by another node's front end after the
// lead moved — is answered the first grant (frontend.dedup-hit), and a
// retried release that took effect is answered released
// (frontend.release-replayed). A follower's front end redirects to the
// leader instead of answering from its own table.
func TestRetryUnderTheSameKeyAtAnotherNode(t *testing.T) {
	g := newGroup(t, Config{LeaderWait: 40 * time.Millisecond})
	lead, follower := g.leader(t)
	now := g.w.Now()
	g.p.SendAt(now+time.Millisecond, lead, acq("a", "k1", 1, 0))
	g.p.SendAt(now+20*time.Millisecond, follower, acq("b", "kb", 2, 0))
	g.run(t, now+50*time.Millisecond)
	first := g.p.OnlyLockReply(t, 1)
	if first.Status != lockservice.Granted {
		t.Fatalf("a's acquire: %+v", first)
	}
	if r := g.p.OnlyLockReply(t, 2); r.Status != lockservice.NotLeader || r.Leader != lead {
		t.Fatalf("b at a follower: %+v, want not-leader naming %d", r, lead)
	}

	// The lead moves; a retries the same attempt at the new leader.
	var target sim.NodeID
	g.w.At(g.w.Now()+time.Millisecond, "handover", func() { g.node(lead).FrontEnd().Handover() })
	g.run(t, g.w.Now()+100*time.Millisecond)
	for _, id := range g.ids {
		if l, _ := g.node(id).IsLeader(); l {
			target = id
		}
	}
	if target == lead {
		t.Fatalf("the lead did not move from %d", lead)
	}
	now = g.w.Now()
	g.p.SendAt(now+time.Millisecond, target, acq("a", "k1", 3, 0))
	g.run(t, now+50*time.Millisecond)
	if r := g.p.OnlyLockReply(t, 3); r.Status != lockservice.Granted || r.Token != first.Token {
		t.Fatalf("a's retry at %d: %+v, want the first grant (token %d)", target, r, first.Token)
	}
	if g.marks.Get(coverage.FrontendDedupHit) == 0 {
		t.Error("frontend.dedup-hit not counted")
	}

	rel := lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: first.Token, Request: 4, RequestID: "rel"}
	g.p.SendAt(g.w.Now()+time.Millisecond, target, rel)
	rel.Request = 5
	g.p.SendAt(g.w.Now()+30*time.Millisecond, g.ids[(int(target)+1)%3], rel) // a follower: redirected
	rel.Request = 6
	g.p.SendAt(g.w.Now()+31*time.Millisecond, target, rel)
	g.run(t, g.w.Now()+60*time.Millisecond)
	for _, req := range []uint64{4, 6} {
		if r := g.p.OnlyLockReply(t, req); r.Status != lockservice.Released {
			t.Errorf("release attempt %d: %+v, want released", req, r)
		}
	}
	if g.marks.Get(coverage.FrontendReleaseReplayed) == 0 {
		t.Error("frontend.release-replayed not counted")
	}
}

// TestHandoverWithWaiters: a leader hands over with an acquire parked in
// its wait queue and one arriving during the hand-over. The parked waiter
// is told to retry at the target; the one arriving meanwhile is held by
// the front end until the target leads, then redirected there
// (frontend.handover-waiters); the waiter's retry at the target waits
// there and is granted when the holder releases.
func TestHandoverWithWaiters(t *testing.T) {
	g := newGroup(t, Config{LeaderWait: 200 * time.Millisecond})
	lead, _ := g.leader(t)
	now := g.w.Now()
	g.p.SendAt(now+time.Millisecond, lead, acq("a", "ka", 1, 0))
	g.p.SendAt(now+20*time.Millisecond, lead, acq("b", "kb", 2, time.Second))
	at := now + 40*time.Millisecond
	var done bool
	g.w.At(at, "handover", func() { done, _, _ = g.node(lead).FrontEnd().Handover() })
	g.p.SendAt(at+500*time.Microsecond, lead, acq("c", "kc", 3, 0))
	g.run(t, at+150*time.Millisecond)
	if done {
		t.Fatal("Handover reported done on its first call at the leader")
	}
	if g.marks.Get(coverage.FrontendHandoverWaiters) == 0 {
		t.Error("frontend.handover-waiters not counted")
	}
	var target sim.NodeID = lockservice.NoLeader
	for _, id := range g.ids {
		if l, _ := g.node(id).IsLeader(); l {
			target = id
		}
	}
	if target == lockservice.NoLeader || target == lead {
		t.Fatalf("leader after the hand-over: %d (was %d)", target, lead)
	}
	if r := g.p.OnlyLockReply(t, 1); r.Status != lockservice.Granted {
		t.Fatalf("a: %+v", r)
	}
	if r := g.p.OnlyLockReply(t, 2); r.Status != lockservice.NotLeader || r.Leader != target {
		t.Fatalf("b, parked: %+v, want not-leader naming %d", r, target)
	}
	if r := g.p.OnlyLockReply(t, 3); r.Status != lockservice.NotLeader || r.Leader != target {
		t.Fatalf("c, during the hand-over: %+v, want held, then not-leader naming %d", r, target)
	}
	// b retries at the target with the same id and waits; a releases.
	now = g.w.Now()
	g.p.SendAt(now+time.Millisecond, target, acq("b", "kb", 4, time.Second))
	g.p.SendAt(now+20*time.Millisecond, target, lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: g.p.OnlyLockReply(t, 1).Token, Request: 5})
	g.run(t, now+100*time.Millisecond)
	if r := g.p.OnlyLockReply(t, 4); r.Status != lockservice.Granted || r.Waited <= 0 {
		t.Fatalf("b's retry at the target: %+v, want granted after waiting", r)
	}
}

// TestBusyFromLocalTableIsStale: the planted bug answers busy from the
// node's own table; a follower that has not applied a release yet answers
// busy for a free lock, where the reference redirects to the leader.
func TestBusyFromLocalTableIsStale(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		g := newGroup(t, Config{UnsafeBusyFromTable: unsafe})
		lead, follower := g.leader(t)
		now := g.w.Now()
		g.p.SendAt(now+time.Millisecond, lead, acq("a", "ka", 1, 0))
		g.run(t, now+50*time.Millisecond)
		tok := g.p.OnlyLockReply(t, 1).Token
		now = g.w.Now()
		g.p.SendAt(now+time.Millisecond, lead, lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: tok, Request: 2})
		// Right after the release commits at the leader, before the
		// follower hears of the commit (the next heartbeat).
		g.p.SendAt(now+4*time.Millisecond, follower, acq("b", "kb", 3, 0))
		g.run(t, now+50*time.Millisecond)
		if r := g.p.OnlyLockReply(t, 2); r.Status != lockservice.Released {
			t.Fatalf("release: %+v", r)
		}
		got := g.p.OnlyLockReply(t, 3)
		if want := lockservice.NotLeader; !unsafe && got.Status != want {
			t.Errorf("reference: b at the follower: %+v, want %v", got, want)
		}
		if unsafe && got.Status != lockservice.Busy {
			t.Errorf("busy-from-local-table: b at the follower: %+v, want busy (the stale table)", got)
		}
	}
}
