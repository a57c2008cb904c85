// Command fencesim-bench times acquire→release cycles of three lock
// services on this machine in one run — fencesim-node (3 replicas, fsync
// on), fencesim-lockd over a real redis-server (AOF appendfsync always)
// and etcd's concurrency.Mutex over a real 3-member etcd-server — and of
// raw Redis (lockd's Lua scripts called without HTTP, on a redis-server of
// its own: what lockd's share is measured against), with 1,
// 8 and 64 concurrent clients on one lock each and on one shared lock,
// and prints one markdown table with each figure's ratio to etcd's. Run
// it from the checkout (it builds the etcd driver, module bench/etcd):
//
//	go run ./cmd/fencesim-bench                 # everything, ~2 minutes
//	go run ./cmd/fencesim-bench -only node,lockd -workers 8 -duration 1s
//
// Every server it starts (redis-server, etcd members, the in-process
// replicas) listens on free loopback ports with data in a temporary
// directory, and is stopped before it exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/bench"
	"github.com/fencesim/fencesim/bench/systems"
	"github.com/fencesim/fencesim/internal/cpuprofile"
	"github.com/fencesim/fencesim/internal/svcmain"
)

func main() {
	svcmain.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	})
}

// allSystems are the systems in the table's order; etcd is the baseline.
var allSystems = []string{"node", "lockd", "redis", "etcd"}

// names are the systems as the table prints them.
var names = map[string]string{"node": "fencesim-node", "lockd": "fencesim-lockd", "redis": "raw Redis (lockd's Lua)", "etcd": "etcd"}

type options struct {
	only             []string
	modes            []string
	workers          []int
	duration, warmup time.Duration
	json             bool
	held             string // systems.HeldRetry, HeldBackoff or HeldWait
	redisAddr        string
	etcdDriver       string
	dataDir          string
	// soak and soakInterval: the soak's length (0: no soak, the table)
	// and how often it reports.
	soak, soakInterval time.Duration
	// cpuProfile, if set, is where the table's run writes a CPU profile
	// of this process: the load generator, and fencesim-node's replicas
	// and fencesim-lockd, which run in it (etcd and redis-server do not).
	cpuProfile string
	peerTLS    bool // fencesim-node's replicas over mutual TLS
	apiTLS     bool // fencesim-node's API over TLS
	syncWrites bool // fencesim-node with -sync-writes
	// lockd.Options.Pipelines of fencesim-lockd and of the raw Redis row
	lockdPipelines, rawPipelines int
	// rounds is how many times the whole table runs (-rounds).
	rounds int
}

// Report is what -json prints: the machine, the run's options and every
// cell's result.
type Report struct {
	Machine Machine        `json:"machine"`
	Results []bench.Result `json:"results"`
	// Summary folds the rounds into a row per system and cell (with
	// -rounds above 1); Goals checks the anchors' bars in every cell.
	Summary []bench.SummaryRow `json:"summary,omitempty"`
	Goals   []GoalCheck        `json:"goals,omitempty"`
}

// Machine is what the figures depend on besides the code.
type Machine struct {
	CPUs          int      `json:"cpus"`
	GOMAXPROCS    int      `json:"gomaxprocs"`
	GoVersion     string   `json:"go"`
	LoadBefore    string   `json:"load_before"` // /proc/loadavg's 1/5/15-minute averages
	LoadAfter     string   `json:"load_after"`
	Etcd          string   `json:"etcd,omitempty"`
	Redis         string   `json:"redis,omitempty"`
	Seconds       float64  `json:"seconds"` // wall time of the whole run
	WarmupSeconds float64  `json:"warmup_seconds"`
	CellSeconds   float64  `json:"cell_seconds"`
	Systems       []string `json:"systems"`
	Held          string   `json:"held"`     // how node and lockd clients met a held lock
	PeerTLS       bool     `json:"peer_tls"` // fencesim-node's replicas over mutual TLS
	APITLS        bool     `json:"api_tls"`  // fencesim-node's API over TLS
	// NodeSyncWrites: fencesim-node ran with -sync-writes (its fsyncs in
	// the replica's loop, as 0.19's), for comparison.
	NodeSyncWrites bool `json:"node_sync_writes,omitempty"`
	// LockdPipelines, RawPipelines: -lockd-pipelines, -raw-pipelines.
	LockdPipelines int `json:"lockd_pipelines"`
	RawPipelines   int `json:"raw_pipelines"`
	Rounds         int `json:"rounds"`
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("fencesim-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "node,lockd,redis,etcd", "systems to run, comma-separated: node, lockd, redis (lockd's Lua scripts called without HTTP: what lockd's share of raw Redis is measured against), etcd")
	modes := fs.String("modes", "per-worker,shared", "lock layouts: per-worker (a lock each), shared (one lock)")
	workers := fs.String("workers", "1,8,64", "concurrent clients per cell, comma-separated")
	var o options
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time per cell (10ms..10m)")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "warm-up per cell, not counted (0..1m)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of the table")
	fs.BoolVar(&o.syncWrites, "node-sync-writes", false, "run fencesim-node with -sync-writes: each batch of Raft writes fsynced in the replica's loop before it goes on (0.19's way), to measure what background syncs win")
	fs.BoolVar(&o.apiTLS, "api-tls", false, "serve fencesim-node's lock API over TLS too (the clients trust its throwaway CA), to measure what client TLS costs")
	fs.BoolVar(&o.peerTLS, "peer-tls", true, "fencesim-node's replicas authenticate each other with mutual TLS, as -dev-cluster runs them (false: plain TCP, to measure what TLS costs)")
	fs.IntVar(&o.lockdPipelines, "lockd-pipelines", 0, "fencesim-lockd's pipelines of Redis script calls, -1..64 (0: its default, 4; -1: each call on a connection of its own, as FENCESIM_REDIS_PIPELINES=0)")
	fs.IntVar(&o.rawPipelines, "raw-pipelines", -1, "the raw Redis row's pipelines of script calls: -1 (each call on a connection of its own, the anchor's plain client), or 1..64 (lockd's way, with this many)")
	held := fs.String("held", systems.HeldWait, "node and lockd clients finding the lock held: wait (the Go client's Acquire, waiting at the service to be granted as the lock frees), retry (at once, the anchor's way) or backoff (the Go client's Acquire polling with jittered exponential backoff)")
	fs.StringVar(&o.redisAddr, "redis-addr", "", "use the Redis at host:port for lockd instead of starting redis-server")
	fs.StringVar(&o.etcdDriver, "etcd-driver", "", "the etcd driver binary (default: build bench/etcd of this checkout)")
	fs.StringVar(&o.dataDir, "data", "", "directory for the servers' data (default: a temporary one, removed)")
	fs.DurationVar(&o.soak, "soak", 0, "instead of the table, run fencesim-node (3 processes) under steady load for this long (1s..24h) and report its disk, memory and restart time (kill -9 of a follower, time to ready) every -soak-interval; the load is -workers' first count, per-worker")
	fs.DurationVar(&o.soakInterval, "soak-interval", time.Minute, "how often the soak reports (1s..1h)")
	fs.IntVar(&o.rounds, "rounds", 1, "run the whole table this many times (1..20), the systems in a balanced order (each runs in each place and after each other equally often over a cycle of rounds), and summarize each cell by its median over the rounds, each ratio taken within a round: on a shared machine one table's ratios can swing by 2× from run to run")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof): the clients, and fencesim-node's replicas and fencesim-lockd, which run in this process; not with -soak, whose servers run in processes of their own")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allSystems, s) {
			return o, fmt.Errorf("-only: unknown system %q (node, lockd, redis, etcd)", s)
		}
		if !slices.Contains(o.only, s) {
			o.only = append(o.only, s)
		}
	}
	o.held = *held
	switch *held {
	case systems.HeldRetry, systems.HeldBackoff, systems.HeldWait:
	default:
		return o, fmt.Errorf("-held %q: must be wait, retry or backoff", *held)
	}
	var err error
	if o.modes, err = bench.ParseModes(*modes); err != nil {
		return o, fmt.Errorf("-modes: %w", err)
	}
	if o.workers, err = bench.ParseWorkers(*workers); err != nil {
		return o, fmt.Errorf("-workers: %w", err)
	}
	if o.duration < 10*time.Millisecond || o.duration > 10*time.Minute {
		return o, fmt.Errorf("-duration %v: must be 10ms..10m", o.duration)
	}
	if o.warmup < 0 || o.warmup > time.Minute {
		return o, fmt.Errorf("-warmup %v: must be 0..1m", o.warmup)
	}
	if o.soak != 0 && (o.soak < time.Second || o.soak > 24*time.Hour) {
		return o, fmt.Errorf("-soak %v: must be 1s..24h", o.soak)
	}
	if o.soakInterval < time.Second || o.soakInterval > time.Hour {
		return o, fmt.Errorf("-soak-interval %v: must be 1s..1h", o.soakInterval)
	}
	if o.lockdPipelines < -1 || o.lockdPipelines > 64 {
		return o, fmt.Errorf("-lockd-pipelines %d: must be -1..64", o.lockdPipelines)
	}
	if o.rawPipelines < -1 || o.rawPipelines == 0 || o.rawPipelines > 64 {
		return o, fmt.Errorf("-raw-pipelines %d: must be -1 or 1..64", o.rawPipelines)
	}
	if o.rounds < 1 || o.rounds > 20 {
		return o, fmt.Errorf("-rounds %d: must be 1..20", o.rounds)
	}
	if o.rounds > 1 && o.soak != 0 {
		return o, fmt.Errorf("-rounds repeats the table; -soak runs no table")
	}
	if o.cpuProfile != "" && o.soak != 0 {
		return o, fmt.Errorf("-cpuprofile profiles the table's run, whose servers run in this process; -soak runs them in processes of their own")
	}
	return o, nil
}

// run is the whole program; it returns the exit code: 0 every cell
// measured, 1 a system failed to start or a cell failed, 2 bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 2
	}
	dir := o.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fencesim-bench-"); err != nil {
			fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
	}
	if o.soak > 0 {
		return soak(ctx, o, dir, stdout, stderr)
	}
	if o.cpuProfile != "" {
		stop, err := cpuprofile.Start(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "fencesim-bench: -cpuprofile: %v\n", err)
			return 2
		}
		defer stop()
	}
	// The servers' own logs would drown the progress lines: warnings and
	// errors only.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		LoadBefore: loadavg(), WarmupSeconds: o.warmup.Seconds(), CellSeconds: o.duration.Seconds(), Systems: o.only, Held: o.held, PeerTLS: o.peerTLS, APITLS: o.apiTLS,
		NodeSyncWrites: o.syncWrites, LockdPipelines: o.lockdPipelines, RawPipelines: o.rawPipelines, Rounds: o.rounds}
	began := time.Now()
	var results []bench.Result
	failed := false
	progress := func(r bench.Result) {
		if r.Err != "" {
			failed = true
			fmt.Fprintf(stderr, "  %-14s %-10s %3d workers  FAILED: %s\n", names[r.System], r.Mode, r.Workers, r.Err)
			return
		}
		fmt.Fprintf(stderr, "  %-14s %-10s %3d workers  %9.0f cycles/s  p50 %-9s p99 %s\n", names[r.System], r.Mode, r.Workers,
			r.CyclesPerSec, bench.Latency(r.P50()), bench.Latency(r.P99()))
	}
	var driverErr error // the etcd driver's build, done once for every round
	if o.etcdDriver == "" && slices.Contains(o.only, "etcd") {
		var root string
		if root, driverErr = systems.ModuleRoot(); driverErr == nil {
			fmt.Fprintf(stderr, "  building the etcd driver (%s/bench/etcd)\n", root)
			o.etcdDriver, driverErr = systems.BuildEtcdDriver(root, dir)
		}
	}
	for round := 1; round <= o.rounds && ctx.Err() == nil; round++ {
		for _, sys := range roundOrder(o.only, round) {
			if ctx.Err() != nil {
				break
			}
			if o.rounds > 1 {
				fmt.Fprintf(stderr, "fencesim-bench: round %d of %d: %s\n", round, o.rounds, names[sys])
			} else {
				fmt.Fprintf(stderr, "fencesim-bench: %s\n", names[sys])
			}
			var rs []bench.Result
			err := driverErr
			if sys != "etcd" || err == nil {
				rs, err = runSystem(ctx, sys, o, dir, log, &m, progress)
			}
			if err != nil {
				fmt.Fprintf(stderr, "fencesim-bench: %s: %v\n", names[sys], err)
				failed = true
				rs = unmeasured(rs, o, err)
			}
			for i := range rs {
				rs[i].System, rs[i].Round = names[sys], round
			}
			results = append(results, rs...)
		}
	}
	m.LoadAfter, m.Seconds = loadavg(), time.Since(began).Seconds()
	sortResults(results, o)
	rep := Report{Machine: m, Results: results, Goals: checkGoals(results, o)}
	if o.rounds > 1 {
		rep.Summary = bench.Summarize(results, names["etcd"])
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%d CPUs (GOMAXPROCS %d), %s; load average before %s, after %s; %v per cell after %v warm-up; held: %s; run took %.0fs\n",
			m.CPUs, m.GOMAXPROCS, m.GoVersion, m.LoadBefore, m.LoadAfter, o.duration, o.warmup, m.Held, m.Seconds)
		if m.Etcd != "" || m.Redis != "" {
			fmt.Fprintf(stdout, "etcd %s, redis %s\n", or(m.Etcd, "–"), or(m.Redis, "–"))
		}
		fmt.Fprintln(stdout)
		if o.rounds > 1 {
			fmt.Fprintf(stdout, "Medians over %d rounds [lowest–highest]; each ratio is taken within a round (-json has every round's rows).\n\n", o.rounds)
			fmt.Fprint(stdout, bench.MarkdownSummary(rep.Summary, "etcd"))
		} else {
			fmt.Fprint(stdout, bench.Markdown(results, "etcd"))
		}
		if len(rep.Goals) > 0 {
			fmt.Fprintf(stdout, "\nGoals (../shared/anchors/lock-services.md; a ratio of two rows of one round):\n\n")
			fmt.Fprint(stdout, goalsMarkdown(rep.Goals))
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

// runSystem starts one system, runs every cell on it and stops it.
func runSystem(ctx context.Context, sys string, o options, dir string, log *slog.Logger, m *Machine, progress func(bench.Result)) ([]bench.Result, error) {
	// cells runs every cell through the HTTP API at endpoints, or through
	// direct's cycles if it is set.
	cells := func(endpoints func() []string, hc *http.Client, direct func(workers int, held string) bench.Cycle) []bench.Result {
		var rs []bench.Result
		prefix := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		for _, mode := range o.modes {
			for _, n := range o.workers {
				if ctx.Err() != nil {
					return rs
				}
				c := bench.Cell{Mode: mode, Workers: n, Warmup: o.warmup, Duration: o.duration, Prefix: prefix}
				var cycle bench.Cycle
				var err error
				if direct != nil {
					cycle = direct(n, o.held)
				} else {
					cycle, err = systems.HTTPCycle(endpoints(), n, o.held, hc)
				}
				var r bench.Result
				if err != nil {
					r = bench.Result{System: sys, Mode: mode, Workers: n, Err: err.Error()}
				} else {
					cctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration+30*time.Second)
					r = bench.Run(cctx, sys, c, cycle)
					cancel()
				}
				progress(r)
				rs = append(rs, r)
			}
		}
		return rs
	}
	switch sys {
	case "node":
		sub, err := mkdirTemp(dir, "node-")
		if err != nil {
			return nil, err
		}
		n, err := systems.StartNode(sub, log, systems.NodeOptions{PeerTLS: o.peerTLS, APITLS: o.apiTLS, SyncWrites: o.syncWrites})
		if err != nil {
			return nil, err
		}
		defer n.Close()
		return cells(func() []string { return n.Endpoints }, n.HTTP, nil), nil
	case "lockd", "redis":
		addr := o.redisAddr
		if addr == "" {
			sub, err := mkdirTemp(dir, "redis-")
			if err != nil {
				return nil, err
			}
			r, err := systems.StartRedis(sub)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			addr = r.Addr
			if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
				m.Redis = strings.TrimSpace(string(out))
			}
		}
		if sys == "redis" {
			r, err := systems.StartRawRedis(addr, log, o.rawPipelines)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return cells(nil, nil, r.Cycle), nil
		}
		d, err := systems.StartLockd(addr, log, o.lockdPipelines)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return cells(func() []string { return []string{d.Endpoint} }, nil, nil), nil
	case "etcd":
		sub, err := mkdirTemp(dir, "etcd-")
		if err != nil {
			return nil, err
		}
		e, err := systems.StartEtcd(sub)
		if err != nil {
			return nil, err
		}
		defer e.Close()
		m.Etcd = e.Version
		return systems.RunEtcdDriver(ctx, o.etcdDriver, e, o.modes, o.workers, o.warmup, o.duration, progress)
	}
	return nil, fmt.Errorf("unknown system %q", sys)
}

// unmeasured completes the results of a system that failed (to start,
// or part way) with a failed row for every cell it did not measure, so
// that the summary counts the round as failed and a goal as missed
// rather than leaving the round out.
func unmeasured(rs []bench.Result, o options, err error) []bench.Result {
	for _, mode := range o.modes {
		for _, n := range o.workers {
			if !slices.ContainsFunc(rs, func(r bench.Result) bool { return r.Mode == mode && r.Workers == n }) {
				rs = append(rs, bench.Result{Mode: mode, Workers: n, Err: err.Error()})
			}
		}
	}
	return rs
}

// roundOrder is the order in which round runs the systems: the round's
// row of a balanced Latin square (Williams' design), so that over n rounds
// (2n for an odd n) each system runs once in each place and once right
// after each other system, instead of always first on a fresh machine or
// always after the same neighbour.
func roundOrder(systems []string, round int) []string {
	n := len(systems)
	rows := n
	if n%2 == 1 {
		rows = 2 * n // odd: each row and its reverse
	}
	r := (round - 1) % rows
	order := make([]string, n)
	for i := range n {
		// The first row is 0, 1, n-1, 2, n-2, …; row r adds r to each.
		first := (i + 1) / 2
		if i%2 == 0 && i > 0 {
			first = n - i/2
		}
		order[i] = systems[(first+r)%n]
	}
	if r >= n {
		slices.Reverse(order)
	}
	return order
}

// sortResults orders rows by mode, then workers (the flags' orders), then
// system (node, lockd, redis, etcd), then round, so each cell's systems sit
// together.
func sortResults(rs []bench.Result, o options) {
	idx := func(r bench.Result) [4]int {
		sys := slices.IndexFunc(allSystems, func(s string) bool { return names[s] == r.System })
		return [4]int{slices.Index(o.modes, r.Mode), slices.Index(o.workers, r.Workers), sys, r.Round}
	}
	slices.SortStableFunc(rs, func(a, b bench.Result) int {
		ia, ib := idx(a), idx(b)
		for i := range ia {
			if ia[i] != ib[i] {
				return ia[i] - ib[i]
			}
		}
		return 0
	})
}

func mkdirTemp(dir, pattern string) (string, error) { return os.MkdirTemp(dir, pattern) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
