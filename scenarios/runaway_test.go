package scenarios

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// runawayDesign is the reference design with a planted runaway: from
// runawayFrom on, replica n1 livelocks in one of the ways a service grows
// without end, or panics.
type runawayDesign struct {
	lockservice.Design
	how string
}

// runawayFrom is when the runaway starts: after the Kleppmann scenarios'
// stale write (3.65 s), so whatever those runs decided is in the history
// by then.
const runawayFrom = 4 * time.Second

// The runaways.
const (
	// runawayFork: every storm message n1 receives it sends twice.
	runawayFork = "fork"
	// runawayLog: n1 appends a kilobyte to its log every microsecond.
	runawayLog = "log"
	// runawayReports: n1 reports a rejected store write every microsecond,
	// as a store flooded by a client retrying without end would.
	runawayReports = "reports"
	// runawayPanic: n1 panics at a time drawn from its random stream:
	// within the run for some seeds, after it for others.
	runawayPanic = "panic"
	// runawayCalls: every microsecond a client "ghost" calls n1 with a new
	// request, an acquire or a write of resource r in turn, and n1 never
	// answers: a client retrying without end against a livelocked
	// service, every attempt a call never answered.
	runawayCalls = "calls"
)

var registerRunaways = sync.OnceValue(func() error {
	base, _ := Lookup("kleppmann-gc-pause")
	for _, how := range []string{runawayFork, runawayLog, runawayReports, runawayPanic, runawayCalls} {
		if err := RegisterDesign(runawayDesign{Design: designOf(base), how: how}); err != nil {
			return err
		}
	}
	return nil
})

// runawaySpec is a built-in scenario run on the runaway design how.
func runawaySpec(t testing.TB, scenario, how string) Spec {
	t.Helper()
	if err := registerRunaways(); err != nil {
		t.Fatal(err)
	}
	s, ok := Lookup(scenario)
	if !ok {
		t.Fatalf("no scenario %q", scenario)
	}
	s.Design = "runaway-" + how
	return s
}

func (d runawayDesign) Info() lockservice.DesignInfo {
	i := d.Design.Info()
	i.Name, i.Description = "runaway-"+d.how, "the reference with replica n1 running away ("+d.how+")"
	return i
}

func (d runawayDesign) NewServer(i int, run lockservice.DesignRun) sim.Process {
	p := d.Design.NewServer(i, run)
	if i != 0 {
		return p
	}
	return &runaway{Process: p, how: d.how, obs: run.Observer}
}

// runaway wraps a replica's process.
type runaway struct {
	sim.Process
	how string
	obs lockservice.Observer
	env sim.Env
	n   uint64
}

// stormMsg is what the fork runaway sends itself.
type stormMsg struct{ n uint64 }

func (m stormMsg) Fingerprint() uint64 { return m.n }

func (r *runaway) Start(env sim.Env) {
	r.Process.Start(env)
	r.env = env
	at := runawayFrom
	if r.how == runawayPanic {
		at = time.Duration(env.Rand().IntN(20)) * time.Second // past the run's 10 s for half the seeds
	}
	env.Clock().AfterFunc(max(at-env.Clock().Monotonic(), 0), r.tick)
}

func (r *runaway) tick() {
	r.n++
	switch r.how {
	case runawayFork:
		r.env.Send(r.env.ID(), stormMsg{r.n})
		return
	case runawayLog:
		r.env.Disk().Append("runaway", make([]byte, 1000))
	case runawayReports:
		r.obs.Observe(lockservice.Event{Kind: lockservice.EvApplied, Client: "ghost", Resource: "r", Value: int64(r.n)})
	case runawayPanic:
		panic("runaway: n1 panicked on purpose")
	case runawayCalls:
		call := lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpAcquire, Client: "ghost", Resource: "r", Request: r.n}
		if r.n%2 == 0 {
			call.Op, call.Token, call.Value = lockservice.OpWrite, r.n, int64(r.n)
		}
		r.obs.Observe(call)
	}
	r.env.Clock().AfterFunc(time.Microsecond, r.tick)
}

func (r *runaway) Receive(env sim.Env, from sim.NodeID, msg sim.Message) {
	if m, ok := msg.(stormMsg); ok {
		env.Send(env.ID(), stormMsg{2 * m.n})
		env.Send(env.ID(), stormMsg{2*m.n + 1})
		return
	}
	r.Process.Receive(env, from, msg)
}

// TestCutRunsAreChecked: a run cut short, by its step limit or by one of
// its limits, is checked up to the cut. The canary's violation (at step
// 1073) stands; the reference's pass becomes unknown, saying what
// ran out and that nothing before it was violated.
func TestCutRunsAreChecked(t *testing.T) {
	small := &RunLimits{Pending: 5000, DiskBytes: 1 << 20, Reports: 20_000}
	tests := []struct {
		name, scenario, how string
		steps               uint64
		wantKind            checker.VerdictKind
		wantProperty        string
		wantCut             string
	}{
		{"step limit after the violation", "unfenced-gc-pause", "", 2000, checker.VerdictViolation, "S3", "the step limit of 2000 events ran out"},
		{"step limit, no violation", "kleppmann-gc-pause", "", 2000, checker.VerdictUnknown, "", "the step limit of 2000 events ran out"},
		{"pending events after the violation", "unfenced-gc-pause", runawayFork, 0, checker.VerdictViolation, "S3", "the limit of 5000 pending events was reached"},
		{"pending events, no violation", "kleppmann-gc-pause", runawayFork, 0, checker.VerdictUnknown, "", "the limit of 5000 pending events was reached"},
		{"disk bytes", "kleppmann-gc-pause", runawayLog, 0, checker.VerdictUnknown, "", "the limit of 1048576 disk bytes of node n1 was reached"},
		{"reports after the violation", "unfenced-gc-pause", runawayReports, 0, checker.VerdictViolation, "S3", "the limit of 20000 events reported to the recorder was reached"},
		{"reports, no violation", "kleppmann-gc-pause", runawayReports, 0, checker.VerdictUnknown, "", "the limit of 20000 events reported to the recorder was reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, _ := Lookup(tt.scenario)
			if tt.how != "" {
				spec = runawaySpec(t, tt.scenario, tt.how)
				spec.Limits = small
			}
			if tt.steps > 0 {
				spec.StepLimit = tt.steps
			}
			res, err := Run(spec, 1, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v := res.Verdict
			if v.Kind != tt.wantKind || v.Property() != tt.wantProperty {
				t.Fatalf("verdict %v %s (%s), want %v %s", v.Kind, v.Property(), v.Unknown, tt.wantKind, tt.wantProperty)
			}
			if !strings.Contains(res.Cut, tt.wantCut) {
				t.Errorf("Cut = %q, want it to say %q", res.Cut, tt.wantCut)
			}
			if tt.wantKind == checker.VerdictUnknown && !strings.Contains(v.Unknown, tt.wantCut) ||
				tt.wantKind == checker.VerdictUnknown && !strings.Contains(v.Unknown, "nothing before it violated a safety property") {
				t.Errorf("Unknown = %q, want the limit and that nothing before it was violated", v.Unknown)
			}
			if v.Liveness != nil {
				t.Errorf("a cut run's liveness was judged: %+v", v.Liveness)
			}
		})
	}
}

// TestPanicIsOneSeedsCrash: a sweep over a build that panics on some seeds
// runs every seed; each panicking seed's verdict is crash, naming the
// step, the node and the virtual time, the same on every run of the seed;
// the other seeds pass.
func TestPanicIsOneSeedsCrash(t *testing.T) {
	spec := runawaySpec(t, "kleppmann-gc-pause", runawayPanic)
	jobs := JobSet{Specs: []Spec{spec}, Lo: 1, Hi: 8, Shard: 1, Shards: 1}
	var got []JobResult
	Sweep(context.Background(), jobs.All(), SweepOptions{Workers: 2}, func(r JobResult) { got = append(got, r) })
	if uint64(len(got)) != jobs.Len() {
		t.Fatalf("the sweep emitted %d of %d seeds", len(got), jobs.Len())
	}
	var crashes, passes int
	for _, r := range got {
		res := r.Result
		switch {
		case r.Err != nil:
			t.Errorf("seed %d: error %v, want a verdict", r.Job.Seed, r.Err)
		case res.Verdict.Kind == checker.VerdictPass:
			passes++
		case res.Verdict.Kind == checker.VerdictCrash:
			crashes++
			c := res.Crash
			if c == nil || c.Node != "n1" || !strings.Contains(c.Value, "on purpose") || c.Step == 0 || c.Step != res.Events ||
				!strings.Contains(c.Stack, "runaway") {
				t.Errorf("seed %d: crash %+v, want n1's panic at the run's last step with its stack", r.Job.Seed, c)
				continue
			}
			again, err := Run(spec, r.Job.Seed, RunOptions{})
			if err != nil || again.Crash == nil || again.Crash.String() != c.String() || again.TraceHash != res.TraceHash {
				t.Errorf("seed %d crashed as %v (hash %016x), then as %v (hash %016x)", r.Job.Seed, c, res.TraceHash, again.Crash, again.TraceHash)
			}
			want := fmt.Sprintf("panic at step %d, t=%v, in n1: runaway: n1 panicked on purpose", c.Step, c.At)
			if c.String() != want {
				t.Errorf("crash says %q, want %q", c, want)
			}
		default:
			t.Errorf("seed %d: verdict %v, want pass or crash", r.Job.Seed, res.Verdict.Kind)
		}
	}
	if crashes == 0 || passes == 0 {
		t.Errorf("%d crashes and %d passes: the seeds should give both", crashes, passes)
	}
}

// TestCrashOutsideTheSimulation: a panic outside sim.Run (building the run
// or checking it) is a crash too, said to be outside the simulation, with
// the stack of the panic.
func TestCrashOutsideTheSimulation(t *testing.T) {
	c := func() (c *Crash) {
		defer func() { c = newCrash(recover(), 12, time.Second) }()
		panic("checker: broken")
	}()
	want := "panic at step 12, t=1s, outside the simulation (building or checking the run): checker: broken"
	if c.String() != want || !strings.Contains(c.Stack, "TestCrashOutsideTheSimulation") {
		t.Errorf("crash %q with stack\n%s\nwant %q and the test in the stack", c, c.Stack, want)
	}
}

// TestCrashInTheCheck: a panic in a linearizability search, which runs
// in a goroutine of its own, is the run's crash verdict, with the
// search's stack, not the end of the process.
func TestCrashInTheCheck(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	p, err := NewPlan(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunPlan(p, RunOptions{searchHook: func(string) { panic("search: broken") }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Kind != checker.VerdictCrash || res.Crash == nil || res.Crash.Value != "search: broken" || !strings.Contains(res.Crash.Stack, "TestCrashInTheCheck.func") {
		t.Fatalf("verdict %v, crash %+v, want crash \"search: broken\" with the hook in its stack", res.Verdict.Kind, res.Crash)
	}
}

// TestDefaultLimitsBoundARunaway: under the default limits and a step
// limit as generous as the swarm's, each runaway stops at its limit, early
// and with little memory. Without the limits the fork runaway held 2.2 GB
// and the reports runaway 3.8 GB by 5 million steps (two runs at once),
// and the log runaway ran out of 16 GB.
func TestDefaultLimitsBoundARunaway(t *testing.T) {
	tests := []struct{ how, limit string }{
		{runawayFork, "262144 pending events"},
		{runawayLog, "16777216 disk bytes of node n1"},
		{runawayReports, "500000 events reported to the recorder"},
	}
	for _, tt := range tests {
		t.Run(tt.how, func(t *testing.T) {
			spec := runawaySpec(t, "kleppmann-gc-pause", tt.how)
			spec.StepLimit = 20_000_000
			res, err := Run(spec, 1, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != sim.Exhausted || !strings.Contains(res.Cut, "the limit of "+tt.limit) {
				t.Fatalf("outcome %v, cut %q; want the limit of %s", res.Outcome, res.Cut, tt.limit)
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapSys > 1<<30 {
				t.Errorf("the heap reached %d MB, want under 1 GB", m.HeapSys>>20)
			}
		})
	}
}

// TestDefaultReportsScaleWithTheSpec: the default bound on reports is
// ReportsPerClientSecond per client-second of a spec (its safety and
// liveness phases), never below DefaultReports, and a spec's own bound
// stands. Forty clients over 300 s reported up to ~700,000 events when
// healthy, and a fixed 500,000 cut them.
func TestDefaultReportsScaleWithTheSpec(t *testing.T) {
	small, ok := Lookup("kleppmann-gc-pause")
	if !ok {
		t.Fatal("no kleppmann-gc-pause")
	}
	if _, got := limitsOf(small); got != DefaultReports {
		t.Errorf("kleppmann-gc-pause: %d, want the floor %d", got, DefaultReports)
	}
	std := StandardSpec() // 10 clients, 50 s + 10 s of liveness
	if _, got := limitsOf(std); got != 600_000 {
		t.Errorf("the standard run: %d, want 600,000", got)
	}
	big := StandardSpec()
	big.Duration = Duration(290 * time.Second)
	for len(big.Clients) < 40 {
		c := big.Clients[len(big.Clients)%10]
		c.Name = fmt.Sprintf("x%d", len(big.Clients))
		big.Clients = append(big.Clients, c)
	}
	if _, got := limitsOf(big); got != 12_000_000 {
		t.Errorf("40 clients × 300 s: %d, want 12,000,000", got)
	}
	big.Limits = &RunLimits{Reports: 1234}
	if _, got := limitsOf(big); got != 1234 {
		t.Errorf("a spec's own bound: %d, want 1234", got)
	}
}

// TestUnansweredCallsAreCheckedCheaply: a client retrying without end
// against a livelocked service stops at the default limit on reports,
// with a quarter of a million calls never answered on each of S7's and
// S8's partitions, and the history up to the cut is decided within a
// budget of 100,000 model steps and 1 MB of search memory a partition,
// a fraction of a step an op (the defaults are 20 M and 128 MB). The
// quick search took 84 s and 1.8 GB on 5,000 such acquires.
func TestUnansweredCallsAreCheckedCheaply(t *testing.T) {
	spec := runawaySpec(t, "kleppmann-gc-pause", runawayCalls)
	res, err := Run(spec, 1, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != sim.Exhausted || !strings.Contains(res.Cut, "the limit of 500000 events reported to the recorder") {
		t.Fatalf("outcome %v, cut %q; want the limit on reports", res.Outcome, res.Cut)
	}
	v := res.Verdict
	if v.Kind != checker.VerdictUnknown || !strings.Contains(v.Unknown, "nothing before it violated a safety property") {
		t.Fatalf("verdict %v (%s), want unknown for the cut only", v.Kind, v.Unknown)
	}
	var acquires, writes int
	for _, op := range res.History.LockOps {
		if op.Client == "ghost" && op.Outcome == checker.LockUnknown {
			acquires++
		}
	}
	for _, op := range res.History.Ops {
		if op.Client == "ghost" && op.Outcome == checker.OutcomeUnknown {
			writes++
		}
	}
	if acquires < 200_000 || writes < 200_000 {
		t.Fatalf("%d acquires and %d writes never answered, want a quarter of a million each", acquires, writes)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	small := checker.Options{Steps: 100_000, SearchBytes: 1 << 20}
	if v := checker.Check(res.History, small); v.Kind != checker.VerdictPass {
		t.Errorf("checked within %+v: verdict %v (%s), want pass", small, v.Kind, v.Unknown)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 600<<20 {
		t.Errorf("the check allocated %d MB, want under 600 MB (it takes about 185)", alloc>>20)
	}
	t.Logf("alloc %d MB", (after.TotalAlloc-before.TotalAlloc)>>20)
}

// TestLivelockSweepIsBounded: a two-worker sweep over the livelocking
// build gives every seed its verdict, cut at the limit on reports, and
// the heap stays under 1 GB (the process's peak RSS is 760 MB). Before
// the checker's fix the sweep's first two runs did not finish in two
// minutes, by when the process held 22 GB.
func TestLivelockSweepIsBounded(t *testing.T) {
	spec := runawaySpec(t, "kleppmann-gc-pause", runawayCalls)
	jobs := JobSet{Specs: []Spec{spec}, Lo: 1, Hi: 4, Shard: 1, Shards: 1}
	n := 0
	Sweep(context.Background(), jobs.All(), SweepOptions{Workers: 2}, func(r JobResult) {
		n++
		if r.Err != nil || r.Result.Verdict.Kind != checker.VerdictUnknown || !strings.Contains(r.Result.Cut, "events reported to the recorder") {
			t.Errorf("seed %d: error %v, verdict %v, cut %q; want unknown at the limit on reports", r.Job.Seed, r.Err, r.Result.Verdict.Kind, r.Result.Cut)
		}
	})
	if uint64(n) != jobs.Len() {
		t.Errorf("the sweep gave %d of %d verdicts", n, jobs.Len())
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapSys > 1<<30 {
		t.Errorf("the heap reached %d MB, want under 1 GB", m.HeapSys>>20)
	}
}
