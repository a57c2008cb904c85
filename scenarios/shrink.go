package scenarios

import (
	"fmt"
	"slices"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// Sizes measures a plan for shrinking reports.
type Sizes struct {
	Faults   int `json:"faults"`
	Clients  int `json:"clients"`
	Replicas int `json:"replicas"`
}

func (s Sizes) String() string {
	return fmt.Sprintf("%s, %s, %s", Count(s.Faults, "fault operation"), Count(s.Clients, "client"), Count(s.Replicas, "replica"))
}

// SizesOf measures p.
func SizesOf(p Plan) Sizes {
	return Sizes{Faults: len(p.Schedule), Clients: len(p.Spec.Clients), Replicas: len(p.Spec.ServerNames())}
}

// Shrunk is what Shrink found.
type Shrunk struct {
	Property string // the property every kept candidate still violates
	Before   Sizes
	After    Sizes
	Result   Result // the run of the smallest plan
	Runs     int    // simulations tried
}

// Shrink reduces a failing plan while the same property still fails: first
// the fault schedule (delta debugging), then the workload (clients one at a
// time, with the faults that name them) and the cluster (down to 3 nodes,
// where the design takes 3), then the schedule again. The seed stays: the world's random streams do
// not depend on the schedule, so a smaller plan replays the same draws
// wherever the faults no longer intervene.
func Shrink(p Plan, opt RunOptions) (Shrunk, error) {
	first, err := RunPlan(p, opt)
	if err != nil {
		return Shrunk{}, err
	}
	if first.Verdict.Kind != checker.VerdictViolation {
		return Shrunk{}, fmt.Errorf("scenario %q seed %d does not violate a safety property (verdict %s): nothing to shrink",
			p.Spec.Name, p.Seed, first.Verdict.Kind)
	}
	prop := p.Spec.Expect.Headline(first.Verdict) // the property the scenario exists to show
	out := Shrunk{Property: prop, Before: SizesOf(p), Result: first, Runs: 1}
	fails := func(c Plan) bool {
		if c.Validate() != nil {
			return false
		}
		out.Runs++
		res, err := RunPlan(c, opt)
		if err != nil || res.Verdict.Kind != checker.VerdictViolation {
			return false
		}
		for _, v := range res.Verdict.Violations {
			if v.Property == prop {
				out.Result = res
				return true
			}
		}
		return false
	}
	schedule := func(c Plan) Plan {
		try := func(s nemesis.Schedule) bool {
			d := c
			d.Schedule = s
			return fails(d)
		}
		// One fault alone is the commonest cause, and a single run per
		// operation finds it where removing chunks would shift the timing
		// that made the failure.
		for i := range c.Schedule {
			if one := c.Schedule[i : i+1 : i+1]; try(one) {
				c.Schedule = slices.Clone(one)
				return c
			}
		}
		c.Schedule = nemesis.Minimize(c.Schedule, try)
		return c
	}
	// The schedule holds the scripted faults too; the spec's copy would
	// only disagree with it once operations go.
	p.Spec.Faults = nil
	cur := schedule(p)
	for i := len(cur.Spec.Clients) - 1; i >= 0 && len(cur.Spec.Clients) > 1; i-- {
		if cand := withoutClient(cur, i); fails(cand) {
			cur = cand
		}
	}
	if cand, ok := withThreeReplicas(cur); ok && fails(cand) {
		cur = cand
	}
	cur = schedule(cur)
	// The last kept candidate's run is out.Result; make sure it is cur's.
	if !fails(cur) {
		return Shrunk{}, fmt.Errorf("the shrunk plan no longer fails %s on a rerun: the predicate is not deterministic", prop)
	}
	out.After = SizesOf(cur)
	return out, nil
}

// withoutClient drops client i and the fault operations that name it.
func withoutClient(p Plan, i int) Plan {
	name := p.Spec.Clients[i].Name
	c := p.Spec.Cluster()
	p.Spec.Clients = slices.Delete(slices.Clone(p.Spec.Clients), i, i+1)
	p.Spec.Faults = dropNaming(p.Spec.Faults, c, name)
	p.Schedule = dropNaming(p.Schedule, c, name)
	return p
}

// withThreeReplicas shrinks the service to 3 nodes, if the design has more
// and takes 3 (it says so through Design.Nodes: the reference, lease-only
// and Redlock do), and drops the faults naming a node that goes — by its
// name or by its role (@replica:4 in a group of 5).
func withThreeReplicas(p Plan) (Plan, bool) {
	d := designOf(p.Spec)
	if d == nil {
		return p, false
	}
	before := p.Spec.ServerNames()
	after, err := d.Nodes(3)
	if err != nil || len(before) <= 3 {
		return p, false
	}
	c := p.Spec.Cluster()
	p.Spec.Replicas = 3
	for _, n := range before {
		if !slices.Contains(after, n) {
			p.Spec.Faults = dropNaming(p.Spec.Faults, c, n)
			p.Schedule = dropNaming(p.Schedule, c, n)
		}
	}
	return p, true
}

// dropNaming removes the operations that name node — by its name or by a
// fixed role that c binds to it — and node from partition groups (a group
// left empty drops its operation).
func dropNaming(s nemesis.Schedule, c nemesis.Cluster, node string) nemesis.Schedule {
	names := func(n string) bool {
		bound, err := c.Bind(n)
		return n == node || err == nil && bound == node
	}
	var out nemesis.Schedule
	for _, op := range s {
		if names(op.Node) || names(op.To) {
			continue
		}
		if len(op.Group) > 0 {
			op.Group = slices.DeleteFunc(slices.Clone(op.Group), names)
			if len(op.Group) == 0 {
				continue
			}
		}
		out = append(out, op)
	}
	return out
}
