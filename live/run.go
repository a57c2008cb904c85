package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// Options configure one live run.
type Options struct {
	Target Target
	// Plan is the scenario and its seeded schedule, exactly as the
	// simulator would run it (scenario.NewPlan, or a replay file's).
	Plan scenario.Plan
	// Dir is the run's directory (data, logs); "" makes a temporary one,
	// removed after the run unless Keep.
	Dir  string
	Keep bool
	// BinDirs are searched for binaries before $PATH.
	BinDirs []string
	// TargetFaults are scripted faults aimed at the target's own servers
	// (NewPlan), run beside the plan's schedule.
	TargetFaults nemesis.Schedule
	// AllowInapplicable runs a plan whose scripted faults include some
	// the target cannot carry out at all (they are listed as not
	// applicable); without it Run refuses it (ErrInapplicable).
	AllowInapplicable bool
	// TargetOptions are passed to the target (Setup.Options) and to every
	// client process (-opt).
	TargetOptions map[string]string
	// StartTimeout bounds the start of every server (default 30 s);
	// StopGrace the wait after SIGTERM before SIGKILL (default 5 s).
	StartTimeout, StopGrace time.Duration
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// FaultEvent is one fault operation of the schedule as the run carried it
// out: when (on the run's timeline), on which process, or why not.
type FaultEvent struct {
	// Planned is the operation as scheduled (fixed roles bound).
	Planned nemesis.Op `json:"planned"`
	// At is when it was carried out, from the start of the workload.
	At time.Duration `json:"at"`
	// Node is the process it hit ("" for network-wide faults).
	Node string `json:"node,omitempty"`
	// Skipped says why the operation did nothing ("" if applied).
	Skipped string `json:"skipped,omitempty"`
	// Outcome is FaultDone, FaultSkipped or FaultNotApplicable.
	Outcome string `json:"outcome"`
	// ReadyAt, for a restart, is when the process was ready again.
	ReadyAt time.Duration `json:"ready_at,omitempty"`
	// FinalHeal: one of the operations that undo every fault at the end
	// of the safety phase (not counted in FaultCounts).
	FinalHeal bool `json:"final_heal,omitempty"`
}

// Result is what one live run produced.
type Result struct {
	Target   string           `json:"target"`
	Scenario string           `json:"scenario"`
	Seed     uint64           `json:"seed"`
	Expect   string           `json:"expect"`
	Met      bool             `json:"met"`
	Verdict  checker.Verdict  `json:"verdict"`
	Faults   []FaultEvent     `json:"faults"`
	History  checker.History  `json:"-"`
	Wall     time.Duration    `json:"wall"`
	Notes    []string         `json:"notes,omitempty"`
	Dir      string           `json:"dir,omitempty"`
	Options  *nemesis.Options `json:"options,omitempty"`
	Plan     scenario.Plan    `json:"-"`
	Counts   map[string]int   `json:"counts"`
	// FaultCounts sums Faults by outcome; Clients is what each workload
	// client did.
	FaultCounts FaultCounts             `json:"fault_counts"`
	Clients     map[string]ClientCounts `json:"clients"`
	// TargetFaults are the scripted faults aimed at the target's own
	// servers (Options.TargetFaults).
	TargetFaults nemesis.Schedule `json:"target_faults,omitempty"`
	PIDs         []int            `json:"-"`
	// Interrupted: the run's context ended (SIGINT, SIGTERM) before the
	// workload did. The history is checked for safety as far as it goes,
	// but the liveness phase is not judged: a run cut short has not
	// failed to make progress.
	Interrupted bool `json:"interrupted,omitempty"`
}

// run is one live run's state.
type run struct {
	opt    Options
	ctx    context.Context // the caller's: ends when the run is interrupted
	spec   scenario.Spec
	info   TargetInfo
	dir    string
	setup  *Setup
	layout Layout
	links  *linkSet
	logf   func(format string, args ...any)

	store    *proc
	storeURL string // real
	servers  map[string]*proc
	srvSpec  map[string]Server
	replicas []string // the layout's replicas, in order
	clients  map[string]*clientProc

	base    time.Duration // CLOCK_MONOTONIC at the start of the workload
	rec     *recorder
	fs      *faultState
	armed   *nemesis.Armed // the triggers (under mu)
	applies *appliesLog

	// readyWG waits for the ready checks of restarted processes.
	readyWG sync.WaitGroup

	mu     sync.Mutex
	faults []FaultEvent
	notes  []string
	pids   []int
}

func (r *run) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// Run runs opt.Plan live against opt.Target. The error is the harness's or
// the target's failure to run at all (a server that never became ready,
// a missing binary); a run that ran returns its verdict in Result. Every
// process it started is stopped before it returns, whatever happened.
func Run(ctx context.Context, opt Options) (res Result, err error) {
	if opt.Target == nil {
		return Result{}, errors.New("live: no target")
	}
	if err := checkOptions(opt.Target.Info(), opt.TargetOptions); err != nil {
		return Result{}, err
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = 30 * time.Second
	}
	if opt.StopGrace <= 0 {
		opt.StopGrace = 5 * time.Second
	}
	r := &run{opt: opt, ctx: ctx, spec: opt.Plan.Spec, info: opt.Target.Info(), servers: map[string]*proc{},
		srvSpec: map[string]Server{}, clients: map[string]*clientProc{}}
	r.logf = func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	r.dir = opt.Dir
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "fencesim-live-"); err != nil {
			return Result{}, fmt.Errorf("live: %w", err)
		}
		if !opt.Keep {
			defer os.RemoveAll(r.dir)
		}
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755); err != nil {
		return Result{}, fmt.Errorf("live: %w", err)
	}
	r.links = &linkSet{seed: opt.Plan.Seed}
	r.setup = &Setup{Options: opt.TargetOptions, dir: r.dir, binDirs: opt.BinDirs, links: r.links}
	start := time.Now()
	defer func() {
		// Whatever happened, nothing the run started survives it.
		if ctx.Err() != nil {
			// Interrupted: the user waits; nothing is judged on how
			// the servers stop.
			r.opt.StopGrace = min(r.opt.StopGrace, 200*time.Millisecond)
		}
		if serr := r.stopAll(); serr != nil && err == nil && ctx.Err() == nil {
			err = serr
		}
		r.links.close()
		res.PIDs = r.pids
		res.Wall = time.Since(start)
	}()
	if err = r.lay(); err == nil {
		err = r.startAll(ctx)
	}
	r.setup.release() // on every path: a failed layout holds no port
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (interrupted during start-up: %v)", ErrInterrupted, err)
		}
		return Result{}, err
	}
	r.workload(ctx)
	r.readyWG.Wait()
	slices.SortStableFunc(r.faults, func(a, b FaultEvent) int { return cmp.Compare(a.At, b.At) })
	interrupted := ctx.Err() != nil
	h, notes := r.history()
	r.notes = append(r.notes, notes...)
	v := check(h, r)
	if interrupted {
		r.notes = append(r.notes, fmt.Sprintf("interrupted at %v: the history so far is checked for safety, liveness is not judged", h.End.Round(time.Millisecond)))
	}
	if r.spec.Liveness != nil && !interrupted {
		v = checker.Combine(v, checker.CheckLiveness(h, r.healAt(), time.Duration(r.spec.Liveness.Bound), r.progressing()))
	}
	fc, clients := faultCounts(r.faults), r.clientCounts(h)
	grants := 0
	for _, c := range clients {
		grants += c.Grants
	}
	if why := r.vacuous(clients, fc, grants); why != "" && v.Kind == checker.VerdictPass {
		// Never a pass on nothing: what did not happen was not tested.
		v.Kind, v.Unknown = checker.VerdictUnknown, "the run tested too little to pass: "+why
	}
	res = Result{
		Target: r.info.Name, Scenario: r.spec.Name, Seed: opt.Plan.Seed, Expect: r.spec.Expect.String(),
		Met: r.spec.Expect.Met(v), Verdict: v, Faults: r.faults, History: h, Notes: r.notes,
		Options: opt.Plan.Options, Plan: opt.Plan, Interrupted: interrupted, Counts: map[string]int{
			"lock_ops": len(h.LockOps), "store_ops": len(h.Ops), "grants": len(h.Grants), "applies": len(h.Applies),
		},
		FaultCounts: fc, Clients: clients, TargetFaults: opt.TargetFaults,
	}
	if opt.Keep || opt.Dir != "" {
		res.Dir = r.dir
	}
	return res, nil
}

// ErrInterrupted matches Run's error when its context ended (SIGINT,
// SIGTERM) before the run could start.
var ErrInterrupted = errors.New("live: interrupted")

// lay asks the target for its layout and checks it: server names, the
// names the target declared (TargetInfo.Servers), and that the scripted
// faults can run on it (checkScripted).
func (r *run) lay() error {
	var err error
	if r.layout, err = r.opt.Target.Layout(r.setup); err != nil {
		return fmt.Errorf("live: target %s: %w", r.info.Name, err)
	}
	if len(r.layout.Client.Argv) == 0 {
		return fmt.Errorf("live: target %s lays out no client program", r.info.Name)
	}
	var names []string
	for _, s := range r.layout.Servers {
		if s.Name == "store" || r.servers[s.Name] != nil || slices.ContainsFunc(r.spec.Clients, func(c scenario.ClientSpec) bool { return c.Name == s.Name }) {
			return fmt.Errorf("live: target %s: server name %q is taken", r.info.Name, s.Name)
		}
		r.servers[s.Name] = &proc{name: s.Name, argv: s.Argv, env: s.Env, log: logPath(r.dir, s.Name), stopSig: s.StopSignal}
		r.srvSpec[s.Name] = s
		if s.Replica {
			r.replicas = append(r.replicas, s.Name)
		}
		names = append(names, s.Name)
	}
	if r.info.Servers != nil && !slices.Equal(names, r.info.Servers) {
		return fmt.Errorf("live: target %s lays out servers %v but declares %v (TargetInfo.Servers)", r.info.Name, names, r.info.Servers)
	}
	if !r.opt.AllowInapplicable {
		if err := r.checkScripted(); err != nil {
			return err
		}
	}
	return nil
}

// startAll starts the store, the target's servers and the clients, and
// waits until every server is ready.
func (r *run) startAll(ctx context.Context) error {
	bin, err := r.setup.Bin("fencesim-store")
	if err != nil {
		return err
	}
	addr, err := r.setup.Free()
	if err != nil {
		return err
	}
	dir, err := r.setup.Dir("store")
	if err != nil {
		return err
	}
	r.storeURL = "http://" + addr
	r.applies = &appliesLog{url: r.storeURL}
	env := []string{"FENCESIM_TEST_HOOKS=1"}
	if !r.info.Fenced {
		env = append(env, "FENCESIM_STORE_UNFENCED=true")
	}
	r.store = &proc{name: "store", argv: []string{bin, "-listen", addr, "-data", dir}, env: env, log: logPath(r.dir, "store")}
	r.setup.release()
	all := append([]*proc{r.store}, r.serverProcs()...)
	for _, p := range all {
		if err := p.start(nil, nil); err != nil {
			return err
		}
		r.pids = append(r.pids, p.pgid())
	}
	sctx, cancel := context.WithTimeout(ctx, r.opt.StartTimeout)
	defer cancel()
	if err := r.store.waitReady(sctx, httpReady(r.storeURL+"/readyz")); err != nil {
		return err
	}
	r.store.markReady()
	for _, s := range r.layout.Servers {
		check := s.Ready
		if check == nil {
			if s.ReadyURL == "" {
				return fmt.Errorf("live: target %s: server %s has neither ReadyURL nor Ready", r.info.Name, s.Name)
			}
			check = httpReady(s.ReadyURL)
		}
		if err := r.servers[s.Name].waitReady(sctx, check); err != nil {
			return err
		}
		r.servers[s.Name].markReady()
	}
	r.logf("live: %d servers and the store are ready", len(r.layout.Servers))
	for _, c := range r.spec.Clients {
		cp, err := r.clientProc(c.Name)
		if err != nil {
			return err
		}
		r.clients[c.Name] = cp
		if err := cp.launch(); err != nil {
			return err
		}
		cp.markReady()
		r.pids = append(r.pids, cp.pgid())
	}
	return nil
}

func (r *run) serverProcs() []*proc {
	var ps []*proc
	for _, s := range r.layout.Servers {
		ps = append(ps, r.servers[s.Name])
	}
	return ps
}

// clientProc lays out client name's process: its own proxy to every
// server endpoint and to the store.
func (r *run) clientProc(name string) (*clientProc, error) {
	var eps []string
	for _, s := range r.layout.Servers {
		if s.Endpoint == "" {
			continue
		}
		scheme, hostport := "", s.Endpoint
		if i := strings.Index(s.Endpoint, "://"); i >= 0 {
			scheme, hostport = s.Endpoint[:i+3], strings.TrimSuffix(s.Endpoint[i+3:], "/")
		}
		a, err := r.links.add(name, s.Name, hostport)
		if err != nil {
			return nil, err
		}
		eps = append(eps, scheme+a)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("live: target %s: no server has a client Endpoint", r.info.Name)
	}
	sa, err := r.links.add(name, "store", strings.TrimPrefix(r.storeURL, "http://"))
	if err != nil {
		return nil, err
	}
	argv := append(slices.Clone(r.layout.Client.Argv), "-client", name, "-endpoints", strings.Join(eps, ","),
		"-store", "http://"+sa, "-op-timeout", opTimeout.String())
	opts := map[string]string{}
	for k, v := range r.layout.Client.Options {
		opts[k] = v
	}
	for k, v := range r.opt.TargetOptions {
		opts[k] = v
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		argv = append(argv, "-opt", k+"="+opts[k])
	}
	return newClientProc(&proc{name: name, argv: argv, env: r.layout.Client.Env, log: logPath(r.dir, "client-"+name)}), nil
}

// opTimeout bounds one client operation (in the client process); the
// harness waits a little longer before it records the outcome unknown.
const opTimeout = 5 * time.Second

// stopAll stops the clients, then the servers, then the store; a process
// that ignores SIGTERM is killed and named in the error.
func (r *run) stopAll() error {
	var hung []string
	var wg sync.WaitGroup
	var mu sync.Mutex
	stop := func(p *proc) {
		defer wg.Done()
		if h, _ := p.stop(r.ctx, r.opt.StopGrace); h {
			mu.Lock()
			hung = append(hung, p.name)
			mu.Unlock()
		}
	}
	for _, c := range r.clients {
		if c == nil {
			continue
		}
		c.expectExit()
		c.closeStdin()
		wg.Add(1)
		go stop(c.proc)
	}
	wg.Wait()
	for _, p := range r.serverProcs() {
		if p != nil {
			wg.Add(1)
			go stop(p)
		}
	}
	if r.store != nil {
		wg.Add(1)
		go stop(r.store)
	}
	wg.Wait()
	if len(hung) > 0 {
		slices.Sort(hung)
		return fmt.Errorf("live: %s did not stop within %v of SIGTERM and were killed", strings.Join(hung, ", "), r.opt.StopGrace)
	}
	return nil
}

// proc returns the process called name: a server, the store or a client.
func (r *run) proc(name string) (*proc, bool) {
	if name == "store" {
		return r.store, true
	}
	if p, ok := r.servers[name]; ok {
		return p, true
	}
	if c := r.clients[name]; c != nil {
		return c.proc, true
	}
	return nil, false
}

// isClient reports whether name is one of the scenario's clients.
func (r *run) isClient(name string) bool {
	return slices.ContainsFunc(r.spec.Clients, func(c scenario.ClientSpec) bool { return c.Name == name })
}

func itoa(n int) string { return strconv.Itoa(n) }

// healAt is when the schedule's final heal was carried out (the
// operations planned at the end of the safety phase), on the run's
// timeline: the liveness bound counts from there.
func (r *run) healAt() time.Duration {
	at := time.Duration(r.spec.Duration)
	for _, ev := range r.faults {
		if time.Duration(ev.Planned.At) == time.Duration(r.spec.Duration) {
			at = max(at, ev.At)
		}
	}
	return at
}

// progressing lists the clients that must complete a cycle after the
// heal: those without a cycle limit whose process is up at the end.
func (r *run) progressing() []string {
	var names []string
	for _, c := range r.spec.Clients {
		if cp := r.clients[c.Name]; c.Cycles == 0 && cp != nil && cp.alive() {
			names = append(names, c.Name)
		}
	}
	return names
}
