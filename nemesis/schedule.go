// Package nemesis injects faults into a simulation. A fault schedule is
// data: a list of timed operations that can be written to JSON, read back,
// replayed exactly and shrunk.
//
// Inside the fault model today: process pauses of any length (a GC or
// stop-the-world pause; the node's clock keeps running), crashes that lose
// unsynced disk writes, restarts, partitions as blocked directed links, and
// heals. Outside it, for now: clock drift and jumps, message loss and
// duplication rates, slow disks — they arrive with the swarm generator.
package nemesis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/fencesim/fencesim/sim"
)

// Kind names a fault operation.
type Kind string

const (
	// Pause stops Node for Duration.
	Pause Kind = "pause"
	// Crash kills Node; it loses memory, timers and unsynced writes.
	Crash Kind = "crash"
	// Restart boots a crashed Node from its disk.
	Restart Kind = "restart"
	// Isolate blocks every link to and from Node, both ways.
	Isolate Kind = "isolate"
	// Heal reopens every link.
	Heal Kind = "heal"
)

var kinds = []Kind{Pause, Crash, Restart, Isolate, Heal}

// Leader is a node selector resolved when the fault fires: the replica that
// leads at that instant (the fault is skipped if none does). Schedules can
// so aim at the leader without knowing the seed's election.
const Leader = "@leader"

// Crashed is a selector for Restart only: every node crashed at that instant.
const Crashed = "@crashed"

// Resolver maps a node name or selector to a node at the instant a fault
// fires; ok is false when the selector matches nothing then.
type Resolver func(name string) (id sim.NodeID, ok bool)

// Op is one fault at a true time.
type Op struct {
	At       Duration `json:"at"`
	Kind     Kind     `json:"kind"`
	Node     string   `json:"node,omitempty"`
	Duration Duration `json:"duration,omitempty"`
}

// Schedule is a list of fault operations, kept sorted by time (stable, so
// operations at one instant keep their written order).
type Schedule []Op

// Validate checks every operation against the names of the run's nodes
// (selectors such as Leader are valid where the caller lists them).
func (s Schedule) Validate(nodes []string) error {
	for i, op := range s {
		if op.At < 0 {
			return fmt.Errorf("nemesis: fault %d (%s): time %v is negative", i, op.Kind, time.Duration(op.At))
		}
		if !slices.Contains(kinds, op.Kind) {
			return fmt.Errorf("nemesis: fault %d: unknown kind %q (known: %v)", i, op.Kind, kinds)
		}
		if op.Kind == Heal {
			continue
		}
		if op.Node == Crashed && op.Kind != Restart {
			return fmt.Errorf("nemesis: fault %d (%s): selector %s only works with restart", i, op.Kind, Crashed)
		}
		if op.Node != Crashed && !slices.Contains(nodes, op.Node) {
			return fmt.Errorf("nemesis: fault %d (%s): unknown node %q (nodes: %v)", i, op.Kind, op.Node, nodes)
		}
		if op.Kind == Pause && op.Duration <= 0 {
			return fmt.Errorf("nemesis: fault %d (pause %s): duration must be positive", i, op.Node)
		}
	}
	return nil
}

// Install schedules every operation on w; resolve maps names to nodes when
// each fault fires. The schedule must have been validated against the same
// names.
func (s Schedule) Install(w *sim.World, resolve Resolver) {
	ops := slices.Clone(s)
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.At, b.At) })
	for _, op := range ops {
		w.At(time.Duration(op.At), "fault "+op.String(), func() { apply(w, op, resolve) })
	}
}

func apply(w *sim.World, op Op, resolve Resolver) {
	if op.Kind == Heal {
		w.Heal()
		return
	}
	if op.Kind == Restart && op.Node == Crashed {
		for n := range w.Nodes() {
			w.Restart(sim.NodeID(n)) // a no-op on live nodes
		}
		return
	}
	id, ok := resolve(op.Node)
	if !ok {
		return
	}
	switch op.Kind {
	case Pause:
		w.Pause(id, time.Duration(op.Duration))
	case Crash:
		w.Crash(id)
	case Restart:
		w.Restart(id)
	case Isolate:
		for other := range w.Nodes() {
			if o := sim.NodeID(other); o != id {
				w.Block(id, o)
				w.Block(o, id)
			}
		}
	}
}

func (op Op) String() string {
	s := string(op.Kind)
	if op.Node != "" {
		s += " " + op.Node
	}
	if op.Duration > 0 {
		s += " for " + time.Duration(op.Duration).String()
	}
	return s
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1.5s"), so schedules stay readable and editable by hand.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"250ms\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q: %v", s, err)
	}
	*d = Duration(v)
	return nil
}
