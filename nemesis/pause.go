// Pause: a process stops running for a while — a garbage-collection or
// stop-the-world pause, a VM migration, SIGSTOP — and then carries on
// unaware that time passed.
//
// Inside the fault model: pauses of any length, of servers, the store and
// clients alike, including pauses far past the lease TTL (the pause that
// makes a client believe it still holds an expired lock: fencing must make
// its late writes harmless). The node's clocks keep running while it is
// paused; what falls due meanwhile — timers and messages — happens, in
// order, when it resumes.
//
// Outside the fault model: nothing about a pause itself. A pause cannot be
// cut short (a later, shorter pause of the same node does nothing), and
// HealAll cannot end one, so the generator ends every pause within the
// safety phase.
package nemesis

import (
	"errors"
	"time"
)

var pauseSpec = kindSpec{
	kind:   Pause,
	fields: fNode | fDuration | fTrigger,
	check: func(op Op) error {
		if op.Duration <= 0 {
			return errors.New("duration must be positive: say how long the node stops, e.g. \"3s\"")
		}
		return nil
	},
}

// pause draws one pause of a target for d.
func (g *generator) pause(at, d time.Duration) {
	node, ok := g.target(g.o.Pause.Targets)
	if !ok {
		return
	}
	g.add(Op{At: Duration(at), Kind: Pause, Node: node, Duration: Duration(d)})
}
