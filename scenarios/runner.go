package scenarios

import (
	"fmt"
	"io"
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

// Result is what one run of a scenario produced.
type Result struct {
	Scenario  string
	Seed      uint64
	Verdict   checker.Verdict
	TraceHash uint64
	Events    uint64        // events fired
	SimTime   time.Duration // true time simulated
	Wall      time.Duration // machine time, checker included
	Outcome   sim.Outcome   // why the loop stopped
	History   checker.History
	Stats     sim.Stats
}

// Met reports whether the run meets its scenario's expectation.
func (r Result) Met(s Spec) bool { return s.Expect.Met(r.Verdict) }

// Run simulates spec with seed and checks the result. The spec must be
// valid (Parse and Builtin guarantee it); an invalid one is an error.
func Run(spec Spec, seed uint64, opt RunOptions) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	wallStart := time.Now()
	w, err := sim.New(sim.Config{Seed: seed, Trace: opt.Trace, Network: sim.NetworkConfig{
		Latency: sim.Latency{Shape: sim.Exponential, Min: time.Duration(spec.LatencyMin),
			Mean: time.Duration(spec.LatencyMean), Max: time.Duration(spec.LatencyMax)},
	}})
	if err != nil {
		return Result{}, fmt.Errorf("scenario %q: %w", spec.Name, err)
	}
	rec := newRecorder(w)
	ids := map[string]sim.NodeID{}
	add := func(name string, p func() sim.Process) error {
		id, err := w.AddNode(name, func() sim.Process {
			rec.NodeStarted(name) // the boot, then every restart
			return p()
		}, fakeclock.Config{})
		ids[name] = id
		return err
	}
	limits := lockservice.DefaultLimits()
	servers := spec.serverNames()
	var serverIDs []sim.NodeID
	for i, name := range servers {
		// Ids are dense and handed out in order: the servers come first.
		serverIDs = append(serverIDs, sim.NodeID(i))
		_ = name
	}
	for _, name := range servers {
		var p func() sim.Process
		if spec.Design == designSingleNode {
			p = func() sim.Process {
				return lockservice.NewServer(lockservice.ServerConfig{Limits: limits, Observer: rec})
			}
		} else {
			cfg := lockservice.DefaultReplicaConfig(serverIDs)
			cfg.Limits, cfg.Observer = limits, rec
			p = func() sim.Process { return lockservice.NewReplica(cfg) }
		}
		if err := add(name, p); err != nil {
			return Result{}, err
		}
	}
	if err := add(storeNode, func() sim.Process {
		return lockservice.NewFencedStore(lockservice.StoreConfig{Limits: limits, IgnoreTokens: spec.Store.IgnoreTokens, Observer: rec})
	}); err != nil {
		return Result{}, err
	}
	for _, c := range spec.Clients {
		cfg := lockservice.DefaultClientConfig(c.Name, serverIDs, ids[storeNode], c.Resource)
		cfg.TTL, cfg.StartDelay, cfg.WorkDuration = time.Duration(c.TTL), time.Duration(c.StartDelay), time.Duration(c.WorkDuration)
		cfg.Cycles, cfg.WritesPerHold, cfg.DriftBoundPPM = c.Cycles, c.WritesPerHold, c.DriftBoundPPM
		cfg.Observer = rec
		if err := add(c.Name, func() sim.Process { return lockservice.NewClient(cfg) }); err != nil {
			return Result{}, err
		}
	}
	spec.Faults.Install(w, func(name string) (sim.NodeID, bool) {
		if name == nemesis.Leader {
			return leader(w, serverIDs)
		}
		id, ok := ids[name]
		return id, ok
	})

	outcome := w.Run(time.Duration(spec.Duration), spec.StepLimit)
	h := rec.history()
	res := Result{
		Scenario: spec.Name, Seed: seed, TraceHash: w.Hash(), Events: w.Step(), SimTime: w.Now(),
		Outcome: outcome, History: h, Stats: w.Stats(),
	}
	if outcome == sim.StepLimit {
		res.Verdict = checker.Verdict{Kind: checker.VerdictUnknown, Unknown: fmt.Sprintf("the step limit of %d events ran out at %v", spec.StepLimit, w.Now())}
	} else {
		res.Verdict = checker.Check(h, checker.Options{Timeout: opt.CheckTimeout})
	}
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
