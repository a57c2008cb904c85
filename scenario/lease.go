package scenario

import (
	"fmt"
	"slices"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// LeaseExcuses lists the windows of p's schedule in which a fault outside
// the lease fault model was active (see checker.CheckLeaseSafety): a pause
// of a client, and clock drift beyond the clients' bound ρ — on a client
// (its own beliefs), or on a service node (every client's: the leader times
// the leases); and for a design whose service times leases by a wall
// clock (DesignInfo.WallClockLeases), a wall jump on a service node, for
// every client, from the jump until a TTL after it ends.
//
// A trigger (a fault with When) excuses nothing in the plan: where and
// when it struck is known once it fires (Result.Fired,
// LeaseExcusesFired, scenarios.Result.LeaseExcuses).
func (p Plan) LeaseExcuses() []checker.LeaseExcuse { return p.LeaseExcusesFired(nil) }

// LeaseExcusesFired are the plan's excuses and those of the triggers
// that fired in a run (fired: the faults they became), as a run's result
// reports them.
func (p Plan) LeaseExcusesFired(fired nemesis.Schedule) []checker.LeaseExcuse {
	var clients []string
	var bound int64
	for _, c := range p.Spec.Clients {
		clients = append(clients, c.Name)
		bound = max(bound, c.DriftBoundPPM)
	}
	end := p.End()
	var ttl time.Duration
	for _, c := range p.Spec.Clients {
		ttl = max(ttl, time.Duration(c.TTL))
	}
	wallLeases := false
	if d := p.Spec.Shape(); d != nil {
		wallLeases = d.Info().WallClockLeases
	}
	who := func(node string) (string, bool) {
		switch {
		case slices.Contains(clients, node):
			return node, true
		case node == StoreNode:
			return "", false // the store times nothing
		}
		return "", true // a service node, or the @leader selector
	}
	var out []checker.LeaseExcuse
	// Roles bound: a pause of @client:a is a pause of a.
	ops := slices.DeleteFunc(slices.Clone(p.Installed()), func(op nemesis.Op) bool { return op.When != "" })
	ops = append(ops, fired...).Sorted()
	for i, op := range ops {
		at := time.Duration(op.At)
		switch op.Kind {
		case nemesis.Pause:
			if c, ok := who(op.Node); ok && c != "" {
				out = append(out, checker.LeaseExcuse{Client: c, From: at, To: at + time.Duration(op.Duration), Fault: "pause of " + op.Node})
			}
		case nemesis.Jump:
			// A design whose service times leases by a node's wall clock
			// (Redis expires keys at an absolute wall time) loses them
			// early to a jump of that clock: outside its lease model, as
			// its documentation says, and fencing still holds.
			if c, ok := who(op.Node); ok && c == "" && wallLeases {
				out = append(out, checker.LeaseExcuse{From: at, To: at + time.Duration(op.Duration) + ttl,
					Fault: fmt.Sprintf("wall jump of %v on %s, whose wall clock times the leases", time.Duration(op.By), op.Node)})
			}
		case nemesis.Drift:
			if op.PPM <= bound && op.PPM >= -bound {
				continue
			}
			c, ok := who(op.Node)
			if !ok {
				continue
			}
			to := end
			if op.Duration > 0 {
				to = at + time.Duration(op.Duration)
			} else {
				for _, later := range ops[i+1:] { // until its node's clock is reset
					if later.Node == op.Node && (later.Kind == nemesis.ClockReset || later.Kind == nemesis.Drift && later.PPM == 0) {
						to = time.Duration(later.At)
						break
					}
				}
			}
			out = append(out, checker.LeaseExcuse{Client: c, From: at, To: to, Fault: fmt.Sprintf("drift of %d ppm on %s", op.PPM, op.Node)})
		}
	}
	return out
}
