package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// Plan is everything a run is made of, drawn from its seed before it
// starts: the spec, the seed, the swarm's fault options and the complete,
// explicit fault schedule. A replay or a shrink runs a plan whose schedule
// was written down (or reduced) instead of drawn.
type Plan struct {
	Spec Spec
	Seed uint64
	// Options are the swarm's drawn fault settings (nil without a swarm).
	Options *nemesis.Options
	// Schedule is every fault operation the run installs, time-sorted:
	// the spec's scripted faults, the swarm's, what the World adds to a
	// swarm's, and the final heal.
	Schedule nemesis.Schedule
	// WorldOps counts the operations of Schedule that the plan's World
	// added to the simulator's draw (0 in the simulator). A simulator's
	// replay file keeps the schedule, not this count; a live one keeps
	// both (live.ReplayFile's world_ops).
	WorldOps int
}

// World is what a plan's draw must know of the world that will run it,
// beyond the spec. The simulator's is the zero World: its draws are the
// ones the built-in scenarios' trace hashes pin, and another world's
// additions come from streams of their own, so that the simulator's
// draw of a seed stays in every world's plan of it.
type World struct {
	// StaleHolders: every swarm plan holds holders paused at their
	// writes past their leases (nemesis.StaleHolders, one for every 10 s
	// of the safety phase), on top of the simulator's draw. A world
	// that runs a few seeds, each for tens of seconds (a live run), asks
	// for it: it cannot wait for the seeds whose swarm draws them.
	StaleHolders bool
	// Lease is the longest a lease granted for the clients' TTL lives in
	// this world before another client can be granted it (a real
	// service may round the TTL up or expire leases late); 0: the TTL.
	Lease time.Duration
}

// staleStream seeds the World's stale-holder pauses: apart from every
// other draw, so that a seed's simulator plan is the same with them.
func staleStream(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x5354414C_45000000)) // "STALE"
}

// swarmStream seeds the draws of fault options and schedules. It is apart
// from the World's streams, so a plan's schedule can be replaced (replay,
// shrink) without shifting any other draw of the run.
func swarmStream(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x53574152_4D000000))
}

// Cluster names the plan's nodes as its schedule does: the design's
// servers, the store and the clients (what a live run maps onto real
// processes).
func (p Plan) Cluster() nemesis.Cluster { return p.Spec.Cluster() }

// NewPlan validates spec and draws the run's fault plan from seed, as
// the simulator runs it.
func NewPlan(spec Spec, seed uint64) (Plan, error) { return NewPlanIn(spec, seed, World{}) }

// NewPlanIn is NewPlan for a run in world w: the simulator's plan, and
// what w adds to a swarm's.
func NewPlanIn(spec Spec, seed uint64, w World) (Plan, error) {
	if err := spec.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Spec: spec, Seed: seed, Schedule: slices.Clone(spec.Faults)}
	if spec.Swarm {
		c := spec.Cluster()
		r := swarmStream(seed)
		o := nemesis.DrawOptions(r, c)
		// From a stream of its own, so that a seed that does not draw it
		// keeps the schedule it had.
		nemesis.DrawRecoveryAim(&o, rand.New(rand.NewPCG(seed, 0x52454356_45525900)), c) // "RECOVERY"
		p.Options = &o
		p.Schedule = append(p.Schedule, nemesis.Generate(r, o, c, time.Duration(spec.Duration))...)
		// From a stream of its own, so that the schedule drawn above stays
		// as it was: the strikes at Raft's moments come on top.
		raft := nemesis.RaftStrikes(rand.New(rand.NewPCG(seed, 0x52414654_41494D53)), c, time.Duration(spec.Duration)) // "RAFTAIMS"
		if len(raft) > 0 {
			p.Schedule = append(p.Schedule, raft...).Sorted()
		}
		// The stories the hardest mutants need, sharpened, likewise (the
		// schedule is sorted once, at the end: the sort is stable).
		p.Schedule = append(p.Schedule, nemesis.StoryStrikes(rand.New(rand.NewPCG(seed, 0x53544F52_59000000)), c, time.Duration(spec.Duration))...) // "STORY"
		if w.StaleHolders {
			stale := nemesis.StaleHolders(staleStream(seed), c, time.Duration(spec.Duration), w.Lease)
			p.Schedule, p.WorldOps = append(p.Schedule, stale...), len(stale)
		}
		if spec.TokenOffset == 0 {
			// Written into the plan's spec, so that a replay file and a
			// shrink keep the offset the seed drew.
			p.Spec.TokenOffset = DrawTokenOffset(seed)
		}
		if spec.IngressDepth == 0 {
			p.Spec.IngressDepth = DrawIngressDepth(seed)
		}
		if spec.ServerSyncDelay == 0 && spec.StoreSyncDelay == 0 {
			p.Spec.ServerSyncDelay, p.Spec.StoreSyncDelay = DrawSyncDelays(seed)
		}
		if !spec.GroupCommit {
			p.Spec.GroupCommit = drawGroupCommit(seed)
		}
		if p.Spec.GroupCommit && spec.GroupCommitWindow == 0 {
			p.Spec.GroupCommitWindow = DrawGroupCommitWindow(seed)
		}
		if !spec.AsyncWrites {
			p.Spec.AsyncWrites = drawAsyncWrites(seed)
		}
		if spec.Buggify == nil {
			p.Spec.Buggify = DrawBuggify(seed)
		}
		p.Spec.Clients = WithThinkTimes(spec.Clients, seed)
	}
	if spec.SnapshotEntries == 0 && spec.SnapshotBytes == 0 {
		// Every run, swarm or scripted: written into the plan's spec, so
		// that a replay file and a shrink keep what the seed drew.
		p.Spec.SnapshotEntries, p.Spec.SnapshotBytes = DrawSnapshot(seed)
	}
	if spec.Liveness != nil {
		p.Schedule = p.Schedule.HealAll(time.Duration(spec.Duration), spec.Cluster())
	}
	p.Schedule = p.Schedule.Sorted()
	return p, p.Validate()
}

// WithThinkTimes returns clients with the think times drawn from seed
// (DrawThinkTimes), written into a copy so that a replay file and a
// shrink keep what the seed drew; clients as they are if any of them
// sets its own.
func WithThinkTimes(clients []ClientSpec, seed uint64) []ClientSpec {
	if slices.ContainsFunc(clients, func(c ClientSpec) bool { return c.ThinkTime != 0 }) {
		return clients
	}
	drawn := DrawThinkTimes(seed, clients)
	if drawn == nil {
		return clients
	}
	out := slices.Clone(clients)
	for i := range out {
		out[i].ThinkTime = drawn[i]
	}
	return out
}

// Validate checks the plan's schedule against its spec's nodes.
func (p Plan) Validate() error {
	if err := p.Spec.Validate(); err != nil {
		return err
	}
	if err := p.Schedule.ValidateFor(p.Spec.Cluster()); err != nil {
		return fmt.Errorf("scenario %q (design %s): %w", p.Spec.Name, p.Spec.Design, err)
	}
	return nil
}

// Installed returns the schedule as the run installs it: the plan's
// schedule with every fixed role (@replica:N, @store, @client:NAME) bound to
// the node it names in the spec's design (nemesis.Schedule.Bind). @leader
// and @crashed stay: they resolve when their fault fires. Its operations
// name nodes exactly as a schedule written with node names would, so the
// trace, its hash, the lease excuses and the report are the same whichever
// way the spec was written; the plan itself keeps the roles as written, so
// that a replay file holds the schedule its author wrote. A plan that does
// not validate gets its schedule back unbound.
func (p Plan) Installed() nemesis.Schedule {
	bound, err := p.Schedule.Bind(p.Spec.Cluster())
	if err != nil {
		return p.Schedule
	}
	return bound
}

// End is the true time the run stops: the safety phase, then the liveness
// bound if the spec has one.
func (p Plan) End() time.Duration {
	end := time.Duration(p.Spec.Duration)
	if p.Spec.Liveness != nil {
		end += time.Duration(p.Spec.Liveness.Bound)
	}
	return end
}

// Crash is what a panic inside a run (the service, a client, the harness
// or the checker) left for the seed's verdict. All but Stack is a function
// of the seed: Stack depends on the build and the machine, so it is shown
// and saved but never compared.
type Crash struct {
	// Value is the panic value, printed.
	Value string `json:"value"`
	// Step and At are the step and true time of the event that panicked,
	// or where the simulation stood when a panic outside it happened.
	Step uint64        `json:"step"`
	At   time.Duration `json:"at"`
	// Node is the node whose process was running ("action NAME" for a
	// harness action), or "" when the panic came from outside the
	// simulation (building the run, or checking it).
	Node  string `json:"node,omitempty"`
	Stack string `json:"stack"`
}

// String says where the run panicked and with what, without the stack.
func (c *Crash) String() string {
	where := "outside the simulation (building or checking the run)"
	if c.Node != "" {
		where = "in " + c.Node
	}
	return fmt.Sprintf("panic at step %d, t=%v, %s: %s", c.Step, c.At, where, c.Value)
}
