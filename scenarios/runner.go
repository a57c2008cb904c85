package scenarios

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

// RunOptions are the knobs of one run that are not part of the scenario.
type RunOptions struct {
	// Trace, if set, receives the readable trace: one line per event and
	// every process log record.
	Trace io.Writer
	// CheckTimeout bounds porcupine; 0 means the checker's default.
	CheckTimeout time.Duration
}

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
	// the spec's scripted faults, the swarm's, and the final heal.
	Schedule nemesis.Schedule
}

// swarmStream seeds the draws of fault options and schedules. It is apart
// from the World's streams, so a plan's schedule can be replaced (replay,
// shrink) without shifting any other draw of the run.
func swarmStream(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x53574152_4D000000))
}

// cluster names spec's nodes for the nemesis.
func (s *Spec) cluster() nemesis.Cluster {
	c := nemesis.Cluster{Servers: s.serverNames(), Store: []string{storeNode},
		LeaderSelector: s.Design == designReplicated}
	for _, cl := range s.Clients {
		c.Clients = append(c.Clients, cl.Name)
		c.TTL = max(c.TTL, time.Duration(cl.TTL))
		c.DriftBoundPPM = max(c.DriftBoundPPM, cl.DriftBoundPPM)
	}
	return c
}

// NewPlan validates spec and draws the run's fault plan from seed.
func NewPlan(spec Spec, seed uint64) (Plan, error) {
	if err := spec.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Spec: spec, Seed: seed, Schedule: slices.Clone(spec.Faults)}
	if spec.Swarm {
		c := spec.cluster()
		r := swarmStream(seed)
		o := nemesis.DrawOptions(r, c)
		p.Options = &o
		p.Schedule = append(p.Schedule, nemesis.Generate(r, o, c, time.Duration(spec.Duration))...)
	}
	if spec.Liveness != nil {
		p.Schedule = p.Schedule.HealAll(time.Duration(spec.Duration), spec.cluster())
	}
	p.Schedule = p.Schedule.Sorted()
	return p, p.Validate()
}

// Validate checks the plan's schedule against its spec's nodes.
func (p Plan) Validate() error {
	if err := p.Spec.Validate(); err != nil {
		return err
	}
	if err := p.Schedule.Validate(p.Spec.cluster().Names()); err != nil {
		return fmt.Errorf("scenario %q: %w", p.Spec.Name, err)
	}
	return nil
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

// Result is what one run of a scenario produced.
type Result struct {
	Scenario  string
	Seed      uint64
	Verdict   checker.Verdict
	TraceHash uint64
	Events    uint64        // events fired
	SimTime   time.Duration // true time simulated
	Wall      time.Duration // machine time, checker included
	CheckWall time.Duration // of which the checker
	Outcome   sim.Outcome   // why the loop stopped
	History   checker.History
	Stats     sim.Stats
	Plan      Plan
	Nodes     []string // node names in id order
}

// Met reports whether the run meets its scenario's expectation.
func (r Result) Met(s Spec) bool { return s.Expect.Met(r.Verdict) }

// Run draws spec's plan from seed, simulates it and checks the result.
func Run(spec Spec, seed uint64, opt RunOptions) (Result, error) {
	p, err := NewPlan(spec, seed)
	if err != nil {
		return Result{}, err
	}
	return p.Run(opt)
}

// Run simulates the plan and checks the result: safety over the whole run,
// and liveness after the final heal if the spec asks for it.
func (p Plan) Run(opt RunOptions) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	spec := p.Spec
	wallStart := time.Now()
	w, err := sim.New(sim.Config{Seed: p.Seed, Trace: opt.Trace, Network: sim.NetworkConfig{
		Latency: sim.Latency{Shape: sim.Exponential, Min: time.Duration(spec.LatencyMin),
			Mean: time.Duration(spec.LatencyMean), Max: time.Duration(spec.LatencyMax)},
	}})
	if err != nil {
		return Result{}, fmt.Errorf("scenario %q: %w", spec.Name, err)
	}
	ids := map[string]sim.NodeID{}
	rec := newRecorder(w, ids, spec.Design == designSingleNode)
	add := func(name string, p func() sim.Process) error {
		id, err := w.AddNode(name, func() sim.Process {
			rec.NodeStarted(name) // the boot, then every restart
			return p()
		}, fakeclock.Config{})
		ids[name] = id
		return err
	}
	limits := lockservice.DefaultLimits()
	mutant := lockservice.Mutant(spec.Mutant)
	servers := spec.serverNames()
	var serverIDs []sim.NodeID
	for i := range servers {
		// Ids are dense and handed out in order: the servers come first.
		serverIDs = append(serverIDs, sim.NodeID(i))
	}
	for _, name := range servers {
		var p func() sim.Process
		if spec.Design == designSingleNode {
			p = func() sim.Process {
				return lockservice.NewServer(lockservice.ServerConfig{Limits: limits, Observer: rec, Mutant: mutant})
			}
		} else {
			cfg := lockservice.DefaultReplicaConfig(serverIDs)
			cfg.Limits, cfg.Observer, cfg.Mutant = limits, rec, mutant
			if spec.IngressDepth > 0 {
				cfg.IngressDepth = spec.IngressDepth
			}
			p = func() sim.Process { return lockservice.NewReplica(cfg) }
		}
		if err := add(name, p); err != nil {
			return Result{}, err
		}
	}
	if err := add(storeNode, func() sim.Process {
		return lockservice.NewFencedStore(lockservice.StoreConfig{Limits: limits, IgnoreTokens: spec.Store.IgnoreTokens, Observer: rec, Mutant: mutant})
	}); err != nil {
		return Result{}, err
	}
	for _, c := range spec.Clients {
		cfg := lockservice.DefaultClientConfig(c.Name, serverIDs, ids[storeNode], c.Resource)
		cfg.TTL, cfg.StartDelay, cfg.WorkDuration = time.Duration(c.TTL), time.Duration(c.StartDelay), time.Duration(c.WorkDuration)
		cfg.Cycles, cfg.WritesPerHold, cfg.DriftBoundPPM = c.Cycles, c.WritesPerHold, c.DriftBoundPPM
		cfg.Observer, cfg.Mutant = rec, mutant
		if err := add(c.Name, func() sim.Process { return lockservice.NewClient(cfg) }); err != nil {
			return Result{}, err
		}
	}
	p.Schedule.Install(w, func(name string) (sim.NodeID, bool) {
		if name == nemesis.Leader {
			return leader(w, serverIDs)
		}
		id, ok := ids[name]
		return id, ok
	})

	outcome := w.Run(p.End(), spec.StepLimit)
	h := rec.history()
	res := Result{
		Scenario: spec.Name, Seed: p.Seed, TraceHash: w.Hash(), Events: w.Step(), SimTime: w.Now(),
		Outcome: outcome, History: h, Stats: w.Stats(), Plan: p,
	}
	for i := range w.Nodes() {
		res.Nodes = append(res.Nodes, w.Name(sim.NodeID(i)))
	}
	checkStart := time.Now()
	if outcome == sim.StepLimit {
		res.Verdict = checker.Verdict{Kind: checker.VerdictUnknown, Unknown: fmt.Sprintf("the step limit of %d events ran out at %v", spec.StepLimit, w.Now())}
		res.Verdict.Metrics.BeliefOverlap = checker.BeliefOverlap(h)
	} else {
		res.Verdict = checker.Check(h, checker.Options{Timeout: opt.CheckTimeout})
		if spec.Liveness != nil {
			var live []string
			for _, c := range spec.Clients {
				if w.State(ids[c.Name]) != sim.Crashed {
					live = append(live, c.Name)
				}
			}
			res.Verdict = checker.Combine(res.Verdict, checker.CheckLiveness(h, time.Duration(spec.Duration), time.Duration(spec.Liveness.Bound), live))
		}
	}
	res.CheckWall = time.Since(checkStart)
	res.Wall = time.Since(wallStart)
	return res, nil
}

// leader finds the replica that leads now: of those that believe they
// lead, the one with the highest term.
func leader(w *sim.World, replicas []sim.NodeID) (sim.NodeID, bool) {
	best, bestTerm, found := sim.NodeID(0), uint64(0), false
	for _, id := range replicas {
		r, ok := w.Process(id).(*lockservice.Replica)
		if !ok {
			continue
		}
		if lead, term := r.IsLeader(); lead && (!found || term > bestTerm) {
			best, bestTerm, found = id, term, true
		}
	}
	return best, found
}
