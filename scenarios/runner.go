package scenarios

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/coverage/branches"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/nemesis/inject"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// RunOptions are the knobs of one run that are not part of the scenario.
type RunOptions struct {
	// Trace, if set, receives the readable trace: one line per event and
	// every process log record.
	Trace io.Writer
	// CheckSteps is the checker's budget of model steps per
	// linearizability search (checker.Options.Steps); 0 means the
	// checker's default. It counts steps, not time, so that a verdict is a
	// function of the seed.
	CheckSteps int64
	// Stop, if set, is asked every few thousand events and before the
	// check whether to abandon the run: a sweep whose budget ran out or
	// that SIGINT stopped. Plan.Run then returns ErrStopped.
	Stop func() bool
	// Branches reads Go's coverage counters of the protocol code after the
	// loop into Result.Branches (package coverage/branches): only in a
	// binary built with -cover -covermode=atomic (branches.Available), and
	// it runs the simulations of concurrent runs one at a time.
	Branches bool
	// searchHook is checker.Options.SearchHook, for tests of a panic in
	// the check.
	searchHook func(resource string)
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
	Picks     []Pick   // what each fault's selector (@leader) resolved to, in firing order
	// Fired are the schedule's triggers that fired, as the faults they
	// became (inject.Watch.Fired).
	Fired nemesis.Schedule
	// Cut says why the run stopped before its end, if it did: the step
	// limit or one of its Limits ran out. The history up to the cut was
	// checked (safety only): a violation there stands, anything else is
	// unknown.
	Cut string
	// Crash is the panic that ended the run when the verdict is crash.
	Crash *Crash
	// Marks are the protocol corners the run reached (package coverage),
	// counted by the service, the clients and the nemesis.
	Marks *coverage.Counts
	// Branches are the basic blocks of the covered code the run executed,
	// with their hit-count buckets, sorted (RunOptions.Branches; nil
	// without it).
	Branches []branches.Feature
}

// newCrash turns a recovered panic value into a Crash: a *sim.Panic
// carries where in the simulation it happened, a *checker.Panic the stack
// of the checker's goroutine it happened in; anything else happened
// outside it, after step of the run at true time at.
func newCrash(r any, step uint64, at time.Duration) *Crash {
	if p, ok := r.(*sim.Panic); ok {
		return &Crash{Value: fmt.Sprint(p.Value), Step: p.Step, At: p.At, Node: p.Node, Stack: string(p.Stack)}
	}
	if p, ok := r.(*checker.Panic); ok { // raised in a search goroutine
		return &Crash{Value: fmt.Sprint(p.Value), Step: step, At: at, Stack: string(p.Stack)}
	}
	return &Crash{Value: fmt.Sprint(r), Step: step, At: at, Stack: string(debug.Stack())}
}

// DefaultReports is the least of RunLimits.Reports' default. simrun
// bench's standard run reports at most 62,448 events over its 60 simulated
// seconds (seeds 1..5), so this is eight times as many; the history it
// bounds stays under about 150 MB.
const DefaultReports = 500_000

// ReportsPerClientSecond scales RunLimits.Reports' default with a spec's
// size: its clients times its simulated seconds (safety and liveness
// phases), this many reports each. The standard run reports about 104 per
// client-second, so a healthy run of any shape stays near a tenth of its
// bound, while a fixed bound cut healthy large runs: 12 of 60 runs with 20
// and 40 clients over 300 s stopped at 500,000 reports.
const ReportsPerClientSecond = 1_000

// defaultReports is RunLimits.Reports' default for s: DefaultReports, or
// ReportsPerClientSecond per client-second of s if that is more.
func defaultReports(s Spec) int {
	simulated := time.Duration(s.Duration)
	if s.Liveness != nil {
		simulated += time.Duration(s.Liveness.Bound)
	}
	clientSeconds := int64(len(s.Clients)) * int64((simulated+time.Second-1)/time.Second)
	return int(max(DefaultReports, min(clientSeconds*ReportsPerClientSecond, math.MaxInt32)))
}

// limitsOf returns the spec's run limits with the defaults filled in.
func limitsOf(s Spec) (sim.Limits, int) {
	var l RunLimits
	if s.Limits != nil {
		l = *s.Limits
	}
	if l.Reports <= 0 {
		l.Reports = defaultReports(s)
	}
	return sim.Limits{Pending: l.Pending, DiskBytes: l.DiskBytes, TraceBytes: l.TraceBytes}, l.Reports
}

// boundedObserver passes reports on to the recorder and stops the run once
// there have been max of them.
type boundedObserver struct {
	next lockservice.Observer
	w    *sim.World
	left int
	max  int
}

func (o *boundedObserver) Observe(e lockservice.Event) {
	if o.left == 0 {
		o.w.Exhaust("events reported to the recorder", o.max)
	}
	o.left--
	o.next.Observe(e)
}

// Met reports whether the run meets its scenario's expectation.
func (r Result) Met(s Spec) bool { return s.Expect.Met(r.Verdict) }

// Run draws spec's plan from seed, simulates it and checks the result.
func Run(spec Spec, seed uint64, opt RunOptions) (Result, error) {
	p, err := NewPlan(spec, seed)
	if err != nil {
		return Result{}, err
	}
	return RunPlan(p, opt)
}

// RunPlan simulates the plan and checks the result: safety over the whole run,
// and liveness after the final heal if the spec asks for it. A run cut
// short by its step limit or its Limits is checked for safety up to the
// cut. A panic anywhere in it (the service, a client, the harness, the
// checker) is the verdict crash, with the panic in Result.Crash; it is
// never an error, so a sweep goes on with the next seed.
func RunPlan(p Plan, opt RunOptions) (res Result, err error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	spec := p.Spec
	wall := startStopwatch()
	probe, err := startBranches(opt.Branches)
	if err != nil {
		return Result{}, err
	}
	defer probe.release()
	limits, reports := limitsOf(spec)
	w, err := sim.New(sim.Config{Seed: p.Seed, Trace: opt.Trace, Limits: limits, Network: sim.NetworkConfig{
		Latency: sim.Latency{Shape: sim.Exponential, Min: time.Duration(spec.LatencyMin),
			Mean: time.Duration(spec.LatencyMean), Max: time.Duration(spec.LatencyMax)},
	}})
	if err != nil {
		return Result{}, fmt.Errorf("scenario %q: %w", spec.Name, err)
	}
	ids := map[string]sim.NodeID{}
	design := designOf(spec)
	info := design.Info()
	rec := newRecorder(w, ids, info.SyncedDecisions)
	marks := &coverage.Counts{}
	defer func() {
		if r := recover(); r != nil {
			res, err = crashResult(p, w, rec, newCrash(r, w.Step(), w.Now())), nil
			res.Wall, res.Marks = wall.elapsed(), marks
		}
	}()
	var obs lockservice.Observer = &boundedObserver{next: rec, w: w, left: reports, max: reports}
	var dobs *designObserver
	if info.UnorderedTokens || info.ResourceTokens || info.ClientGrants {
		dobs = newDesignObserver(obs, info, func(name string) bool {
			id, ok := ids[name]
			return ok && w.State(id) == sim.Crashed
		})
		dobs.syncing = rec.syncing
		dobs.crashedAt = func(name string) time.Duration {
			at, _ := w.CrashedAt(ids[name])
			return at
		}
		obs = dobs
	}
	moments := &momentTap{next: obs}
	obs = moments
	add := func(name string, p func() sim.Process) error {
		id, err := w.AddNode(name, func() sim.Process {
			rec.NodeStarted(name) // the boot, then every restart
			if dobs != nil {
				dobs.nodeStarted(name)
			}
			return p()
		}, fakeclock.Config{})
		ids[name] = id
		return err
	}
	servers := spec.ServerNames()
	run := lockservice.DesignRun{Limits: lockservice.DefaultLimits(), Observer: obs,
		Mutant: lockservice.Mutant(spec.Mutant), IngressDepth: spec.IngressDepth, Marks: marks, TokenOffset: spec.TokenOffset,
		SnapshotEntries: spec.SnapshotEntries, SnapshotBytes: spec.SnapshotBytes, GroupCommit: spec.GroupCommit,
		GroupCommitWindow: time.Duration(spec.GroupCommitWindow), AsyncWrites: spec.AsyncWrites}
	if spec.Buggify != nil {
		run.Buggify = *spec.Buggify
	}
	for i := range servers {
		// Ids are dense and handed out in order: the servers come first,
		// then the store.
		run.Servers = append(run.Servers, sim.NodeID(i))
	}
	run.Store = sim.NodeID(len(servers))
	serverIDs := run.Servers
	for i, name := range servers {
		serverRun := run
		if info.SyncedDecisions { // the recorder must know which node's sync a decision waits for
			serverRun.Observer = reporter{node: name, next: obs}
		}
		if err := add(name, func() sim.Process { return design.NewServer(i, serverRun) }); err != nil {
			return Result{}, err
		}
	}
	for _, id := range serverIDs {
		w.SetSyncDelay(id, time.Duration(spec.ServerSyncDelay))
	}
	ignoreTokens := spec.Store.IgnoreTokens || info.UnfencedStore
	if err := add(storeNode, func() sim.Process {
		cfg := fencedstore.StoreConfig{Limits: run.Limits, IgnoreTokens: ignoreTokens, Observer: obs, Marks: marks}
		mutants.InjectStore(run.Mutant, &cfg)
		return fencedstore.NewFencedStore(cfg)
	}); err != nil {
		return Result{}, err
	}
	if ids[storeNode] != run.Store {
		return Result{}, fmt.Errorf("scenario %q: the store got node id %d, want %d", spec.Name, ids[storeNode], run.Store)
	}
	w.SetSyncDelay(run.Store, time.Duration(spec.StoreSyncDelay))
	frontEnds := serverIDs[:len(serverIDs)-info.BackEnds]
	for _, c := range spec.Clients {
		cfg := workload.DefaultConfig(c.Name, frontEnds, run.Store, c.Resource)
		cfg.TTL, cfg.StartDelay, cfg.WorkDuration = time.Duration(c.TTL), time.Duration(c.StartDelay), time.Duration(c.WorkDuration)
		cfg.Cycles, cfg.WritesPerHold, cfg.DriftBoundPPM, cfg.Wait = c.Cycles, c.WritesPerHold, c.DriftBoundPPM, time.Duration(c.Wait)
		if c.ThinkTime > 0 {
			cfg.ThinkTime = time.Duration(c.ThinkTime)
		}
		cfg.Observer, cfg.Marks = obs, marks
		mutants.InjectClient(run.Mutant, &cfg.ClientConfig)
		if err := add(c.Name, func() sim.Process { return workload.New(cfg, design.ClientProtocol(cfg.ClientConfig, run)) }); err != nil {
			return Result{}, err
		}
	}
	var picks []Pick
	cov := &inject.Coverage{Marks: marks, TTL: spec.Cluster().TTL, Servers: serverIDs, Store: run.Store}
	moments.watch = inject.InstallCounting(p.Installed(), w, func(name string) (sim.NodeID, bool) {
		if name == nemesis.Leader {
			id, ok := leader(w, serverIDs)
			picks = append(picks, pickOf(w, name, id, ok))
			return id, ok
		}
		id, ok := ids[name]
		return id, ok
	}, cov)

	outcome, stopped := runWorld(w, p.End(), spec.StepLimit, opt.Stop)
	feats, err := probe.finish()
	if err != nil {
		return Result{}, err
	}
	if stopped || (opt.Stop != nil && opt.Stop()) {
		return Result{}, ErrStopped
	}
	h := rec.history()
	res = Result{
		Scenario: spec.Name, Seed: p.Seed, TraceHash: w.Hash(), Events: w.Step(), SimTime: w.Now(),
		Outcome: outcome, History: h, Stats: w.Stats(), Plan: p, Picks: picks, Marks: marks, Fired: moments.watch.Fired,
		Branches: feats,
	}
	for i := range w.Nodes() {
		res.Nodes = append(res.Nodes, w.Name(sim.NodeID(i)))
	}
	switch outcome {
	case sim.StepLimit:
		res.Cut = fmt.Sprintf("the step limit of %d events ran out at t=%v", spec.StepLimit, w.Now())
	case sim.Exhausted:
		c := w.Cut()
		res.Cut = fmt.Sprintf("the limit of %d %s was reached at step %d, t=%v", c.Max, c.Limit, c.Step, c.At)
	}
	check := startStopwatch()
	var live []string
	for _, c := range spec.Clients {
		if w.State(ids[c.Name]) != sim.Crashed {
			live = append(live, c.Name)
		}
	}
	res.Verdict = judgeRun(p, h, res.Cut, live, res.LeaseExcuses(), opt)
	res.CheckWall = check.elapsed()
	res.Wall = wall.elapsed()
	return res, nil
}

// judgeRun is the checker's part of a run: the safety properties, lease
// safety within the plan's fault model, and, for a run that was not cut
// (cut says why it was), the liveness of the clients still alive.
func judgeRun(p Plan, h checker.History, cut string, live []string, excuses []checker.LeaseExcuse, opt RunOptions) checker.Verdict {
	spec := p.Spec
	// The checks only read the history, and run after the loop: at once.
	var v checker.Verdict
	var liveness *checker.Violation
	var lease []checker.Violation
	checkLiveness := cut == "" && spec.Liveness != nil
	checker.Concurrently(
		func() { v = checker.Check(h, checker.Options{Steps: opt.CheckSteps, SearchHook: opt.searchHook}) },
		// L1, lease safety, holds only inside the lease fault model: the
		// plan and the triggers that fired (Result.LeaseExcuses) know
		// which faults left it, and when.
		func() { lease = checker.CheckLeaseSafety(h, excuses) },
		func() {
			if checkLiveness {
				liveness = checker.CheckLiveness(h, time.Duration(spec.Duration), time.Duration(spec.Liveness.Bound), live)
			}
		},
	)
	v = checker.WithViolations(v, lease)
	if cut != "" {
		return cutVerdict(v, cut)
	}
	if checkLiveness {
		v = checker.Combine(v, liveness)
	}
	if v.Kind == checker.VerdictPass && !slices.ContainsFunc(h.LockOps, func(o checker.LockOp) bool { return o.Outcome == checker.LockGranted }) {
		// Never a pass on nothing (a spec whose clients start after its
		// end, a service that refuses everything without a liveness
		// phase to notice): the verdict changes, the run and its trace
		// hash do not.
		v.Kind, v.Unknown = checker.VerdictUnknown, "no lock was granted in the run: nothing was tested, so it cannot pass"
	}
	return v
}

// cutVerdict judges a run cut short from the safety verdict of its history
// up to the cut: a violation stands; anything else is unknown, since the
// run never reached its end (and liveness is not judged at all).
func cutVerdict(v checker.Verdict, cut string) checker.Verdict {
	if v.Kind == checker.VerdictViolation {
		return v
	}
	why := "the run was cut short: " + cut + "; nothing before it violated a safety property"
	if v.Kind == checker.VerdictUnknown {
		why = "the run was cut short: " + cut + "; before it, " + v.Unknown
	}
	v.Kind, v.Unknown = checker.VerdictUnknown, why
	return v
}

// crashResult is the result of a run that panicked: the verdict crash,
// with the run as far as it got (its trace hash and history at the panic).
func crashResult(p Plan, w *sim.World, rec *recorder, c *Crash) Result {
	res := Result{Scenario: p.Spec.Name, Seed: p.Seed, TraceHash: w.Hash(), Events: w.Step(), SimTime: w.Now(),
		History: rec.history(), Stats: w.Stats(), Plan: p, Crash: c, Verdict: checker.Verdict{Kind: checker.VerdictCrash}}
	for i := range w.Nodes() {
		res.Nodes = append(res.Nodes, w.Name(sim.NodeID(i)))
	}
	return res
}

// leader finds the replica that leads now: of those that believe they
// lead, the one with the highest term.
func leader(w *sim.World, replicas []sim.NodeID) (sim.NodeID, bool) {
	best, bestTerm, found := sim.NodeID(0), uint64(0), false
	for _, id := range replicas {
		r, ok := w.Process(id).(lockservice.Leader)
		if !ok {
			continue
		}
		if lead, term := r.IsLeader(); lead && (!found || term > bestTerm) {
			best, bestTerm, found = id, term, true
		}
	}
	return best, found
}

// momentTap passes every event on to the recorder and tells the schedule's
// triggers of the protocol moments among them (inject.Watch). The moments
// only the nemesis wants (a vote, an append) stop here: the history does
// not grow with them, nor do they count against its limit.
type momentTap struct {
	next  lockservice.Observer
	watch *inject.Watch
	// granted is the highest log index whose grant was noticed: every
	// replica reports the grants it applies, the first report is the
	// service's decision.
	granted uint64
}

// Observe passes e on and notices its moment, if it is one.
func (o *momentTap) Observe(e lockservice.Event) {
	var m nemesis.Moment
	switch e.Kind {
	case lockservice.EvVoted:
		o.watch.Notice(nemesis.Moment{Kind: nemesis.MomentVoted, Subject: e.Node})
		return
	case lockservice.EvAppended:
		o.watch.Notice(nemesis.Moment{Kind: nemesis.MomentAppended, Subject: e.Node})
		return
	case lockservice.EvGranted:
		if e.Index == 0 || e.Index > o.granted {
			o.granted = max(o.granted, e.Index)
			m = nemesis.Moment{Kind: nemesis.MomentGranted, Subject: e.Client}
		}
	case lockservice.EvElected:
		m = nemesis.Moment{Kind: nemesis.MomentElected, Subject: e.Node}
	case lockservice.EvCall:
		switch e.Op {
		case lockservice.OpWrite:
			m = nemesis.Moment{Kind: nemesis.MomentWrite, Subject: e.Client}
		case lockservice.OpRead:
			m = nemesis.Moment{Kind: nemesis.MomentRead, Subject: e.Client}
		}
	case lockservice.EvReturn:
		if e.Status == lockservice.Granted && e.Op == lockservice.OpAcquire {
			m = nemesis.Moment{Kind: nemesis.MomentAcquired, Subject: e.Client}
		} else if e.Status == lockservice.Renewed && e.Op == lockservice.OpRenew {
			m = nemesis.Moment{Kind: nemesis.MomentRenewed, Subject: e.Client}
		}
	}
	o.next.Observe(e)
	if m.Kind != "" {
		o.watch.Notice(m)
	}
}

// reporter stamps the events a service node reports with the node's name,
// for designs whose decisions wait for that node's sync
// (lockservice.DesignInfo.SyncedDecisions).
type reporter struct {
	node string
	next lockservice.Observer
}

// Observe passes e on with its reporting node.
func (o reporter) Observe(e lockservice.Event) {
	e.Node = o.node
	o.next.Observe(e)
}

// rankSpacing spaces the ranks that stand for unordered tokens: the n-th
// grant of a run is recorded with token n·1000. The gaps leave room for
// grants nobody learned of, as the reference's log indexes do: an acquire
// with an unknown outcome may have taken the lock, and the lock model (S7)
// gives such a grant a token above every one before it and below every
// one after it.
const rankSpacing = 1000

// designObserver stands between a design's processes and the recorder for
// designs whose tokens are unordered or whose clients report the grants
// (lockservice.DesignInfo). It renames each unordered token to its grant's
// rank in true-time order (times rankSpacing), so the checker's token
// comparisons (S3, S7, S8) judge grant order. With client-reported grants
// it also ends the open grants of a crashed client — its belief ended at
// the crash, which no process can report — when another grant of the
// resource begins or the client restarts, whichever comes first.
type designObserver struct {
	next lockservice.Observer
	info lockservice.DesignInfo
	rank map[rankKey]uint64 // raw token → rank (1000: the run's first grant)
	// open lists the grants not yet ended, by raw token, in grant order.
	open []lockservice.Event
	// crashed reports whether a node is down now.
	crashed func(name string) bool
	// ranked counts the ranks handed out.
	ranked uint64
	// tentative are the ranks of grants whose node's slow sync was in
	// flight when reported (DesignInfo.SyncedDecisions): a crash before
	// it completes takes the grant back, and a grant of the same token
	// after the restart is a new one. syncing and crashedAt tell.
	tentative []tentativeRank
	syncing   func(node string) (time.Duration, bool)
	crashedAt func(node string) time.Duration
}

// tentativeRank is a rank that node's crash before done takes back.
type tentativeRank struct {
	node string
	done time.Duration
	key  rankKey
}

func newDesignObserver(next lockservice.Observer, info lockservice.DesignInfo, crashed func(string) bool) *designObserver {
	return &designObserver{next: next, info: info, rank: map[rankKey]uint64{}, crashed: crashed}
}

// rankKey names a raw token: by itself, or with its resource for a design
// whose tokens count per resource (DesignInfo.ResourceTokens).
type rankKey struct {
	resource string
	token    uint64
}

// Observe records e, its token renamed.
func (o *designObserver) Observe(e lockservice.Event) {
	if o.info.ClientGrants {
		switch e.Kind {
		case lockservice.EvGranted:
			o.endWhere(func(g lockservice.Event) bool { return g.Resource == e.Resource && o.crashed(g.Client) })
			o.open = append(o.open, e)
		case lockservice.EvEnded:
			o.open = slices.DeleteFunc(o.open, func(g lockservice.Event) bool {
				return g.Token == e.Token && g.Resource == e.Resource && g.Client == e.Client
			})
		}
	}
	if (o.info.UnorderedTokens || o.info.ResourceTokens) && e.Token != 0 {
		k := rankKey{token: e.Token}
		if o.info.ResourceTokens {
			k.resource = e.Resource
		}
		r, ok := o.rank[k]
		if !ok && e.Kind == lockservice.EvGranted {
			o.ranked++
			r, ok = o.ranked*rankSpacing, true
			o.rank[k] = r
			if o.syncing != nil && e.Node != "" {
				if done, slow := o.syncing(e.Node); slow {
					o.tentative = append(o.tentative, tentativeRank{node: e.Node, done: done, key: k})
				}
			}
		}
		if ok {
			e.Token = r
		}
	}
	o.next.Observe(e)
}

// nodeStarted ends the open grants of a restarted client, and forgets the
// ranks of the grants a restarted service node's crash took back.
func (o *designObserver) nodeStarted(name string) {
	if len(o.tentative) > 0 {
		keep := o.tentative[:0]
		for _, t := range o.tentative {
			switch {
			case t.node != name:
				keep = append(keep, t)
			case t.done > o.crashedAt(name):
				delete(o.rank, t.key)
			}
		}
		o.tentative = keep
	}
	o.endWhere(func(g lockservice.Event) bool { return g.Client == name })
}

// endWhere ends the open grants that match, as expired.
func (o *designObserver) endWhere(match func(lockservice.Event) bool) {
	for _, g := range slices.Clone(o.open) {
		if match(g) {
			o.Observe(lockservice.Event{Kind: lockservice.EvEnded, Client: g.Client, Resource: g.Resource, Token: g.Token, Reason: "expired"})
		}
	}
}
