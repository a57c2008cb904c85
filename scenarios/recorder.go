package scenarios

import (
	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/sim"
)

// recorder turns the processes' observations into the checker's history,
// stamping each with the true time and step only the simulator knows.
type recorder struct {
	w       *sim.World
	h       checker.History
	open    map[uint64]int  // grant token → index in h.Grants while not ended
	granted map[uint64]bool // every token recorded so far
}

func newRecorder(w *sim.World) *recorder {
	return &recorder{w: w, open: map[uint64]int{}, granted: map[uint64]bool{}}
}

// Granted records a grant once: every replica applies the granting entry,
// and the first to do so marks the instant the service granted it.
func (r *recorder) Granted(resource, client string, token uint64) {
	if r.granted[token] {
		return
	}
	r.granted[token] = true
	r.open[token] = len(r.h.Grants)
	r.h.Grants = append(r.h.Grants, checker.Grant{Resource: resource, Client: client, Token: token,
		Start: r.w.Now(), Open: true, Step: r.w.Step()})
}

func (r *recorder) Ended(resource string, token uint64, reason string) {
	i, ok := r.open[token]
	if !ok {
		return
	}
	delete(r.open, token)
	r.h.Grants[i].Open = false
	r.h.Grants[i].End = r.w.Now()
}

func (r *recorder) Applied(resource, client string, token uint64, value int64, accepted bool) {
	r.h.Applies = append(r.h.Applies, checker.StoreApply{Resource: resource, Client: client, Token: token,
		Value: value, Accepted: accepted, At: r.w.Now(), Step: r.w.Step()})
}

func (r *recorder) call(op checker.StoreOp) int {
	op.ID = len(r.h.Ops)
	op.Call = r.w.Now()
	op.Outcome = checker.OutcomeUnknown // until a reply says otherwise
	r.h.Ops = append(r.h.Ops, op)
	return op.ID
}

func (r *recorder) WriteCalled(client, resource string, token uint64, value int64) int {
	return r.call(checker.StoreOp{Client: client, Resource: resource, Kind: checker.OpWrite, Token: token, Value: value})
}

func (r *recorder) WriteReturned(id int, accepted bool) {
	op := &r.h.Ops[id]
	op.Return = r.w.Now()
	op.Outcome = checker.OutcomeRejected
	if accepted {
		op.Outcome = checker.OutcomeAccepted
	}
}

func (r *recorder) ReadCalled(client, resource string) int {
	return r.call(checker.StoreOp{Client: client, Resource: resource, Kind: checker.OpRead})
}

func (r *recorder) ReadReturned(id int, value int64, token uint64) {
	op := &r.h.Ops[id]
	op.Return = r.w.Now()
	op.Outcome = checker.OutcomeAccepted
	op.ReadValue, op.ReadToken = value, token
}

// history returns the history as of the end of the run: operations still
// without a reply stay unknown, grants still held stay open.
func (r *recorder) history() checker.History {
	h := r.h
	h.End = r.w.Now()
	return h
}
