package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A Target is a lock service the harness can run for real: it lays out
// the service's server processes and names the client binary that speaks
// the harness's protocol (package liveclient). The harness owns the rest:
// free ports, data directories, the fault proxies between processes, the
// fenced store (always fencesim-store), the workload, the schedule and the
// check. A target is stateless; Layout is called once per run.
type Target interface {
	Info() TargetInfo
	// Layout returns the processes of one run. It asks s for free
	// addresses, data directories, binaries, and the proxied address of
	// every link between its servers that faults should reach.
	Layout(s *Setup) (Layout, error)
}

// TargetInfo describes a target.
type TargetInfo struct {
	// Name is what -target takes ("reference", "lockd", "redlock").
	Name string
	// Doc is one line for simrun live -h.
	Doc string
	// Fenced: the service issues fencing tokens and the store enforces
	// them. False: the Locker returns token 0, the harness assigns a
	// synthetic token per resource in the order acquires returned, and
	// the store runs unfenced (accepts every write and records its token),
	// so a stale write after a newer one shows as an S3 violation.
	Fenced bool
	// ClockFaults: the servers (Server.TestURL) take POST /test/clock, so
	// drift and jump faults reach the service's own clock. Go reads time
	// from the vDSO, so no outside tool can skew a Go service's clock; a
	// target without the endpoint gets clock faults printed as skipped.
	ClockFaults bool
	// DiskFaults: the servers take POST /test/disk (slow fsync).
	DiskFaults bool
	// TokensPerResource: the service's tokens grow per resource (a
	// counter per key), not across resources, which fencing needs no
	// more than; S1 is then judged per resource.
	TokensPerResource bool
	// Binaries are the executables the target needs, for the message of
	// a run (or a test) that cannot find them.
	Binaries []string
	// Servers are the names of the servers Layout lays out, in order, so
	// that a spec can aim faults at them (by name, or as @name) before
	// the run; the run checks that Layout gives exactly these.
	Servers []string
	// LeaseLife is the longest a lease granted for ttl lives on the
	// service before another client can be granted the lock, if longer
	// than ttl (etcd rounds a TTL up to whole seconds and expires leases
	// on a 500 ms check); nil: ttl. A live swarm pauses holders past it
	// (scenario.World.Lease).
	LeaseLife func(ttl time.Duration) time.Duration
	// SpuriousBusy, if set, says why the service may answer an acquire
	// "busy" while nobody holds the lock (etcd's TryLock): its busy
	// answers are left out of the history the checker judges (a refused
	// acquire changes nothing, so every other operation is judged as
	// before), and the verdict's notes say so. Empty: a busy answer
	// claims a holder, and S7 checks the claim.
	SpuriousBusy string
	// Options are the keys of the target-specific options a run may set
	// (simrun live -opt key=value); Run refuses any other key, so that a
	// misspelt option cannot silently run another experiment, nor a user
	// override what the target itself sets (etcd-mutex's "fenced").
	Options []string
}

// leaseLife is info.LeaseLife(ttl), or ttl without one.
func (info TargetInfo) leaseLife(ttl time.Duration) time.Duration {
	if info.LeaseLife == nil {
		return ttl
	}
	return max(ttl, info.LeaseLife(ttl))
}

// ErrBadOption matches Run's error for a target option the target does
// not take (TargetInfo.Options).
var ErrBadOption = errors.New("live: unknown target option")

// checkOptions refuses an option key the target does not take.
func checkOptions(info TargetInfo, opts map[string]string) error {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(info.Options, k) {
			takes := "takes none"
			if len(info.Options) > 0 {
				takes = "takes " + strings.Join(info.Options, ", ")
			}
			return fmt.Errorf("%w: target %s: -opt %s: the target %s", ErrBadOption, info.Name, k, takes)
		}
	}
	return nil
}

// Layout is one run's processes, as a target lays them out.
type Layout struct {
	// Servers are started in order and all ready-checked before the
	// workload starts.
	Servers []Server
	// Client is the client binary every workload client runs as its own
	// process.
	Client ClientProgram
	// Leader, if set, names the server that leads now, for faults aimed
	// at @leader; nil: @leader faults are skipped.
	Leader func(ctx context.Context) (name string, ok bool)
}

// Server is one server process of a target.
type Server struct {
	// Name names the process in the schedule, the history and the report
	// ("n1", "redis1"). Unique in the layout; "store" and the clients'
	// names are taken.
	Name string
	// Replica: a service node. The scenario's n-th service node (and
	// @replica:N) stands for the layout's n-th Replica server; servers
	// that are not replicas (a Redis under lockd's front ends) are
	// reached by faults that name them.
	Replica bool
	// Argv is the command (Argv[0] a path, see Setup.Bin); Env is added
	// to the harness's environment.
	Argv []string
	Env  []string
	// Dir is the data directory (Setup.Dir): kept across a crash, so a
	// restart runs the same Argv on the same data.
	Dir string
	// ReadyURL answers 200 when the server is ready (GET); Ready, if set,
	// is used instead (a server without HTTP). Both are polled until the
	// harness's start timeout.
	ReadyURL string
	Ready    func(ctx context.Context) error
	// Endpoint is the client-facing address, a URL ("http://host:port")
	// or host:port; each client process reaches it through its own
	// proxy, so a fault can cut one client from one server. "": clients
	// do not talk to this server.
	Endpoint string
	// TestURL is the base URL of the test hooks (/test/clock,
	// /test/disk), reached directly; "": the server has none.
	TestURL string
	// UnproxiedPeers: the server talks to other servers over links the
	// harness does not proxy (an etcd member dials each peer at one
	// advertised URL), so network faults cannot cut it from them; an
	// isolation, partition or block that would have to is not applicable
	// to it.
	UnproxiedPeers bool
	// StopSignal ends the server when the run is over (0: SIGTERM, then
	// SIGKILL after the grace). SIGKILL suits a server whose graceful
	// stop waits on peers that are stopping too: an etcd leader hands
	// its leadership over for up to 5s plus two election timeouts.
	StopSignal syscall.Signal
}

// ClientProgram is the client binary: its main calls liveclient.Main.
// The harness adds -client, -endpoints, -store and one -opt k=v per
// option.
type ClientProgram struct {
	Argv    []string
	Env     []string
	Options map[string]string
}

var registry = struct {
	sync.Mutex
	byName map[string]Target
}{byName: map[string]Target{}}

// Register adds a target; a second target of the same name is an error.
func Register(t Target) error {
	registry.Lock()
	defer registry.Unlock()
	name := t.Info().Name
	if name == "" {
		return fmt.Errorf("live: a target needs a name")
	}
	if _, dup := registry.byName[name]; dup {
		return fmt.Errorf("live: target %q registered twice", name)
	}
	registry.byName[name] = t
	return nil
}

// Lookup returns the target named name.
func Lookup(name string) (Target, bool) {
	registry.Lock()
	defer registry.Unlock()
	t, ok := registry.byName[name]
	return t, ok
}

// Targets returns every registered target, by name.
func Targets() []TargetInfo {
	registry.Lock()
	defer registry.Unlock()
	var out []TargetInfo
	for _, t := range registry.byName {
		out = append(out, t.Info())
	}
	slices.SortFunc(out, func(a, b TargetInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}
