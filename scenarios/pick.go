package scenarios

import (
	"time"

	"github.com/fencesim/fencesim/sim"
)

// Pick records what a fault's node selector (nemesis.Leader) resolved to
// when the fault fired. The schedule says only "@leader"; which node led
// is known at that instant alone, and the report draws the fault on that
// node's row.
type Pick struct {
	At       time.Duration // true time the fault fired
	Selector string        // as the schedule spells it: "@leader"
	Node     string        // the node chosen; "" if none was (the fault was skipped)
}

// pickOf names the resolution of selector at w's current time.
func pickOf(w *sim.World, selector string, id sim.NodeID, ok bool) Pick {
	p := Pick{At: w.Now(), Selector: selector}
	if ok {
		p.Node = w.Name(id)
	}
	return p
}
