// Package history is the one recorder of the clients' side of a run, in
// the simulator and in a live run alike: it turns the calls and answers
// of lock and store operations into checker.History's operations
// (LockOps, Ops) and the clients' beliefs that they hold a lock
// (Beliefs). Each world stamps the events with its own clock (the
// simulator's true time, the machine's CLOCK_MONOTONIC) and adds what
// only it can see (the simulator: the service's grants, ends and log;
// a live run: the store's apply log, grants derived from the clients'
// view); the rules of how a call and its answer become an operation are
// here, once:
//
//   - an operation is of unknown outcome from its call until an answer
//     says otherwise; one never answered stays unknown, with an open
//     return (Jepsen's info);
//   - the first answer counts: a later copy changes nothing;
//   - a renewal or release carries the token it sent; an acquire the
//     token its answer named;
//   - a granted acquire opens its client's belief that it holds the lock,
//     from the answer, until the client gives it up (EndBelief) or
//     restarts (EndBeliefs);
//   - a busy answer to a client that may hold the lock itself is
//     ambiguous (HolderBusyAmbiguous).
//
// It holds no clock and no goroutine: the simulator calls it from inside
// its event loop, a live run under its own lock.
package history

import (
	"slices"
	"time"

	"github.com/fencesim/fencesim/checker"
)

// Recorder collects the operations and beliefs of a run's clients.
type Recorder struct {
	lockOps []checker.LockOp
	ops     []checker.StoreOp
	beliefs []checker.Belief
	open    map[string][]int // client → indices in beliefs still open
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{open: map[string][]int{}} }

// LockCall records the call of a lock operation at at, of unknown outcome
// until LockReturn, and returns its ID. A renewal or release carries the
// token it sends (token is ignored for an acquire).
func (r *Recorder) LockCall(client, resource string, kind checker.LockKind, request, token uint64, at time.Duration) int {
	op := checker.LockOp{ID: len(r.lockOps), Client: client, Resource: resource, Kind: kind,
		Request: request, Call: at, Outcome: checker.LockUnknown}
	if kind != checker.LockAcquire {
		op.Token = token
	}
	return Push(&r.lockOps, op)
}

// LockReturn records the answer outcome to lock operation id at at, and
// reports whether it did: only the first answer counts. An acquire's
// answer names its token (0 unless granted); a granted one opens the
// client's belief that it holds the lock.
func (r *Recorder) LockReturn(id int, outcome checker.LockStatus, token uint64, at time.Duration) bool {
	op := &r.lockOps[id]
	if op.Outcome != checker.LockUnknown {
		return false
	}
	op.Return, op.Outcome = at, outcome
	if op.Kind != checker.LockAcquire {
		return true
	}
	op.Token = token
	if outcome == checker.LockGranted {
		r.open[op.Client] = append(r.open[op.Client], len(r.beliefs))
		Push(&r.beliefs, checker.Belief{Client: op.Client, Resource: op.Resource, Token: token, From: at, Open: true})
	}
	return true
}

// LockOp returns lock operation id as recorded so far.
func (r *Recorder) LockOp(id int) checker.LockOp { return r.lockOps[id] }

// StoreCall records the call of a store operation at at (op's Kind, and a
// write's Token and Value), of unknown outcome until StoreReturn, and
// returns its ID.
func (r *Recorder) StoreCall(client, resource string, op checker.StoreOp, at time.Duration) int {
	op.ID, op.Client, op.Resource, op.Call = len(r.ops), client, resource, at
	op.Outcome = checker.OutcomeUnknown
	return Push(&r.ops, op)
}

// StoreReturn records the answer to store operation id at at: a write
// accepted or rejected (stale), or a read with the value and token it
// returned (an answered read is accepted). It reports whether it did:
// only the first answer counts.
func (r *Recorder) StoreReturn(id int, accepted bool, readValue int64, readToken uint64, at time.Duration) bool {
	op := &r.ops[id]
	if op.Outcome != checker.OutcomeUnknown {
		return false
	}
	op.Return = at
	switch {
	case op.Kind == checker.OpRead:
		op.Outcome, op.ReadValue, op.ReadToken = checker.OutcomeAccepted, readValue, readToken
	case accepted:
		op.Outcome = checker.OutcomeAccepted
	default:
		op.Outcome = checker.OutcomeRejected
	}
	return true
}

// EndBelief ends, at at, client's latest open belief in token.
func (r *Recorder) EndBelief(client string, token uint64, reason string, at time.Duration) {
	open := r.open[client]
	for j := len(open) - 1; j >= 0; j-- {
		if i := open[j]; r.beliefs[i].Token == token {
			r.endBelief(i, reason, at)
			r.open[client] = append(open[:j:j], open[j+1:]...)
			return
		}
	}
}

// EndBeliefs ends, at at, every open belief of client (a restart: the
// crash ended them, at an instant the recorder cannot see, so at bounds
// it from above).
func (r *Recorder) EndBeliefs(client, reason string, at time.Duration) {
	for _, i := range r.open[client] {
		r.endBelief(i, reason, at)
	}
	delete(r.open, client)
}

func (r *Recorder) endBelief(i int, reason string, at time.Duration) {
	b := &r.beliefs[i]
	b.Open, b.To, b.Reason = false, at, reason
}

// Fill sets h's LockOps, Ops and Beliefs to what was recorded so far
// (shared, not copied): operations without an answer stay unknown,
// beliefs not given up stay open.
func (r *Recorder) Fill(h *checker.History) {
	h.LockOps, h.Ops, h.Beliefs = r.lockOps, r.ops, r.beliefs
}

// Push appends v to *s and returns its index. It doubles a full list
// (append grows one past 256 elements by about 1.25×, reallocating and
// copying a history's lists of tens of thousands of records about five
// times their final size over a run).
func Push[T any](s *[]T, v T) int {
	if len(*s) == cap(*s) {
		*s = slices.Grow(*s, max(len(*s), 64))
	}
	*s = append(*s, v)
	return len(*s) - 1
}

// HolderBusyAmbiguous returns ops with every busy acquire made ambiguous
// (unknown, no return) whose client may hold the resource itself: the
// lock API answers a holder's acquire under a new request id "held" (a
// second acquire, as lockd's), where S7's model expects the holder's own
// grant; a hold of the client's own explains the busy answer. The client
// may hold it
//
//   - from an earlier acquire of its that got no answer: it may take
//     effect at any time after its call — long after the client's later
//     grants and releases (a waiter parked at the leader is granted when
//     the lock frees, whether or not its client still listens: live swarm
//     seed 4 caught an old rule that forgot it at the client's next
//     grant);
//   - from its last grant, when the release (or a renewal) of that grant
//     got no answer: the release may never have taken effect, and a
//     renewal may have stretched the lease past the client's belief
//     (etcd's mutex with quorum lost, the reference with every replica
//     down: the next acquire, under a new request id, is answered busy
//     while the lock is still the client's own). That lasts until the
//     client's next grant, which no service gives while the old hold
//     lasts.
//
// Ambiguous is weaker than busy, so nothing the service did wrong is
// made to look right but that answer. ops is not changed (a report shows
// what the clients saw). A live run applies it before judging; the
// simulator's lock client reports such an answer as ambiguous at its
// source instead (a Busy naming the client's own token).
func HolderBusyAmbiguous(ops []checker.LockOp) []checker.LockOp {
	type cr struct{ client, resource string }
	phantom := map[cr]bool{} // an unanswered acquire of the client
	stillHeld := map[cr]bool{}
	var out []checker.LockOp
	for i, o := range ops { // in call order: each client's ops are sequential
		k := cr{o.Client, o.Resource}
		switch {
		case o.Kind == checker.LockAcquire && o.Outcome == checker.LockUnknown:
			phantom[k] = true
		case o.Kind == checker.LockAcquire && o.Outcome == checker.LockGranted:
			stillHeld[k] = false
		case (o.Kind == checker.LockRelease || o.Kind == checker.LockRenew) && o.Outcome == checker.LockUnknown:
			stillHeld[k] = true
		case o.Kind == checker.LockAcquire && o.Outcome == checker.LockBusy && (phantom[k] || stillHeld[k]):
			if out == nil {
				out = slices.Clone(ops)
			}
			out[i].Outcome, out[i].Return = checker.LockUnknown, 0
		}
	}
	if out == nil {
		return ops
	}
	return out
}
