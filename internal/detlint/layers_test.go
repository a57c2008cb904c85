package detlint

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modulePath is the module's import path, the prefix of every package of
// fencesim.
const modulePath = "github.com/fencesim/fencesim"

// layers says which packages of fencesim a package's non-test code may
// depend on, directly or not. It keeps the two worlds apart: process code
// written against the contract must build without the simulator, so that
// it can run for real. Test code is not judged (tests drive the code in
// sim).
var layers = []struct {
	pattern string   // a go list pattern, relative to the module root
	allowed []string // fencesim packages its dependencies may include, besides those it matches
	why     string
}{
	{
		pattern: "./process",
		why:     "the contract is a leaf: a real runtime implements it without building the simulator",
	},
	{
		pattern: "./coverage",
		why:     "the coverage marks are counted by the Raft core, the reference, the client and the nemesis alike: a leaf, so that none of them drags anything in",
	},
	{
		pattern: "./nemesis",
		why:     "the fault vocabulary (kinds, schedules, roles, triggers, the swarm generator, the Nemesis interface) is shared by the simulator and the live runner: it holds no world, so it drags in neither (the simulator's Nemesis is nemesis/inject)",
	},
	{
		pattern: "./lockservice",
		allowed: []string{"process", "coverage"},
		why:     "the plug-in contract is what a lock author imports: the process contract and the standard library, never Raft, the reference or the simulator",
	},
	{
		pattern: "./lockservice/reference",
		allowed: []string{"process", "coverage", "lockservice", "lockservice/raft", "lockservice/internal/record"},
		why:     "the reference is a lock service like any plug-in: the contract, Raft and its records, nothing of the harness, the catalogue of planted bugs or the simulator",
	},
	{
		pattern: "./lockd/scripts",
		why:     "lockd's scripts are the one definition of its atomic operations, run by real Redis and by the simulator's Redis process: a leaf, standard library only",
	},
	{
		pattern: "./lockservice/...",
		allowed: []string{"process", "coverage", "lockd/scripts"},
		why:     "the lock service is written against the contract only, so that it runs on a real clock and disk unchanged (fault controls stay in sim and nemesis)",
	},
	{
		pattern: "./scenario",
		allowed: []string{"checker", "nemesis", "process", "coverage", "lockservice", "lockservice/designs/shape", "lockservice/bugs", "scenarios/builtin"},
		why:     "the vocabulary of a run (spec, plan, replay file) is shared by the simulator and the live runner: it names designs and planted bugs by their shapes and names, and links no world and no design's processes",
	},
	{
		pattern: "./scenario/cycle",
		why:     "the workload's decisions are one pure state machine run by the simulator's workload and the live runner alike: a leaf, standard library only",
	},
	{
		pattern: "./scenarios/builtin",
		why:     "the built-in scenario files are data: a leaf",
	},
	{
		pattern: "./lockservice/designs/shape",
		allowed: []string{"lockservice", "process", "coverage"},
		why:     "the built-in designs' shapes are data a plan is checked against: the contract's types, no design's processes",
	},
	{
		pattern: "./lockservice/bugs",
		allowed: []string{"lockservice", "process", "coverage"},
		why:     "the catalogue of planted bugs is names a plan is checked against: the contract's types, none of the bugs' code",
	},
	{
		pattern: "./scenarios/workload",
		allowed: []string{"process", "coverage", "lockservice", "lockservice/lockclient", "lockservice/internal/record", "scenario/cycle"},
		why:     "the workload drives the lock client like an application would: nothing of the simulator, the reference or the harness",
	},
	{
		pattern: "./history",
		allowed: []string{"checker"},
		why:     "the recorder of the clients' calls and answers is shared by the simulator and the live runner: it knows the checker's history and nothing of either world",
	},
	{
		pattern: "./filedisk",
		allowed: []string{"process"},
		why:     "the file disk implements the contract for real; it must not drag in the simulator",
	},
	{
		pattern: "./realclock",
		allowed: []string{"process"},
		why:     "the real clock implements the contract; it must not drag in the simulator",
	},
	{
		pattern: "./realrt",
		allowed: []string{"process", "realclock", "filedisk"},
		why:     "the real runtime hosts any process over a caller's codec: it knows no protocol and must not drag in the simulator",
	},
	{
		pattern: "./wire",
		allowed: []string{"process", "coverage", "lockservice", "lockservice/raft", "lockservice/reference", "lockservice/redlock", "lockservice/internal/record",
			"lockservice/lockdsim", "lockd/scripts", "lockservice/designs/shape"},
		why: "the wire codec encodes the lock service's messages (the contract's, Raft's as the reference sends them, Redlock's, the simulated lockd's script calls); it must not drag in the simulator",
	},
	{
		pattern: "./detlint",
		why:     "a user imports the lint into a design's test or builds cmd/detlint from it: it must not drag in the simulator or anything else of fencesim",
	},
	{
		pattern: "./cmd/detlint",
		allowed: []string{"detlint"},
		why:     "the vet tool is the lint and the analysis driver, nothing else of fencesim",
	},
	{
		pattern: "./admission",
		why:     "the concurrency-limit algorithms are pure state machines on a clock interface of their own: the simulator and the HTTP API both run them, so they depend on neither",
	},
	{
		pattern: "./internal/httpx",
		why:     "the HTTP plumbing lockapi and storesvc share (server timeouts, JSON answers, draining, name checks) is standard library only",
	},
	{
		pattern: "./internal/fencemac",
		why:     "the fencing-token MAC the lock API signs and the store checks is standard library only",
	},
	{
		pattern: "./internal/gopool",
		why:     "goroutines kept for the Go client's HTTP attempts: standard library only, and never inside the simulation",
	},
	{
		pattern: "./internal/testhooks",
		why:     "the test-only endpoints (clock, disk, apply log) are standard library only: each service hands them its own setters",
	},
	{
		pattern: "./lockapi",
		allowed: []string{"admission", "internal/httpx", "internal/fencemac"},
		why:     "the HTTP lock API is generic over its Backend: a Redis or Raft backend plugs in from outside, the API depends on neither (only on the admission algorithms and the shared HTTP plumbing)",
	},
	{
		pattern: "./lockapi/lockapitest",
		allowed: []string{"lockapi", "admission", "internal/httpx", "internal/fencemac"},
		why:     "the API's test backend and contract suite are the API's, generic over any Backend",
	},
	{
		pattern: "./lockapi/lockclient",
		allowed: []string{"lockapi", "admission", "internal/httpx", "internal/fencemac", "internal/gopool", "process", "coverage", "lockservice", "lockservice/lockclient", "lockservice/internal/record", "realclock"},
		why:     "the HTTP client is the simulator's lock client on the real clock: its state machine and the contract it speaks, nothing of the simulator or of any service",
	},
	{
		pattern: "./bench",
		why:     "the benchmark harness knows no lock service: the etcd driver's own module (bench/etcd) imports it without building fencesim",
	},
	{
		pattern: "./internal/etcdcluster",
		why:     "an etcd cluster's flags and health check, shared by the benchmark and the live targets: standard library only",
	},
	{
		pattern: "./internal/freeport",
		why:     "loopback ports for servers that bind them later, shared by the live harness and the tests that start processes: standard library only",
	},
	{
		pattern: "./internal/etcdtest",
		allowed: []string{"internal/etcdcluster"},
		why:     "the tests' etcd cluster is etcdcluster's plan started: nothing else of fencesim",
	},
	{
		pattern: "./live/redlockclient",
		allowed: []string{"live/liveclient"},
		why:     "a target's Locker is what a user writes for their own service: the liveclient contract and the service's client library, nothing else of fencesim",
	},
	{
		pattern: "./live/liveclient",
		why:     "a user's client main imports the live protocol to test their own lock service: standard library only",
	},
	{
		pattern: "./live/shipped",
		allowed: []string{"live/liveclient", "lockapi/lockclient", "lockapi", "admission", "internal/httpx", "internal/fencemac", "internal/gopool", "process", "coverage", "lockservice", "lockservice/lockclient", "lockservice/internal/record", "realclock"},
		why:     "the lock API's Locker is the shipped Go client behind the live protocol: the client and what it is built of, nothing of the services it talks to or of the simulator",
	},
	{
		pattern: "./live",
		allowed: []string{"live/liveclient", "coverage", "internal/testhooks", "internal/etcdcluster", "internal/freeport", "checker", "history", "report", "nemesis",
			"scenario", "scenario/cycle", "scenarios/builtin", "process", "lockservice", "lockservice/designs/shape", "lockservice/bugs"},
		why: "the live harness runs the services as processes, never in its own: it plans with scenario and nemesis, checks with checker, and links neither the simulator (sim, fakeclock, the simulator's runner and nemesis) nor any service's code (the reference, Raft, the planted bugs, realrt, nodesvc, storesvc, lockd)",
	},
	{
		pattern: "./lockd",
		allowed: []string{"lockapi", "admission", "internal/httpx", "internal/fencemac", "lockd/scripts"},
		why:     "the Redis backend is a lockapi.Backend and nothing else of fencesim",
	},
}

// simulatorAndServices are the packages, with those under them, that the
// live runner and the vocabulary it plans with must never link, whatever
// their layers come to allow: the simulator (its event loop, clocks,
// runner and injector), the service's code (Raft, the reference, its
// front end, lockd's simulated processes, Redlock) and the planted bugs'
// code. Names and shapes of designs and bugs are data packages of their
// own (lockservice/designs/shape, lockservice/bugs), and so are the
// built-in scenario files: dataUnder lists those that lie under a banned
// path.
var simulatorAndServices = []string{"sim", "fakeclock", "scenarios", "nemesis/inject", "lockservice/raft", "lockservice/reference",
	"lockservice/frontend", "lockservice/lockdsim", "lockservice/redlock", "lockservice/mutants", "lockservice/designs"}

// dataUnder are leaves of data under simulatorAndServices' paths, which a
// plan is checked against.
var dataUnder = []string{"scenarios/builtin", "lockservice/designs/shape"}

// simulatorFree are the packages that run or plan live runs.
var simulatorFree = []string{"./live", "./scenario"}

// TestLiveLinksNoSimulator: go list -deps of the live runner and of the
// vocabulary it plans with holds none of simulatorAndServices (issue 20:
// one loop, two worlds — the live runner plans with the simulator's
// vocabulary, not its code).
func TestLiveLinksNoSimulator(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range simulatorFree {
		for _, f := range linked(t, root, p, simulatorAndServices) {
			t.Errorf("%s: the live runner's side must not link the simulator or a service", f)
		}
	}
}

// TestLinkedCatchesTheSimulator proves TestLiveLinksNoSimulator can fail:
// the simulator's runner links sim, Raft and the planted bugs.
func TestLinkedCatchesTheSimulator(t *testing.T) {
	got := linked(t, moduleRoot(t), "./scenarios", simulatorAndServices)
	for _, want := range []string{"sim", "lockservice/raft", "lockservice/mutants"} {
		if !slices.Contains(got, "./scenarios links "+modulePath+"/"+want) {
			t.Errorf("findings %q lack %s", got, want)
		}
	}
}

// linked lists, as "P links D", every dependency D of package P that is
// one of banned (paths relative to the module) or lies under one.
func linked(t *testing.T, root, pkg string, banned []string) []string {
	t.Helper()
	var found []string
	for _, dep := range goList(t, root, "-deps", pkg) {
		rel, ok := strings.CutPrefix(dep, modulePath+"/")
		if !ok || slices.Contains(dataUnder, rel) {
			continue
		}
		for _, b := range banned {
			if rel == b || strings.HasPrefix(rel, b+"/") {
				found = append(found, pkg+" links "+dep)
				break
			}
		}
	}
	return found
}

// TestLayers fails when a package depends on a fencesim package its layer
// does not allow, naming both. It asks go list for the dependency graph of
// the non-test build, which is what the Go tool itself would build.
func TestLayers(t *testing.T) {
	root := moduleRoot(t)
	for _, l := range layers {
		t.Run(strings.Trim(l.pattern, "./"), func(t *testing.T) {
			for _, f := range forbiddenDeps(t, root, l.pattern, l.allowed) {
				t.Errorf("%s: %s", f, l.why)
			}
		})
	}
}

// TestLayersCatchAForbiddenDependency proves the check can fail: held to
// the lock service's layer, sim is caught depending on fakeclock.
func TestLayersCatchAForbiddenDependency(t *testing.T) {
	got := forbiddenDeps(t, moduleRoot(t), "./sim", []string{"process"})
	want := "github.com/fencesim/fencesim/sim depends on github.com/fencesim/fencesim/fakeclock"
	if !slices.Contains(got, want) {
		t.Fatalf("findings %q lack %q", got, want)
	}
}

// forbiddenDeps lists, as "P depends on D", every fencesim package D that a
// package P matched by pattern depends on, other than the packages pattern
// matches and those allowed (paths relative to the module).
func forbiddenDeps(t *testing.T, root, pattern string, allowed []string) []string {
	t.Helper()
	own := goList(t, root, pattern)
	if len(own) == 0 {
		t.Fatalf("go list %s matched no package", pattern)
	}
	var found []string
	for _, pkg := range own {
		for _, dep := range goList(t, root, "-deps", pkg) {
			rel, ok := strings.CutPrefix(dep, modulePath+"/")
			if ok && !slices.Contains(own, dep) && !slices.Contains(allowed, rel) {
				found = append(found, pkg+" depends on "+dep)
			}
		}
	}
	return found
}

// goList runs go list with args in dir and returns the import paths it
// prints, one per line.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("go list %s: %s", strings.Join(args, " "), msg)
	}
	return strings.Fields(string(out))
}
