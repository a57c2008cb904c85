// Package frontend is the reference lock service's front end: what a
// replica's node decides for its clients beyond the replica's own protocol
// — request numbers, dedup keys, "outcome unknown" answers for requests a
// deposed leader dropped, holding a request while a leader is elected or
// the lead is handed over, and answering a retried release that took
// effect. It is process code (package process): the simulator runs it in
// front of every replica of the replicated design, and fencesim-node
// (package nodesvc) runs the same code under realrt, with its HTTP layer
// translating HTTP calls into the lock requests a simulated client sends
// and the answers back.
//
// Request numbers. The replica deduplicates by (client, request number)
// and refuses as Stale a number below what it has applied for the client.
// A client of one name may call any node, so the numbers cannot be its
// own: the front end numbers every request it submits to its replica as
// term<<32 | seq, where term is the replica's Raft term at submission and
// seq counts the submissions in that term. A request is proposed only by
// the leader of that term, entries apply in log order, and a later leader
// has a higher term, so the numbers a client's requests apply with only
// grow, whichever node took them. The client's own id of an attempt (the
// HTTP API's request_id, the simulated client's request id) travels
// through the log as the acquire's Key and the release's RequestID: the
// lock table, on every replica alike, applies an acquire once per
// (client, key) and answers a retry from its memory, whichever node takes
// the retry. Nothing is answered from this replica's own table: a
// follower's, or a leader's that has not applied a release yet, may be
// stale (Config.UnsafeBusyFromTable plants that bug).
package frontend

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// LocalID is the front end's node id as its replica's client: no replica
// has it, so the replica's answers to it never leave the node.
const LocalID process.NodeID = 1 << 20

// Config configures a front end.
type Config struct {
	// LeaderWait is how long a request answered "not the leader, and no
	// other leader known" (an election or a hand-over under way) is held
	// until a leader is known: a peer, named in the answer then, or this
	// replica, which takes the request again under a new number. 0: not
	// held (the answer names no leader and the client retries elsewhere).
	LeaderWait time.Duration
	// Marks counts the corners the front end reaches (package coverage).
	Marks *coverage.Counts
	// After, if set, runs at the end of every event of the node (a
	// message, a timer, a batch's end), on the node's thread: the real
	// service publishes the replica's role from it.
	After func()

	// The planted bugs (lockservice/mutants); false is the reference.

	// UnsafeBusyFromTable answers an acquire Busy from this replica's own
	// applied table, without a proposal, when the table shows the
	// resource held under another attempt: on a follower, or on a leader
	// that has not applied the release yet, that table is stale
	// (fencesim-node's front end as the live runner found it).
	UnsafeBusyFromTable bool
	// UnsafeKeyNotInLog keeps an acquire's key out of the log: this front
	// end alone remembers the attempts it answered granted, so a retry of
	// the attempt at another node is a fresh acquire there, granted again
	// with a new token once the first grant has ended (fencesim-node's
	// front end as the live runner found it).
	UnsafeKeyNotInLog bool
}

// call is one client request the front end has taken.
type call struct {
	from process.NodeID
	msg  process.Message // as the client sent it: its own request number
	term uint64          // the replica's term at submission
	// holdUntil is when a held call (waiting for a leader) is answered
	// not-leader, on the monotonic clock.
	holdUntil time.Duration
}

// releaseInfo identifies a release made with a request id.
type releaseInfo struct {
	client    string
	token     uint64
	requestID string
}

// keyID names a keyed acquire (UnsafeKeyNotInLog's memory).
type keyID struct{ client, resource, key string }

// FrontEnd takes the lock requests of a node's clients and submits them to
// the node's replica under its own numbers (see the package doc). It runs
// on the node's thread: Node calls it.
type FrontEnd struct {
	cfg  Config
	rep  *reference.Replica
	env  process.Env // the node's
	renv process.Env // the replica's: its answers to LocalID come here

	seqTerm, seq uint64
	pending      map[uint64]*call // by submitted number
	// pendingTerm is the term every pending request was submitted in, or
	// 0 when they differ: while this replica leads that term, sweep has
	// nothing to answer and skips its pass over pending (it ran after
	// every event).
	pendingTerm uint64
	held        []*call // waiting for a leader, oldest first
	holdTimer   clockwork.Timer
	holdFn      func()
	// released is, by resource, its last release made with a request id,
	// as applied here: the release's id travels in the log entry, so
	// every replica knows it and a retry at a new leader is answered
	// released.
	released map[string]releaseInfo
	// keys is UnsafeKeyNotInLog's memory of the keyed grants answered here.
	keys  map[keyID]lockservice.LockReply
	inAct bool // in after(): a resubmission must not recurse
}

// Receive takes a client's lock request (AcquireRequest, RenewRequest,
// ReleaseRequest, with the client's own request number) and reports
// whether it was one. The answer goes to from as a LockReply carrying that
// number.
func (f *FrontEnd) Receive(from process.NodeID, msg process.Message) bool {
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		if f.cfg.UnsafeKeyNotInLog && m.Key != "" {
			if rep, ok := f.keys[keyID{m.Client, m.Resource, m.Key}]; ok {
				rep.Request = m.Request
				f.env.Send(from, rep)
				return true
			}
		}
		if f.cfg.UnsafeBusyFromTable {
			if l, held := f.rep.Table().Lease(m.Resource); held && (l.Holder != m.Client || l.Key != m.Key) {
				f.env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Busy})
				return true
			}
		}
	case lockservice.RenewRequest, lockservice.ReleaseRequest:
	default:
		return false
	}
	f.submit(&call{from: from, msg: msg})
	return true
}

// submit hands c to the replica under a new number.
func (f *FrontEnd) submit(c *call) {
	_, term := f.rep.IsLeader()
	if term != f.seqTerm {
		f.seqTerm, f.seq = term, 0
	}
	if f.seq == 1<<32-1 {
		// 4 billion requests in one term: shed until the next.
		f.answer(c, lockservice.LockReply{Status: lockservice.Overloaded})
		return
	}
	f.seq++
	n := term<<32 | f.seq
	c.term = term
	switch {
	case len(f.pending) == 0:
		f.pendingTerm = term
	case f.pendingTerm != term:
		f.pendingTerm = 0
	}
	f.pending[n] = c
	f.rep.Receive(f.renv, LocalID, f.build(c, n))
}

// build is c's request as the replica gets it: under number n, with the
// client's id of the attempt as its key.
func (f *FrontEnd) build(c *call, n uint64) process.Message {
	switch m := c.msg.(type) {
	case lockservice.AcquireRequest:
		m.Request = n
		if f.cfg.UnsafeKeyNotInLog {
			m.Key = ""
		}
		return m
	case lockservice.RenewRequest:
		m.Request = n
		return m
	case lockservice.ReleaseRequest:
		m.Request = n
		return m
	}
	panic("frontend: a call of an unknown kind")
}

// reply takes the replica's answer to the front end's request.
func (f *FrontEnd) reply(msg process.Message) {
	rep, ok := msg.(lockservice.LockReply)
	if !ok {
		return
	}
	c, ok := f.pending[rep.Request]
	if !ok {
		return // swept meanwhile: the client was told not-leader
	}
	delete(f.pending, rep.Request)
	f.settle(c, rep)
}

// settle answers c with the replica's rep, or holds c for a leader.
func (f *FrontEnd) settle(c *call, rep lockservice.LockReply) {
	switch rep.Status {
	case lockservice.NotLeader:
		if rep.Leader == lockservice.NoLeader || rep.Leader == f.env.ID() {
			if f.hold(c) {
				return
			}
			rep.Leader = lockservice.NoLeader
		}
	case lockservice.NotHolder:
		if m, ok := c.msg.(lockservice.ReleaseRequest); ok && m.RequestID != "" &&
			f.released[m.Resource] == (releaseInfo{client: m.Client, token: m.Token, requestID: m.RequestID}) {
			// A retried release that took effect: the replica answered
			// from the entries it applied, which include it.
			f.cfg.Marks.Hit(coverage.FrontendReleaseReplayed)
			rep = lockservice.LockReply{Status: lockservice.Released, Token: m.Token}
		}
	case lockservice.Granted:
		if m, ok := c.msg.(lockservice.AcquireRequest); ok && f.cfg.UnsafeKeyNotInLog && m.Key != "" {
			f.keys[keyID{m.Client, m.Resource, m.Key}] = rep
		}
	}
	f.answer(c, rep)
}

// answer sends rep to c's client, under the client's own number.
func (f *FrontEnd) answer(c *call, rep lockservice.LockReply) {
	rep.Request = requestOf(c.msg)
	f.env.Send(c.from, rep)
}

func requestOf(m process.Message) uint64 {
	switch m := m.(type) {
	case lockservice.AcquireRequest:
		return m.Request
	case lockservice.RenewRequest:
		return m.Request
	case lockservice.ReleaseRequest:
		return m.Request
	}
	return 0
}

// hold keeps c until a leader is known, up to LeaderWait, and reports
// whether it did.
func (f *FrontEnd) hold(c *call) bool {
	if f.cfg.LeaderWait <= 0 {
		return false
	}
	now := f.env.Clock().Monotonic()
	if c.holdUntil == 0 {
		c.holdUntil = now + f.cfg.LeaderWait
	} else if now >= c.holdUntil {
		return false
	}
	f.held = append(f.held, c)
	if f.holdTimer == nil {
		f.holdTimer = f.env.Clock().AfterFunc(c.holdUntil-now, f.holdFn)
	}
	return true
}

// holdDue runs when the earliest held call's wait may have passed.
func (f *FrontEnd) holdDue() {
	f.holdTimer = nil
	f.after()
}

// after runs at the end of every event of the node: requests a replica
// that lost the lead dropped are answered, held requests go on once a
// leader is known.
func (f *FrontEnd) after() {
	if f.inAct {
		return
	}
	f.inAct = true
	defer func() { f.inAct = false }()
	f.sweep()
	if len(f.held) > 0 {
		f.release()
	}
	if f.cfg.After != nil {
		f.cfg.After()
	}
}

// sweep answers not-leader the requests waiting on a replica that is no
// longer the leader of their term: it dropped them when it stepped down.
// Their outcome is unknown (the entry may still commit under the next
// leader); the client retries there with the same id, which the log
// deduplicates.
func (f *FrontEnd) sweep() {
	if len(f.pending) == 0 {
		return
	}
	lead, term := f.rep.IsLeader()
	if lead && term == f.pendingTerm {
		return
	}
	var gone []uint64
	for n, c := range f.pending { //detlint:sorted (sorted below)
		if !lead || c.term != term {
			gone = append(gone, n)
		}
	}
	if len(gone) == 0 {
		f.pendingTerm = term // leading: every one was submitted in this term
		return
	}
	slices.Sort(gone)
	f.cfg.Marks.Hit(coverage.FrontendUnknownOutcome)
	for _, n := range gone {
		c := f.pending[n]
		delete(f.pending, n)
		f.settle(c, lockservice.LockReply{Status: lockservice.NotLeader, Leader: f.rep.Leader()})
	}
	if lead {
		f.pendingTerm = term // what is left was submitted in this term
	}
}

// release lets held requests go: to this replica again if it leads (and
// is not handing the lead over), redirected if a peer leads, answered
// not-leader once their wait has passed.
func (f *FrontEnd) release() {
	held := f.held
	f.held = nil
	lead, _ := f.rep.IsLeader()
	leader := f.rep.Leader()
	now := f.env.Clock().Monotonic()
	for i, c := range held {
		switch {
		case lead && !f.rep.Transferring():
			f.cfg.Marks.Hit(coverage.FrontendResubmitted)
			f.submit(c)
		case leader != lockservice.NoLeader && leader != f.env.ID():
			f.answer(c, lockservice.LockReply{Status: lockservice.NotLeader, Leader: leader})
		case now >= c.holdUntil:
			f.answer(c, lockservice.LockReply{Status: lockservice.NotLeader, Leader: lockservice.NoLeader})
		default:
			f.held = append(f.held, held[i])
		}
	}
	if len(f.held) > 0 && f.holdTimer == nil {
		next := f.held[0].holdUntil
		for _, c := range f.held[1:] {
			next = min(next, c.holdUntil)
		}
		f.holdTimer = f.env.Clock().AfterFunc(max(next-now, 0), f.holdFn)
	}
}

// Handover, if the replica leads, hands the lead to its most up-to-date
// follower (reference.Replica.TransferLeadership), once: call it again
// until it reports done, which it does once another replica leads
// (leader) or when this one does not lead at all (leader NoLeader,
// first call). Meanwhile new requests are held (LeaderWait) and then
// redirected to the new leader; those already proposed are answered as
// they commit; parked waiters are told to retry at the target.
func (f *FrontEnd) Handover() (done bool, leader process.NodeID, err error) {
	defer f.after()
	lead, _ := f.rep.IsLeader()
	if !lead {
		return true, f.rep.Leader(), nil
	}
	if f.rep.Transferring() {
		return false, lockservice.NoLeader, nil
	}
	if f.rep.Waiting() > 0 || len(f.pending) > 0 {
		f.cfg.Marks.Hit(coverage.FrontendHandoverWaiters)
	}
	_, err = f.rep.TransferLeadership(lockservice.NoLeader)
	if err != nil {
		f.env.Log().LogAttrs(context.Background(), slog.LevelWarn, "frontend.handover", slog.String("err", err.Error()))
	}
	return false, lockservice.NoLeader, err
}

// Pending is how many requests wait for their replica's answer.
func (f *FrontEnd) Pending() int { return len(f.pending) + len(f.held) }

// Observe takes the replica's applied decisions the front end needs: the
// releases made with a request id.
func (f *FrontEnd) Observe(e lockservice.Event) {
	if e.Kind == lockservice.EvEnded && e.RequestID != "" {
		f.released[e.Resource] = releaseInfo{client: e.Client, token: e.Token, requestID: e.RequestID}
	}
}
