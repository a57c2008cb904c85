package reference

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/process"
)

// The leader's wait queue. An acquire that carries a wait bound
// (AcquireRequest.Wait) and finds its resource held by another client in
// the leader's applied table is parked at the leader, in a FIFO per
// resource, instead of being proposed: waiting costs no log entry, no
// fsync and no polling. When the lease ends at the leader (a release or an
// expiry applied), the leader proposes the head waiter's acquire through
// the log and answers it once it applies, as any acquire: the token is
// still the granting entry's index, and the log still decides. A waiter
// whose bound passes is proposed through the log as a plain acquire, so a
// Busy answer is always the log's, never a guess of a leader that may be
// deposed. The queue is leader-local and volatile: when the replica stops
// leading (or starts handing the lead over) it answers every waiter
// NotLeader, and the client retries at the new leader with the same
// request id (the dedup table keeps it one grant); a crashed leader's
// waiters hear nothing and retry on their timeout. Each queue is bounded
// (ReplicaConfig.WaitQueueDepth, and WaitQueueTotal over all resources):
// beyond it an acquire is proposed at once, as without a wait bound.

// parkedAcquire is one acquire waiting at the leader.
type parkedAcquire struct {
	to    process.NodeID
	c     Command
	since time.Duration // parked at, on the monotonic clock
	timer clockwork.Timer
	// dueFn is the bound's callback, made once per park.
	dueFn func()
}

// acquire serves an acquire request: parked if it may wait and its
// resource is held by another client, else proposed.
func (r *Replica) acquire(from process.NodeID, m lockservice.AcquireRequest) {
	c := Command{Kind: CmdAcquire, Resource: m.Resource, Client: m.Client, TTL: m.TTL, Request: m.Request, Key: m.Key}
	if m.Wait > 0 && r.node.Role() == raft.Leader && r.node.LeadTransferee() == raft.None {
		// A decided attempt (by its request number, or its key) is not
		// parked: the log replays its answer.
		if _, seen := r.table.SeenAcquire(m); !seen && r.park(from, c, m.Wait) {
			return
		}
	}
	r.serve(from, m.Client, m.Request, c)
}

// park queues c behind the current holder of its resource and reports
// whether it did: not when the resource is free (or held by c's own
// client: the table grants it again) with nobody ahead, nor when the
// queue is full.
func (r *Replica) park(from process.NodeID, c Command, wait time.Duration) bool {
	if r.cfg.WaitQueueDepth <= 0 {
		return false
	}
	q := r.parked[c.Resource]
	for _, p := range q {
		if p.c.Client == c.Client && p.c.Request == c.Request {
			p.to = from // a retry of a parked request: it keeps its place
			return true
		}
	}
	l, held := r.table.Lease(c.Resource)
	if held && l.Holder == c.Client {
		return false
	}
	_, promoting := r.promoting[c.Resource]
	if !held && len(q) == 0 && !promoting {
		return false
	}
	if len(q) >= r.cfg.WaitQueueDepth || r.parkedN >= r.cfg.WaitQueueTotal {
		return false
	}
	p := &parkedAcquire{to: from, c: c, since: r.env.Clock().Monotonic()}
	p.dueFn = func() { r.waitDue(p) }
	p.timer = r.env.Clock().AfterFunc(wait, p.dueFn)
	r.parked[c.Resource] = append(q, p)
	r.parkedN++
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.park", slog.String("client", c.Client), slog.Uint64("req", c.Request), slog.String("resource", c.Resource), slog.Int("queue", len(q)+1))
	return true
}

// unpark removes p from its queue.
func (r *Replica) unpark(p *parkedAcquire) {
	q := r.parked[p.c.Resource]
	i := slices.Index(q, p)
	if i < 0 {
		return
	}
	p.timer.Stop()
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(r.parked, p.c.Resource)
	} else {
		r.parked[p.c.Resource] = q
	}
	r.parkedN--
}

// waitDue proposes a waiter whose bound passed as a plain acquire: the log
// answers it, Busy or Granted.
func (r *Replica) waitDue(p *parkedAcquire) {
	if !slices.Contains(r.parked[p.c.Resource], p) {
		return
	}
	r.unpark(p)
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.wait-due", slog.String("client", p.c.Client), slog.Uint64("req", p.c.Request))
	if _, ok := r.propose(p.to, p.c.Client, p.c.Request, p.c, r.waited(p)); ok {
		r.flushSoon()
	}
}

// leaseEnded notes, on the leader, that resource's lease ended or that
// the acquire promoted for it applied: once the applied entries are done
// with (flush), the next waiter is promoted.
func (r *Replica) leaseEnded(resource string) {
	if r.leader && len(r.parked[resource]) > 0 {
		r.freed = append(r.freed, resource)
	}
}

// promoteFreed proposes the head waiter of every resource leaseEnded
// named, if the resource is free in the applied table and no promoted
// acquire of it is in flight.
func (r *Replica) promoteFreed() {
	freed := r.freed
	r.freed = r.freed[:0:0]
	for _, res := range freed {
		q := r.parked[res]
		if _, busy := r.promoting[res]; busy || len(q) == 0 || !r.leader {
			continue
		}
		if _, held := r.table.Lease(res); held {
			continue
		}
		p := q[0]
		r.unpark(p)
		r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.promote", slog.String("client", p.c.Client), slog.Uint64("req", p.c.Request), slog.String("resource", res))
		if index, ok := r.propose(p.to, p.c.Client, p.c.Request, p.c, r.waited(p)); ok {
			r.promoting[res] = index
		}
	}
}

// waited is how long p has been parked: the lease it may be granted
// starts no sooner (LockReply.Waited).
func (r *Replica) waited(p *parkedAcquire) time.Duration {
	return r.env.Clock().Monotonic() - p.since
}

// answerParked answers a waiter that its acquire applied meanwhile (a
// copy proposed by an earlier leader, or the client's retry elsewhere):
// the same request, or, once granted, the same keyed attempt under
// another request number (the table replays that grant to it; left
// parked, it would wait behind its own client's lease).
func (r *Replica) answerParked(c Command, rep lockservice.LockReply) {
	for _, p := range slices.Clone(r.parked[c.Resource]) {
		if p.c.Client != c.Client {
			continue
		}
		sameKey := c.Key != "" && p.c.Key == c.Key && rep.Status == lockservice.Granted
		if p.c.Request == c.Request || sameKey {
			r.unpark(p)
			out := rep
			out.Request = p.c.Request
			r.env.Send(p.to, out)
		}
	}
}

// dropParked answers every waiter NotLeader naming lead: the replica no
// longer leads, or is handing the lead over.
func (r *Replica) dropParked(lead process.NodeID) {
	for _, res := range sortedKeys(r.parked) {
		for _, p := range r.parked[res] {
			p.timer.Stop()
			r.env.Send(p.to, lockservice.LockReply{Request: p.c.Request, Status: lockservice.NotLeader, Leader: lead})
		}
	}
	clear(r.parked)
	clear(r.promoting)
	r.parkedN = 0
	r.freed = r.freed[:0]
}

// Waiting returns how many acquires are parked at the replica.
func (r *Replica) Waiting() int { return r.parkedN }
