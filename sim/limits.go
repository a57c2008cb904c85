package sim

import (
	"fmt"
	"runtime/debug"
	"time"
)

// Limits bound what one run may hold at once. A livelocked or runaway
// service (a message storm, a timer that re-arms itself twice, a log that
// grows without end) otherwise grows until the machine runs out of memory;
// with limits it stops at a named limit, and the harness can still judge
// what happened before. They count events and bytes, never wall time or
// memory statistics, so a run stops at the same step on every machine and
// the verdict stays a function of the seed. Zero fields take the defaults.
type Limits struct {
	// Pending bounds the events waiting at once: queued messages, timers,
	// pause ends and harness actions, plus what paused and stalled nodes
	// hold back.
	Pending int
	// DiskBytes bounds the bytes one node's disk holds: the current value
	// of every key.
	DiskBytes int
	// TraceBytes bounds the readable trace (Config.Trace). Reaching it does
	// not stop the run: the trace ends with a line that says so, and the
	// run goes on untraced (its hash still covers every event).
	TraceBytes int
}

// The default limits sit far above what healthy runs reach — simrun
// bench's standard run (16 nodes, 60 simulated seconds, swarm faults) peaks
// at 481 pending events and 300 kB on one disk over seeds 1..5, the
// built-in scenarios lower — and low enough that a runaway stops within
// about 100 MB: an event is about 100 bytes with what it points to, and a
// disk's appends may reserve twice what it holds.
const (
	DefaultPending   = 1 << 18
	DefaultDiskBytes = 16 << 20
	// DefaultTraceBytes is about three times the standard run's trace
	// (18 MB; about 100 bytes an event): a runaway's 20 million steps
	// would write 2 GB.
	DefaultTraceBytes = 64 << 20
)

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.Pending <= 0 {
		l.Pending = DefaultPending
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	if l.TraceBytes <= 0 {
		l.TraceBytes = DefaultTraceBytes
	}
	return l
}

// LimitError says which limit stopped a run, and where.
type LimitError struct {
	// Limit names what was bounded: "pending events", "disk bytes of
	// node n1", or what the harness named in World.Exhaust.
	Limit string
	Max   int
	Step  uint64
	At    time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("sim: the limit of %d %s was reached at step %d, t=%v", e.Max, e.Limit, e.Step, e.At)
}

// Exhaust stops the run now because the harness's own bound on limit (for
// example the records of a history) reached max: the event in progress is
// abandoned and Run returns Exhausted, now and at every later call. It is
// for bounds the world cannot see; it must be called from inside Run (a
// process, a timer or an action), else it panics with the *LimitError.
func (w *World) Exhaust(limit string, max int) {
	if w.cut == nil {
		w.cut = &LimitError{Limit: limit, Max: max, Step: w.step, At: w.now}
	}
	panic(w.cut)
}

// Cut returns the limit that stopped the run, or nil if none did.
func (w *World) Cut() *LimitError { return w.cut }

// room checks that one more event may wait; it precedes every push of
// the queue.
func (w *World) room() {
	if n := w.queue.len() + w.parked; n >= w.peak {
		if n >= w.limits.Pending {
			w.Exhaust("pending events", w.limits.Pending)
		}
		w.peak = n + 1
	}
}

// Panic is what a panic inside a run becomes: the value the code panicked
// with, where in the run it happened — step, virtual time and the node
// whose process (or the harness action) was running — and the stack of
// the panic. Run re-panics with it, so that a harness can turn one seed's
// crash into that seed's verdict. Everything but Stack is a function of
// the seed; Stack depends on the build and the machine.
type Panic struct {
	Value any
	Step  uint64
	At    time.Duration
	// Node is the node whose process code was running, or "action NAME"
	// for a harness callback, or "" for the simulator itself.
	Node  string
	Stack []byte
}

func (p *Panic) Error() string {
	where := p.Node
	if where == "" {
		where = "the simulator"
	}
	return fmt.Sprintf("panic at step %d, t=%v, in %s: %v", p.Step, p.At, where, p.Value)
}

// Unwrap returns the panic value if it is an error.
func (p *Panic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// recoverRun is Run's deferred handler, so the loop itself pays nothing
// per event: a limit's abandonment becomes the outcome Exhausted, any
// other panic is re-panicked as a *Panic that carries the step, the
// virtual time and the node.
func (w *World) recoverRun(out *Outcome) {
	r := recover()
	if r == nil {
		return
	}
	running, action := w.running, w.action
	w.running, w.stall, w.action = nil, 0, 0
	if e, ok := r.(*LimitError); ok && e == w.cut {
		*out = Exhausted
		return
	}
	if p, ok := r.(*Panic); ok {
		panic(p) // from a nested Run: it has its context already
	}
	p := &Panic{Value: r, Step: w.step, At: w.now, Stack: debug.Stack()}
	switch {
	case running != nil:
		p.Node = running.name
	case action > 0:
		p.Node = "action " + w.actionNames[action-1]
	}
	panic(p)
}
