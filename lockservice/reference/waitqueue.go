package reference

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/process"
)

// The leader's wait queue. An acquire that carries a wait bound
// (AcquireRequest.Wait) and finds its resource held by another client in
// the leader's applied table is parked at the leader, in a FIFO per
// resource, instead of being proposed: waiting costs no log entry, no
// fsync and no polling.
//
// The hand-over. When the leader proposes a release that its applied
// table says will take effect and the resource has waiters, the entry
// carries the head waiter's acquire (Command.Next) and the waiter leaves
// the queue. Applying the entry, on every replica alike, first applies the
// release exactly as an entry without a hand-over would (dedup, the owner
// check); only if the release ended the lease, so that the resource is
// free, does it apply the carried acquire, as its own acquire entry would
// be applied: the same dedup by request number and key, and a grant's
// token is the entry's index (the release itself grants nothing, so
// tokens remain the committed log index of the granting entry and
// strictly increase). A lock passes from one holder to the next in one
// commit, not two (release, then the waiter's acquire): that second
// commit was the cost of a contended lock's hand-over
// (docs/performance.md).
//
// Why only a release that took effect: the entry then means what it says
// — "h released, w acquired" — and a release refused (a late copy, a
// lease that an entry still in flight when the leader proposed it had
// ended) leaves the table exactly as a plain release would; the entry
// never grants a lock its own release did not free, even when something
// earlier in the log freed it. The waiter of such an entry hears nothing
// from it: the leader parks it again at the head of its queue (FIFO kept,
// its bound running on) and promotes it as below. Nothing leader-local
// enters the apply — the acquire travels in the entry — so a new leader,
// a follower and a replica replaying its log or restarting from a
// snapshot decide the hand-over alike, and as the release and the grant
// are one entry, no snapshot or crash falls between them.
//
// Why not an expiry: it would fit (the same rule, on the expiry's token
// and start index), but an expiry is not the contended path — it ends
// the lease of a holder that stopped renewing (crashed, paused, cut off)
// — and handing over
// at once closes the window in which a late renewal meets the freed
// lease, the story by which the swarm catches a service that revives an
// expired lease (renew-after-expiry: 12 of swarm seeds 1..200 without,
// 8 with). An expiry frees the resource and the next waiter is promoted.
//
// Otherwise (an expiry, a release proposed before anyone parked, a
// hand-over refused, a promoted acquire answered busy) the lease's end at
// the leader promotes the head waiter: its acquire is proposed as an entry
// of its own once the applied table shows the resource free. One hand-over
// or promotion per resource is in flight at a time (r.promoting), so the
// queue's order is the grant order. A waiter whose bound passes is
// proposed through the log as a plain acquire, so a Busy answer is always
// the log's, never a guess of a leader that may be deposed.
//
// The queue is leader-local and volatile: when the replica stops leading
// (or starts handing the lead over) it answers every parked waiter
// NotLeader, and the client retries at the new leader with the same
// request id (the dedup table keeps it one grant); a waiter whose
// hand-over or promotion is in flight is a pending request like any
// other, and like a crashed leader's waiters it retries on its timeout.
// Each queue is bounded (ReplicaConfig.WaitQueueDepth, and WaitQueueTotal
// over all resources): beyond it an acquire is proposed at once, as
// without a wait bound. The variants that decide grants at the leader
// (ReplicaConfig.Grants) get no hand-over: their decision is the
// leader's, made when it proposes an acquire, and a hand-over is the
// log's.

// parkedAcquire is one acquire waiting at the leader.
type parkedAcquire struct {
	to    process.NodeID
	c     Command
	since time.Duration // parked at, on the monotonic clock
	wait  time.Duration // its bound, from since
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
	p := &parkedAcquire{to: from, c: c, since: r.env.Clock().Monotonic(), wait: wait}
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

// promotion is an acquire of a queue's head in flight: a promoted
// acquire's entry, or the end that hands the lock over.
type promotion struct {
	index uint64
	// handed is the waiter the entry at index hands the lock to (nil: a
	// promoted acquire of its own): parked again if the entry's end does
	// not take effect.
	handed *parkedAcquire
}

// handOver picks, for a command c the leader is about to propose, the
// waiter it hands its resource to, and writes that acquire into c: the
// head of the queue, if c is a release the leader's applied table says
// will end the lease and nothing of the queue is in flight; else nil. It
// leaves the waiter parked: handing takes it out once c is proposed.
func (r *Replica) handOver(c *Command) *parkedAcquire {
	if c.Kind != CmdRelease || r.cfg.Grants != nil {
		return nil
	}
	q := r.parked[c.Resource]
	if len(q) == 0 {
		return nil
	}
	if _, busy := r.promoting[c.Resource]; busy {
		return nil
	}
	if !r.table.Releases(lockservice.ReleaseRequest{Resource: c.Resource, Client: c.Client, Token: c.Token, Request: c.Request}) {
		return nil
	}
	p := q[0]
	c.Next = HandOver{Client: p.c.Client, TTL: p.c.TTL, Request: p.c.Request, Key: p.c.Key}
	if r.cfg.Tokens != nil {
		c.Next.Token = r.cfg.Tokens.Stamp(r.env)
	}
	return p
}

// handing takes p, whose hand-over the leader proposed at index, out of
// its queue: it is answered when the entry applies, as a proposed acquire.
func (r *Replica) handing(p *parkedAcquire, index uint64) {
	r.unpark(p)
	r.promoting[p.c.Resource] = promotion{index: index, handed: p}
	r.inflight++
	r.pending[index] = append(r.pending[index], waiter{to: p.to, client: p.c.Client, request: p.c.Request, waited: r.waited(p), next: true})
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.hand-over", slog.String("client", p.c.Client), slog.Uint64("req", p.c.Request), slog.String("resource", p.c.Resource), slog.Uint64("index", index))
}

// promotionApplied notes, on the leader, that the entry at index of
// resource applied: if it was the queue's promotion or hand-over, the
// next waiter may go (or waits on the new holder); a waiter whose
// hand-over did not take effect (handed false) is parked again first, at
// the head.
func (r *Replica) promotionApplied(resource string, index uint64, handed bool) {
	pr, ok := r.promoting[resource]
	if !ok || pr.index != index {
		return
	}
	delete(r.promoting, resource)
	if pr.handed != nil && !handed {
		r.repark(pr.handed)
	}
	r.leaseEnded(resource)
}

// repark puts p back at the head of its queue, with what is left of its
// bound (none left: the timer proposes it at once). A retry of p that
// parked meanwhile gives p its address and its place. The queue may
// exceed its depth by this one waiter, which was in it before.
func (r *Replica) repark(p *parkedAcquire) {
	for _, o := range r.parked[p.c.Resource] {
		if o.c.Client == p.c.Client && o.c.Request == p.c.Request {
			p.to = o.to
			r.unpark(o)
			break
		}
	}
	r.cfg.Marks.Hit(coverage.ReplicaHandOverRefused)
	p.timer = r.env.Clock().AfterFunc(max(p.wait-r.waited(p), 0), p.dueFn)
	r.parked[p.c.Resource] = slices.Insert(r.parked[p.c.Resource], 0, p)
	r.parkedN++
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.repark", slog.String("client", p.c.Client), slog.Uint64("req", p.c.Request), slog.String("resource", p.c.Resource))
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
			r.promoting[res] = promotion{index: index}
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
