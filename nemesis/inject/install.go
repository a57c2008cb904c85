// Package inject carries nemesis schedules out in a simulated world
// (sim.World): it is the simulator's nemesis.Nemesis. The fault
// vocabulary — kinds, operations, schedules, triggers, the swarm
// generator — is package nemesis's, which holds no simulator code, so that
// the live runner shares it without the simulator.
package inject

import (
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

// Resolver maps a node name or selector to a node at the instant a fault
// fires; ok is false when the selector matches nothing then.
type Resolver func(name string) (id sim.NodeID, ok bool)

// Install schedules every operation on w; resolve maps names to nodes when
// each fault fires. The schedule should have been validated against the
// same names: an operation that fails Check is skipped, never carried out
// halfway, and a name that does not resolve skips its operation. Install a
// world's faults with one call: the faults of one schedule know each other
// (a network fault ending restores what was there before it, unless a later
// one is still on), those of two schedules do not.
//
// The triggers (operations with When) are armed instead of scheduled: the
// returned Watch fires them when the run tells it of their moments
// (Watch.Notice), so the caller must pass every moment the run reports to
// it.
func Install(s nemesis.Schedule, w *sim.World, resolve Resolver) *Watch {
	return InstallCounting(s, w, resolve, nil)
}

// InstallCounting is Install that also counts the nemesis's coverage marks
// in cov (nil: none). Counting only reads the world.
func InstallCounting(s nemesis.Schedule, w *sim.World, resolve Resolver, cov *Coverage) *Watch {
	x := &injector{w: w, resolve: resolve, cov: cov}
	watch := &Watch{x: x, armed: nemesis.Arm(s)}
	for _, op := range s.Sorted() {
		if op.When != "" {
			continue
		}
		w.At(time.Duration(op.At), "fault "+op.String(), func() { x.apply(op) })
	}
	return watch
}

// Watch holds an installed schedule's triggers until their moments come
// (the matching is Armed's, which the live runner shares) and fires them
// on the world's clock.
type Watch struct {
	x     *injector
	armed *nemesis.Armed
	// Fired are the triggers fired so far, in firing order, as the faults
	// they became: At the instant each is carried out, Node the node
	// Subject stood for, When, Within and After cleared.
	Fired nemesis.Schedule
}

// Notice tells the watch of a moment, at the instant it happens: every
// armed trigger of its kind not yet fired whose window holds now fires,
// After later (at the same instant, after the event that reported the
// moment). Triggers fire in schedule order; each fires once.
func (wt *Watch) Notice(m nemesis.Moment) {
	if wt == nil {
		return
	}
	now := wt.x.w.Now()
	for _, fire := range wt.armed.Notice(now, m) {
		wt.Fired = append(wt.Fired, fire)
		wt.x.w.At(time.Duration(fire.At), "fault "+fire.String()+" on "+string(m.Kind)+" of "+m.Subject, func() { wt.x.apply(fire) })
	}
}

// New returns the simulator's Nemesis for w: Apply carries an operation
// out at once, as Install does at its instant.
func New(w *sim.World, resolve Resolver) nemesis.Nemesis {
	return &injector{w: w, resolve: resolve}
}

// Apply carries op out now (nemesis.Nemesis).
func (x *injector) Apply(op nemesis.Op) { x.apply(op) }

// Implements reports whether the simulator has code for kind.
func (x *injector) Implements(k nemesis.Kind) bool { return appliers[k] != nil }

// Cannot is "" for every kind: the simulator carries out all of them.
func (x *injector) Cannot(nemesis.Kind) string { return "" }
