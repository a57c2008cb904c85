package live

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"

	// The services TestMain builds as binaries, linked into the test
	// binary only so that go test's cache never reuses a result for
	// binaries built from other sources.
	_ "github.com/fencesim/fencesim/live/shipped"
	_ "github.com/fencesim/fencesim/lockd"
	_ "github.com/fencesim/fencesim/nodesvc"
	_ "github.com/fencesim/fencesim/storesvc"
)

// binDir holds the binaries TestMain built: the services, the store and
// the client of the lock API.
var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "fencesim-live-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("go", "build", "-o", dir, "../cmd/fencesim-node", "../cmd/fencesim-store", "../cmd/fencesim-lockd", "../cmd/fencesim-liveclient")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "live: building the binaries: %v\n", err)
			return 1
		}
		binDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

// need skips the test when an outside binary is missing, except in CI
// (CI set, any value), where it fails.
func need(t *testing.T, bin string) {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		pkg := bin
		if bin == "etcd" {
			pkg = "etcd-server" // Debian's package of the etcd binary
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (CI is set, which requires it: apt-get install %s)", bin, pkg)
		}
		t.Skipf("skipping: %s is not installed (apt-get install %s); with CI set (.ci/run sets CI=1) this is a failure", bin, pkg)
	}
}

// builtin returns the registered target called name.
func builtin(t *testing.T, name string) Target {
	t.Helper()
	tg, ok := Lookup(name)
	if !ok {
		t.Fatalf("no target %s", name)
	}
	return tg
}

func plan(t *testing.T, name string, seed uint64) scenario.Plan {
	t.Helper()
	s, ok := scenario.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	p, err := scenario.NewPlan(s, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runLive(t *testing.T, target Target, p scenario.Plan) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{Target: target, Plan: p, BinDirs: []string{binDir}, Dir: t.TempDir(), StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, res.PIDs)
	return res
}

// noLeftovers checks the process table (/proc): no live process is left
// in any group the run started. A zombie is dead (its parent, the init of
// a container, may be slow to reap it) and does not count.
func noLeftovers(t *testing.T, pgids []int) {
	t.Helper()
	if len(pgids) == 0 {
		t.Fatal("the run reports no process groups: nothing to check")
	}
	groups := map[int]bool{}
	for _, pg := range pgids {
		groups[pg] = true
	}
	var left []string
	for range 20 { // a SIGKILLed process may take a moment to die
		left = left[:0]
		entries, err := os.ReadDir("/proc")
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid pgrp ...: comm may hold spaces.
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) < 3 || f[0] == "Z" {
				continue
			}
			if pg, err := strconv.Atoi(f[2]); err == nil && groups[pg] {
				left = append(left, e.Name()+" "+s[:strings.LastIndexByte(s, ')')+1])
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("processes left in the run's process groups: %v", left)
}

// kleppmannPlan is the Kleppmann pause with a wider work window than the
// scenario's (300 ms from A's grant at about 600 ms, the pause at 750 ms),
// so that on a loaded machine the pause lands inside A's work, not on its
// acquire still in flight. (A pause there is a case of its own: after it,
// the client's retry of the same request id after its unanswered grant
// expired is granted again by lockd, whose request-id memory is the
// lease's; the reference answers it with the first grant from its
// replicated table, and its test runs the scenario's own plan.)
func kleppmannPlan(t *testing.T) scenario.Plan {
	p := plan(t, "kleppmann-gc-pause", 1)
	p.Spec.Clients[0].WorkDuration = scenario.Duration(300 * time.Millisecond)
	p.Schedule[0].At = scenario.Duration(750 * time.Millisecond)
	return p
}

// kleppmann checks the Kleppmann pause against a fenced target: the pause
// was carried out on A's process, no write of A's with a grant it had
// before the pause was accepted after it (whether A's acquire returned
// before the pause, so that A wrote late and was rejected, or after it,
// so that A's watchdog kept it from writing or it was granted afresh once
// B was done, is the machine's timing), and the verdict passes.
func kleppmann(t *testing.T, target Target, p scenario.Plan) {
	res := runLive(t, target, p)
	if len(res.Faults) != 1 || res.Faults[0].Skipped != "" || res.Faults[0].Node != "a" {
		t.Fatalf("faults carried out: %+v, want the pause of a", res.Faults)
	}
	pause := res.Faults[0].At
	before := map[uint64]bool{} // A's tokens granted before the pause
	for _, o := range res.History.LockOps {
		if o.Client == "a" && o.Kind == checker.LockAcquire && o.Outcome == checker.LockGranted && o.Return < pause {
			before[o.Token] = true
		}
	}
	for _, o := range res.History.Ops {
		if o.Client == "a" && o.Kind == checker.OpWrite && before[o.Token] && o.Call > pause && o.Outcome != checker.OutcomeRejected {
			t.Errorf("A's write across its pause was not rejected: %+v", o)
		}
	}
	if res.Verdict.Kind != checker.VerdictPass || len(res.History.Applies) == 0 {
		t.Errorf("verdict %v (%v), %d applies; notes %v", res.Verdict.Kind, res.Verdict.Violations, len(res.History.Applies), res.Notes)
	}
}

// TestReferenceKleppmann runs the scenario's own plan: the pause (at 650
// ms, A's acquire at 600 ms) lands in A's 100 ms of work, or on a loaded
// machine on its acquire in flight, which the reference must pass too.
func TestReferenceKleppmann(t *testing.T) {
	kleppmann(t, builtin(t, "reference"), plan(t, "kleppmann-gc-pause", 1))
}

func TestLockdKleppmann(t *testing.T) {
	need(t, "redis-server")
	kleppmann(t, builtin(t, "lockd"), kleppmannPlan(t))
}

// unfencedReference is the reference lock service in front of a store
// that accepts every write: the canary.
type unfencedReference struct{ Target }

func (u unfencedReference) Info() TargetInfo {
	i := u.Target.Info()
	i.Name, i.Fenced = "reference-unfenced", false
	return i
}

// TestUnfencedCanary: the same pause before a store that does not fence
// must fail S3 (A's stale write lands after B's), proving the live check
// can fail.
//
// Like the targets we did not write, a run in which A's grant returned
// only after its pause began is not the case and is run again
// (staleWriteLanded): on a loaded machine that happens.
func TestUnfencedCanary(t *testing.T) {
	staleWriteLanded(t, unfencedReference{builtin(t, "reference")})
}

func slicesHasProperty(v checker.Verdict, p string) bool {
	for _, x := range v.Violations {
		if x.Property == p {
			return true
		}
	}
	return false
}

// fakeTarget lays out one shell-script server, for the runner's
// robustness tests.
type fakeTarget struct {
	script string
	ready  func(ctx context.Context) error
	client []string // the client program (default fencesim-liveclient)
}

func (f fakeTarget) Info() TargetInfo { return TargetInfo{Name: "fake", Fenced: true} }

func (f fakeTarget) Layout(s *Setup) (Layout, error) {
	addr, err := s.Free()
	if err != nil {
		return Layout{}, err
	}
	client, err := s.Bin("fencesim-liveclient")
	if err != nil {
		return Layout{}, err
	}
	srv := Server{Name: "f1", Replica: true, Argv: []string{"/bin/sh", "-c", f.script}, Endpoint: "http://" + addr, Ready: f.ready}
	if f.ready == nil {
		srv.ReadyURL = "http://" + addr + "/readyz" // nobody listens
	}
	argv := []string{client}
	if f.client != nil {
		argv = f.client
	}
	return Layout{Servers: []Server{srv}, Client: ClientProgram{Argv: argv}}, nil
}

func shortPlan(t *testing.T) scenario.Plan {
	p := plan(t, "kleppmann-gc-pause", 1)
	p.Spec.Duration = scenario.Duration(300 * time.Millisecond)
	p.Schedule = nil
	return p
}

func runFake(t *testing.T, f fakeTarget) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Run(ctx, Options{Target: f, Plan: shortPlan(t), BinDirs: []string{binDir}, Dir: t.TempDir(),
		StartTimeout: 1500 * time.Millisecond, StopGrace: 500 * time.Millisecond})
}

func TestNeverReady(t *testing.T) {
	res, err := runFake(t, fakeTarget{script: "exec sleep 60"})
	if err == nil || !strings.Contains(err.Error(), "f1 was not ready in time") {
		t.Fatalf("error %v, want f1 not ready in time", err)
	}
	noLeftovers(t, res.PIDs)
}

func TestCrashAtStart(t *testing.T) {
	res, err := runFake(t, fakeTarget{script: "echo boom-at-start >&2; exit 3"})
	if err == nil || !strings.Contains(err.Error(), "f1 exited before it was ready") || !strings.Contains(err.Error(), "boom-at-start") {
		t.Fatalf("error %v, want f1 exited before ready, with its log", err)
	}
	noLeftovers(t, res.PIDs)
}

func TestHangOnStop(t *testing.T) {
	// The shell ignores SIGTERM and keeps a child: both must go.
	res, err := runFake(t, fakeTarget{script: `trap "" TERM; sleep 60 & while :; do sleep 0.1; done`,
		ready: func(context.Context) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "f1 did not stop") {
		t.Fatalf("error %v, want f1 did not stop", err)
	}
	noLeftovers(t, res.PIDs)
}

// TestReplayFile: a live run's replay file gives back its target and
// plan.
func TestReplayFile(t *testing.T) {
	p := plan(t, "swarm", 3)
	b := NewReplayFile(Result{Target: "reference", Plan: p})
	target, got, _, err := ParseReplayFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if target != "reference" || got.Seed != 3 || len(got.Schedule) != len(p.Schedule) || got.Spec.Name != "swarm" {
		t.Fatalf("got %s %+v", target, got)
	}
	if _, _, _, err := ParseReplayFile([]byte(strings.Replace(string(b), `"live_format": 1`, `"live_format": 9`, 1))); err == nil {
		t.Fatal("a file of another format was accepted")
	}
	// A live plan's additions (the stale-holder pauses) are known again
	// on replay, so the header tells them apart; a count past the
	// schedule is refused.
	s, _ := scenario.Lookup("swarm")
	lp, err := scenario.NewPlanIn(s, 3, scenario.World{StaleHolders: true, Lease: time.Second})
	if err != nil || lp.WorldOps == 0 {
		t.Fatalf("live plan: %v, %d added operations", err, lp.WorldOps)
	}
	lb := NewReplayFile(Result{Target: "reference", Plan: lp})
	if _, got, _, err := ParseReplayFile(lb); err != nil || got.WorldOps != lp.WorldOps ||
		!strings.Contains(Describe("reference", got, nil), fmt.Sprintf("and %d the live world adds", lp.WorldOps)) {
		t.Fatalf("replayed live plan: %v, world ops %d, want %d", err, got.WorldOps, lp.WorldOps)
	}
	bad := strings.Replace(string(lb), fmt.Sprintf(`"world_ops": %d`, lp.WorldOps), `"world_ops": 100000`, 1)
	if _, _, _, err := ParseReplayFile([]byte(bad)); err == nil || !strings.Contains(err.Error(), "world_ops") {
		t.Fatalf("world_ops past the schedule: %v", err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFaultKinds carries out one of every fault kind the reference takes
// — pauses, crashes and restarts of a replica and of the store, a one-way
// block, an isolation and a partition with heals, loss, delay, a network
// reset, clock drift, a jump and a reset, a slow disk — around the
// Kleppmann clients: none may be skipped, the store's apply log must
// span its restart, and the verdict must pass.
func TestFaultKinds(t *testing.T) {
	p := kleppmannPlan(t)
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	p.Spec.Duration = d(5 * time.Second)
	p.Schedule = nemesis.Schedule{
		{At: d(100 * ms), Kind: nemesis.Drift, Node: "n1", PPM: 500, Duration: d(300 * ms)},
		{At: d(150 * ms), Kind: nemesis.SlowDisk, Node: "n2", Delay: d(5 * ms), Duration: d(300 * ms)},
		{At: d(200 * ms), Kind: nemesis.Block, Node: "n1", To: "n2"},
		{At: d(300 * ms), Kind: nemesis.Heal},
		{At: d(350 * ms), Kind: nemesis.Jump, Node: "n3", By: d(-2 * ms), Duration: d(100 * ms)},
		{At: d(400 * ms), Kind: nemesis.Pause, Node: "n2", Duration: d(100 * ms)},
		{At: d(450 * ms), Kind: nemesis.Loss, Probability: 0.1, Duration: d(200 * ms)},
		{At: d(500 * ms), Kind: nemesis.Delay, Delay: d(20 * ms), Mean: d(5 * ms), Duration: d(200 * ms)},
		{At: d(600 * ms), Kind: nemesis.NetworkReset},
		{At: d(750 * ms), Kind: nemesis.Pause, Node: "@client:a", Duration: d(3 * time.Second)},
		{At: d(1000 * ms), Kind: nemesis.Crash, Node: "n3"},
		{At: d(1200 * ms), Kind: nemesis.Restart, Node: "n3"},
		{At: d(1500 * ms), Kind: nemesis.Isolate, Node: "n1"},
		{At: d(1700 * ms), Kind: nemesis.Heal},
		{At: d(2000 * ms), Kind: nemesis.Crash, Node: "@store"},
		{At: d(2100 * ms), Kind: nemesis.Restart, Node: "@store"},
		{At: d(2300 * ms), Kind: nemesis.Partition, Group: []string{"n1", "n2", "a", "b", "store"}},
		{At: d(2400 * ms), Kind: nemesis.Heal},
		{At: d(2500 * ms), Kind: nemesis.ClockReset, Node: "n1"},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	res := runLive(t, builtin(t, "reference"), p)
	if len(res.Faults) != len(p.Schedule) {
		t.Fatalf("%d faults carried out, want %d: %v", len(res.Faults), len(p.Schedule), res.Faults)
	}
	for _, ev := range res.Faults {
		if ev.Skipped != "" {
			t.Errorf("skipped: %s", ev)
		}
	}
	if len(res.History.StoreRestarts) != 1 {
		t.Errorf("store restarts %v, want one", res.History.StoreRestarts)
	}
	if res.Verdict.Kind != checker.VerdictPass {
		t.Errorf("verdict %v: %v; notes %v", res.Verdict.Kind, res.Verdict.Violations, res.Notes)
		for _, o := range res.History.LockOps {
			t.Logf("lock op %+v", o)
		}
	}
}

// cancelOnStart is a log writer that ends the run's context a moment
// after its workload starts: a user's Ctrl-C.
type cancelOnStart struct {
	cancel func()
	after  time.Duration
}

func (c cancelOnStart) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "workload started") {
		time.AfterFunc(c.after, c.cancel)
	}
	return len(b), nil
}

// TestInterruptedRunJudgesNoLiveness: a run stopped by a signal half way
// through a scenario with a liveness phase (the swarm's) is marked
// interrupted and is not judged on liveness — a workload cut short did
// not fail to make progress — and leaves nothing running.
func TestInterruptedRunJudgesNoLiveness(t *testing.T) {
	p := plan(t, "swarm", 3)
	if p.Spec.Liveness == nil {
		t.Fatal("the swarm has no liveness phase: nothing to test")
	}
	p.Spec.Duration = scenario.Duration(4 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{Target: builtin(t, "reference"), Plan: p, BinDirs: []string{binDir}, Dir: t.TempDir(),
		StopGrace: 2 * time.Second, Log: cancelOnStart{cancel: cancel, after: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, res.PIDs)
	if !res.Interrupted {
		t.Errorf("the run is not marked interrupted")
	}
	if res.Verdict.Kind == checker.VerdictLiveness {
		t.Errorf("an interrupted run judged on liveness: %+v", res.Verdict)
	}
}
