package scenarios

import (
	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// recorder turns the processes' observations into the checker's history,
// stamping each with the true time and step only the simulator knows.
type recorder struct {
	w       *sim.World
	h       checker.History
	open    map[uint64]int  // grant token → index in h.Grants while not ended
	granted map[uint64]bool // every token recorded so far
	ops     map[opKey]int   // (client, request) → index in h.Ops
}

// opKey pairs a client's call with its return.
type opKey struct {
	client  string
	request uint64
}

func newRecorder(w *sim.World) *recorder {
	return &recorder{w: w, open: map[uint64]int{}, granted: map[uint64]bool{}, ops: map[opKey]int{}}
}

// Observe records one event. Service-side events are reported by every
// replica that applies the entry; the first report is the instant the
// service decided, later ones are ignored.
func (r *recorder) Observe(e lockservice.Event) {
	switch e.Kind {
	case lockservice.EvGranted:
		if r.granted[e.Token] {
			return
		}
		r.granted[e.Token] = true
		r.open[e.Token] = len(r.h.Grants)
		r.h.Grants = append(r.h.Grants, checker.Grant{Resource: e.Resource, Client: e.Client, Token: e.Token,
			Start: r.w.Now(), Open: true, Step: r.w.Step()})
	case lockservice.EvEnded:
		i, ok := r.open[e.Token]
		if !ok {
			return
		}
		delete(r.open, e.Token)
		r.h.Grants[i].Open = false
		r.h.Grants[i].End = r.w.Now()
	case lockservice.EvApplied:
		r.h.Applies = append(r.h.Applies, checker.StoreApply{Resource: e.Resource, Client: e.Client, Token: e.Token,
			Value: e.Value, Accepted: e.Accepted, At: r.w.Now(), Step: r.w.Step()})
	case lockservice.EvCall:
		switch e.Op {
		case lockservice.OpWrite:
			r.call(e, checker.StoreOp{Kind: checker.OpWrite, Token: e.Token, Value: e.Value})
		case lockservice.OpRead:
			r.call(e, checker.StoreOp{Kind: checker.OpRead})
		}
	case lockservice.EvReturn:
		i, ok := r.ops[opKey{e.Client, e.Request}]
		if !ok || (e.Op != lockservice.OpWrite && e.Op != lockservice.OpRead) {
			return
		}
		op := &r.h.Ops[i]
		op.Return = r.w.Now()
		switch {
		case e.Op == lockservice.OpRead:
			op.Outcome = checker.OutcomeAccepted
			op.ReadValue, op.ReadToken = e.Value, e.Token
		case e.Accepted:
			op.Outcome = checker.OutcomeAccepted
		default:
			op.Outcome = checker.OutcomeRejected
		}
	}
}

func (r *recorder) call(e lockservice.Event, op checker.StoreOp) {
	op.ID = len(r.h.Ops)
	op.Client, op.Resource = e.Client, e.Resource
	op.Call = r.w.Now()
	op.Outcome = checker.OutcomeUnknown // until a reply says otherwise
	r.ops[opKey{e.Client, e.Request}] = op.ID
	r.h.Ops = append(r.h.Ops, op)
}

// history returns the history as of the end of the run: operations still
// without a reply stay unknown, grants still held stay open.
func (r *recorder) history() checker.History {
	h := r.h
	h.End = r.w.Now()
	return h
}
