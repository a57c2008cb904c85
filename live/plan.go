package live

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// NewPlan is scenario.NewPlan for a live target: besides the roles and
// nodes the simulator knows (@replica:N, @store, @client:NAME, @leader,
// n1…), a scripted fault may aim at any server of the target by its name
// or as a role, "@" and its name ("@redis", "@l1", "etcd2"): a Redis
// under lockd's instances, an etcd member. Such faults — every operation
// that names a target server the simulator's design lacks — go into the
// returned target faults, since the simulator could not run them; the
// plan is the scenario without them, exactly as the simulator draws it.
// A name that is neither the simulator's nor the target's is an error
// naming both lists. A swarm's plan gets, beyond the simulator's draw,
// holders paused at their writes past the target's leases
// (scenario.World.StaleHolders).
func NewPlan(spec scenario.Spec, seed uint64, info TargetInfo) (scenario.Plan, nemesis.Schedule, error) {
	sim := spec
	sim.Faults = nil
	bare, err := scenario.NewPlan(sim, seed)
	if err != nil {
		return scenario.Plan{}, nil, err
	}
	c := bare.Cluster()
	simNames := append(c.Names(), nemesis.Leader, nemesis.Crashed, nemesis.Subject)
	var simFaults, target nemesis.Schedule
	for i, op := range spec.Faults {
		names := append([]string{op.Node, op.To}, op.Group...)
		own := false
		for _, n := range names {
			switch {
			case n == "" || slices.Contains(simNames, n) || nemesis.IsFixedRole(n):
			case slices.Contains(info.Servers, strings.TrimPrefix(n, "@")):
				own = true
			default:
				return scenario.Plan{}, nil, fmt.Errorf("scenario %q: fault %d (%s): unknown node %q: the simulator's nodes are %s (and roles such as @replica:1, @store, @leader), target %s's servers %s (by name or as @name)",
					spec.Name, i, op, n, strings.Join(c.Names(), ", "), info.Name, strings.Join(info.Servers, ", "))
			}
		}
		if !own {
			simFaults = append(simFaults, op)
			continue
		}
		if op.At >= spec.Duration {
			return scenario.Plan{}, nil, fmt.Errorf("scenario %q: fault %d (%s) at %v lies beyond the duration %v", spec.Name, i, op, time.Duration(op.At), time.Duration(spec.Duration))
		}
		target = append(target, op)
	}
	if len(target) > 0 {
		// The target's faults checked as the simulator checks its own,
		// against a cluster that has the target's servers too.
		tc := c
		tc.Servers = slices.Clone(c.Servers)
		for _, s := range info.Servers {
			tc.Servers = append(tc.Servers, s, "@"+s)
		}
		tc.LeaderSelector = true
		if err := target.ValidateFor(tc); err != nil {
			return scenario.Plan{}, nil, fmt.Errorf("scenario %q: target %s: %w", spec.Name, info.Name, err)
		}
	}
	spec.Faults = simFaults
	// A live run pauses a holder at its write past its lease whatever
	// its seed drew (scenario.World.StaleHolders): a handful of seeds,
	// each tens of seconds, must each exercise the failure the targets
	// exist to show; the simulator's draw of the seed stays as it is.
	p, err := scenario.NewPlanIn(spec, seed, scenario.World{StaleHolders: true, Lease: info.leaseLife(c.TTL)})
	if err != nil {
		return scenario.Plan{}, nil, err
	}
	return p, target.Sorted(), nil
}
