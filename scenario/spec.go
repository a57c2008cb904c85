// Package scenario is the vocabulary of a run, in both worlds: a
// scenario's spec, the plan drawn from it and a seed (the swarm's fault
// options and schedule, the drawn knobs), and the replay file that writes
// a plan down. It holds no world: package scenarios runs a plan in the
// simulator, package live against real processes, and neither drags the
// other in. A spec names its design and planted bug by name only, checked
// against their shapes (lockservice.DesignShape) and the catalogue of
// planted bugs, never their code.
//
// A scenario is data: a versioned JSON spec (the built-ins are embedded from
// scenarios/builtin/*.json). Bad specs are reported as errors that say what
// to fix, never as panics.
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/bugs"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenarios/builtin"
)

// SpecVersion is the scenario format this code reads and writes.
const SpecVersion = 1

// MaxBuggifyTicks bounds Spec.Buggify's election timeout (and so its
// heartbeat interval), in ticks: BUGGIFY tests tight timings, and far
// larger ones overflow Raft's randomized timeout and the tick timer (a
// run that spins at t=0 until its step limit, judged unknown, instead of
// a spec refused with its reason). Ten times the default (10) and
// nodesvc's (100) alike.
const MaxBuggifyTicks = 1000

// MaxSyncDelay bounds Spec.ServerSyncDelay and StoreSyncDelay: a disk
// slower than this for a whole run is a stalled one, which the slow-disk
// fault already stands for.
const MaxSyncDelay = Duration(time.Second)

// MaxGroupCommitWindow bounds Spec.GroupCommitWindow: a window is a
// batching delay on every append, well under a heartbeat.
const MaxGroupCommitWindow = Duration(50 * time.Millisecond)

// Duration reads and writes JSON as "250ms".
type Duration = nemesis.Duration

// Spec describes one scenario.
type Spec struct {
	Version     int    `json:"version"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Expect is the verdict the scenario must produce on every seed.
	Expect Expectation `json:"expect"`
	// Design is the lock design under test (see Designs): "replicated"
	// (the reference, Raft over Replicas nodes n1…nN), "single-node" (one
	// server, "lock"), "lease-only" (the reference with a store that
	// ignores tokens), "redlock" (Replicas independent Redlock nodes
	// n1…nN), or a design registered with RegisterDesign.
	Design string `json:"design"`
	// Replicas is the number of service nodes, for the designs that take
	// one: 3 or 5 for replicated and lease-only, odd from 1 to 9 for
	// redlock.
	Replicas int `json:"replicas,omitempty"`
	// IngressDepth bounds each replica's requests in flight (0: the
	// default); excess requests are shed as Overloaded.
	IngressDepth int `json:"ingress_depth,omitempty"`
	// GroupCommit runs the service as the real runtime does: a replica
	// defers each event's Raft work (append, fsync, send) to the end of
	// its batch of queued events, one append and one fsync for the batch
	// (reference.ReplicaConfig.GroupCommit; the simulator ends a batch
	// when the next event is not another of the node's at the same
	// instant). A swarm scenario without it draws it from the seed for
	// half of its seeds.
	GroupCommit bool `json:"group_commit,omitempty"`
	// GroupCommitWindow, with GroupCommit, holds each batch's Raft work
	// that long after its first event, so that events arriving within it
	// join the batch, as the real runtime's batches gather what queues
	// during an fsync (reference.ReplicaConfig.GroupCommitWindow). 0: a
	// batch ends with its instant; a swarm scenario without one draws 1
	// to 5 ms for half of the seeds that commit in groups
	// (DrawGroupCommitWindow). At most MaxGroupCommitWindow.
	GroupCommitWindow Duration `json:"group_commit_window,omitempty"`
	// AsyncWrites runs the reference's replicas with asynchronous storage
	// writes, as the real node runs them: each Ready's sync runs in the
	// background while the replica goes on, and only what depends on it
	// waits (reference.ReplicaConfig.AsyncWrites). The swarm draws it for
	// half of its seeds when unset (drawAsyncWrites); it changes a run
	// only where the disk is slow (ServerSyncDelay, the nemesis's slow
	// disks).
	AsyncWrites bool `json:"async_writes,omitempty"`
	// TokenOffset starts the service's fencing tokens above it (the
	// reference's token is the granting log index plus the offset), so a
	// run can put its tokens near an integer boundary (2^31, 2^32, 2^53,
	// 2^63) and show that every component carries them whole. 0: tokens
	// start at 1; a swarm scenario without one draws one from the seed
	// (TokenOffsets). At most MaxTokenOffset.
	TokenOffset uint64 `json:"token_offset,omitempty"`
	// SnapshotEntries and SnapshotBytes make the replicas snapshot their
	// lock table and compact their logs every that many entries or bytes
	// of commands. Both 0: every run draws small ones from its seed
	// (drawSnapshot), so that snapshots, compaction and snapshot transfer
	// happen under the run's faults.
	SnapshotEntries uint64 `json:"snapshot_entries,omitempty"`
	SnapshotBytes   uint64 `json:"snapshot_bytes,omitempty"`
	// Buggify draws protocol knobs away from the design's safe defaults:
	// small Raft append and in-flight caps, elections close to heartbeats
	// (lockservice.Buggify). nil: the defaults; a swarm scenario without
	// it draws it from the seed for one seed in three (DrawBuggify).
	Buggify *lockservice.Buggify `json:"buggify,omitempty"`
	// ServerSyncDelay and StoreSyncDelay make every sync of the servers'
	// (the store's) disks take that long for the whole run: a slow disk
	// as a setting rather than a fault, so that crashes, votes and
	// answers land while syncs are in flight all through such a run
	// (BUGGIFY). 0: a fast disk; a swarm scenario without either draws
	// them from the seed for one seed in four (DrawSyncDelays). A
	// slow-disk fault raises a node's delay while it lasts, then puts
	// this one back. At most MaxSyncDelay.
	ServerSyncDelay Duration `json:"server_sync_delay,omitempty"`
	StoreSyncDelay  Duration `json:"store_sync_delay,omitempty"`
	// Mutant plants a bug in every component of the run (see
	// bugs.Mutants); "" is the reference.
	Mutant string    `json:"mutant,omitempty"`
	Store  StoreSpec `json:"store"`
	// Latency bounds one-way message latency (exponential between them).
	LatencyMin  Duration     `json:"latency_min"`
	LatencyMean Duration     `json:"latency_mean"`
	LatencyMax  Duration     `json:"latency_max"`
	Clients     []ClientSpec `json:"clients"`
	// Faults are scripted fault operations. They aim at nodes by role
	// (@replica:N, @store, @client:NAME, @leader; see nemesis/role.go), so
	// the scenario runs on every design that has those roles, or by a
	// node's name, for one design only.
	Faults nemesis.Schedule `json:"faults"`
	// Swarm draws fault options and a fault schedule from the seed for
	// the safety phase, in addition to the scripted faults.
	Swarm bool `json:"swarm,omitempty"`
	// Duration is the safety phase: how much true time the run lasts, or,
	// with Liveness, how long before every fault is healed.
	Duration Duration `json:"duration"`
	// Liveness, if set, follows the safety phase: every fault healed and
	// clocks stable, every live client must complete acquire, a fenced
	// write and release within Bound.
	Liveness *LivenessSpec `json:"liveness,omitempty"`
	// StepLimit bounds the number of events (a runaway guard).
	StepLimit uint64 `json:"step_limit"`
	// Limits bound what the run may hold at once (another runaway guard);
	// nil or zero fields take the defaults.
	Limits *RunLimits `json:"limits,omitempty"`
	// Live tunes how simrun live judges the scenario against real
	// processes; the simulator ignores it.
	Live *LiveSpec `json:"live,omitempty"`
}

// LiveSpec tunes a live run's judgement (package live).
type LiveSpec struct {
	// MinFaultsDone is the fraction of the schedule's applicable fault
	// operations (those the target can carry out) a live run must carry
	// out for its verdict to be more than unknown; nil: live's default
	// (live.DefaultMinFaultsDone). 0 accepts a run that carried out none.
	MinFaultsDone *float64 `json:"min_faults_done,omitempty"`
}

// RunLimits bound what one run may hold at once, so that a livelocked
// service stops with a verdict that names the limit instead of taking the
// machine's memory. Like StepLimit they count, so where a run stops is a
// function of its seed. Zero fields take the defaults.
type RunLimits struct {
	// Pending bounds the events waiting at once (sim.Limits.Pending).
	Pending int `json:"pending,omitempty"`
	// DiskBytes bounds each node's disk (sim.Limits.DiskBytes).
	DiskBytes int `json:"disk_bytes,omitempty"`
	// Reports bounds the events the processes report to the history's
	// recorder: what the history, and the checker's work, grow with.
	// Default: 1,000 per client per simulated second, at least 500,000
	// (scenarios.ReportsPerClientSecond, DefaultReports).
	Reports int `json:"reports,omitempty"`
	// TraceBytes bounds the readable trace (sim.Limits.TraceBytes); the
	// run goes on past it, untraced.
	TraceBytes int `json:"trace_bytes,omitempty"`
}

// LivenessSpec bounds the liveness phase.
type LivenessSpec struct {
	Bound Duration `json:"bound"`
}

// Expectation is the verdict a scenario must produce.
type Expectation struct {
	Verdict string `json:"verdict"` // "pass", "violation" or "liveness"
	// Property, for violations: the property that must be among those violated.
	Property string `json:"property,omitempty"`
}

// Met reports whether v meets the expectation.
func (e Expectation) Met(v checker.Verdict) bool {
	if v.Kind.String() != e.Verdict {
		return false
	}
	if e.Property == "" {
		return true
	}
	for _, x := range v.Violations {
		if x.Property == e.Property {
			return true
		}
	}
	return false
}

// Headline is the one property a one-line verdict names: the expected
// property when the run violated it, else the verdict's first
// (checker.Verdict.Property). A run often violates several properties, and
// the first by property order need not be the one the scenario exists to
// show: redlock-gc-pause violates S2 before S3, and a headline of S2 under
// "expected violation S3 met" reads as a contradiction.
func (e Expectation) Headline(v checker.Verdict) string {
	if e.Property != "" && slices.ContainsFunc(v.Violations, func(x checker.Violation) bool { return x.Property == e.Property }) {
		return e.Property
	}
	return v.Property()
}

func (e Expectation) String() string {
	if e.Property != "" {
		return e.Verdict + " " + e.Property
	}
	return e.Verdict
}

// StoreSpec configures the fenced store.
type StoreSpec struct {
	// IgnoreTokens turns fencing off (the unfenced contrast design).
	IgnoreTokens bool `json:"ignore_tokens,omitempty"`
}

// ClientSpec configures one client and its workload.
type ClientSpec struct {
	Name          string   `json:"name"`
	Resource      string   `json:"resource"`
	TTL           Duration `json:"ttl"`
	StartDelay    Duration `json:"start_delay,omitempty"`
	Cycles        int      `json:"cycles"`
	WritesPerHold int      `json:"writes_per_hold"`
	WorkDuration  Duration `json:"work_duration"`
	DriftBoundPPM int64    `json:"drift_bound_ppm"`
	// Wait is the client's acquire wait bound (lockservice.ClientConfig.Wait):
	// it waits in the service's queue for a held lock instead of polling.
	// 0: it polls.
	Wait Duration `json:"wait,omitempty"`
	// ThinkTime is the client's pause between cycles. 0: the workload's
	// default (50 ms), a busy client that contends for its resource
	// again at once; a swarm run draws longer ones for some clients
	// (DrawThinkTimes), so that a lease can lapse with nobody waiting.
	ThinkTime Duration `json:"think_time,omitempty"`
}

// StoreNode is the fenced store's node name: the harness's own node, the
// same for every design (faults aim at it as "@store" or "store").
const StoreNode = "store"

// Shape returns the shape of the spec's design; nil if unknown (Validate
// says so).
func (s *Spec) Shape() lockservice.DesignShape {
	d, _ := LookupDesign(s.Design)
	return d
}

// ServerNames returns the lock service's node names for the design (nil
// if the design or its replica count is wrong; Validate says so).
func (s *Spec) ServerNames() []string {
	d := s.Shape()
	if d == nil {
		return nil
	}
	names, err := d.Nodes(s.Replicas)
	if err != nil {
		return nil
	}
	return names
}

// Cluster names spec's nodes for the nemesis: the design's servers, the
// store and the clients.
func (s *Spec) Cluster() nemesis.Cluster {
	c := nemesis.Cluster{Servers: s.ServerNames(), Store: []string{StoreNode}}
	if d := s.Shape(); d != nil {
		c.LeaderSelector = d.Info().Leader
	}
	for _, cl := range s.Clients {
		c.Clients = append(c.Clients, cl.Name)
		c.TTL = max(c.TTL, time.Duration(cl.TTL))
		c.DriftBoundPPM = max(c.DriftBoundPPM, cl.DriftBoundPPM)
	}
	return c
}

// WithMutant returns spec with m planted, switched to the design m lives
// in when it is not the reference's (bugs.Design: lockd's bugs run on
// lockd), its replicas kept if that design takes them.
func (s Spec) WithMutant(m lockservice.Mutant) Spec {
	s.Mutant = string(m)
	if d := bugs.Design(m); d != "" && d != s.Design {
		s.Design = d
		if des, ok := LookupDesign(d); ok {
			if _, err := des.Nodes(s.Replicas); err != nil {
				s.Replicas = 0
			}
		}
	}
	return s
}

// Fenced reports whether the spec's store orders writes by token: the
// design's tokens grow with each grant and the store checks them. Only then
// does fencing make two clients that both believe they hold a lock
// harmless; Redlock's random values and the unfenced designs cannot.
func (s *Spec) Fenced() bool {
	d := s.Shape()
	if d == nil {
		return false
	}
	info := d.Info()
	return !s.Store.IgnoreTokens && !info.UnfencedStore && !info.UnorderedTokens
}

// expectableProperties are the properties an expectation of verdict may
// name: a safety property for a violation, liveness's own for liveness,
// none for a pass.
func expectableProperties(verdict string) []string {
	switch verdict {
	case "violation":
		return checker.SafetyProperties()
	case "liveness":
		return []string{checker.LivenessProperty}
	}
	return nil
}

// Validate reports the first thing wrong with s, saying how to fix it.
func (s *Spec) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("scenario %q: %s", s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Version != SpecVersion:
		return fail("version %d is not supported (this build reads version %d)", s.Version, SpecVersion)
	case s.Name == "" || strings.ContainsAny(s.Name, " \t\n/"):
		return fail("name must be a non-empty kebab-case word")
	case s.Expect.Verdict != "pass" && s.Expect.Verdict != "violation" && s.Expect.Verdict != "liveness":
		return fail("expect.verdict must be \"pass\", \"violation\" or \"liveness\", got %q", s.Expect.Verdict)
	case s.Expect.Property != "" && !slices.Contains(expectableProperties(s.Expect.Verdict), s.Expect.Property):
		if s.Expect.Verdict == "pass" {
			return fail("expect.property %q: a run expected to pass violates no property; drop expect.property", s.Expect.Property)
		}
		return fail("expect.property %q is no property of verdict %q; use one of %s (or none)", s.Expect.Property, s.Expect.Verdict, strings.Join(expectableProperties(s.Expect.Verdict), ", "))
	case s.Liveness != nil && s.Liveness.Bound <= 0:
		return fail("liveness.bound must be positive")
	case s.Expect.Verdict == "liveness" && s.Liveness == nil:
		return fail("expect.verdict \"liveness\" needs a liveness phase")
	case s.Shape() == nil:
		return fail("unknown design %q (known: %v)", s.Design, designNames())
	case !validMutant(s.Mutant):
		_, err := bugs.ParseMutant(s.Mutant)
		return fail("%v", err)
	case s.IngressDepth < 0:
		return fail("ingress_depth must be ≥ 0 (0: the default)")
	case s.Buggify != nil && (s.Buggify.AppendEntries < 0 || s.Buggify.AppendEntries > 64):
		return fail("buggify.append_entries must be 1..64 (0: the default)")
	case s.Buggify != nil && (s.Buggify.Inflight < 0 || s.Buggify.Inflight > 32):
		return fail("buggify.inflight must be 1..32 (0: the default)")
	case s.Buggify != nil && (s.Buggify.ElectionTicks > 0 || s.Buggify.HeartbeatTicks > 0) &&
		(s.Buggify.HeartbeatTicks < 1 || s.Buggify.ElectionTicks <= s.Buggify.HeartbeatTicks):
		return fail("buggify: set election_ticks and heartbeat_ticks together, heartbeat_ticks ≥ 1 and election_ticks > heartbeat_ticks")
	case s.Buggify != nil && s.Buggify.ElectionTicks > MaxBuggifyTicks:
		return fail("buggify.election_ticks must be at most %d (the default is 10)", MaxBuggifyTicks)
	case s.ServerSyncDelay < 0 || s.ServerSyncDelay > MaxSyncDelay || s.StoreSyncDelay < 0 || s.StoreSyncDelay > MaxSyncDelay:
		return fail("server_sync_delay and store_sync_delay must lie in [0, %v], e.g. \"5ms\"", time.Duration(MaxSyncDelay))
	case s.GroupCommitWindow < 0 || s.GroupCommitWindow > MaxGroupCommitWindow:
		return fail("group_commit_window must lie in [0, %v], e.g. \"2ms\"", time.Duration(MaxGroupCommitWindow))
	case s.GroupCommitWindow > 0 && !s.GroupCommit:
		return fail("group_commit_window needs \"group_commit\": true (a window gathers a group commit's batch)")
	case s.TokenOffset > MaxTokenOffset:
		return fail("token_offset %d leaves too little room below 2^64 for the run's tokens; use at most %d (2^64 − 2^40)", s.TokenOffset, uint64(MaxTokenOffset))
	case s.LatencyMin <= 0:
		// The checker orders an op a client calls at the instant its own
		// previous op returned after that op (program order). That is
		// sound only if a message takes time: with a zero-delay round trip
		// a request sent at the instant of a reply could take effect
		// before it, and a correct run could be judged a violation.
		return fail("latency_min must be positive (e.g. \"500µs\"): with zero-delay messages the checker's program order could judge a correct run a violation")
	case s.LatencyMax < s.LatencyMin || s.LatencyMean <= 0:
		return fail("latency needs latency_min ≤ latency_max and latency_mean > 0")
	case len(s.Clients) == 0:
		return fail("needs at least one client")
	case s.Duration <= 0:
		return fail("duration must be positive")
	case s.StepLimit == 0:
		return fail("step_limit must be positive")
	case s.Live != nil && s.Live.MinFaultsDone != nil && !(*s.Live.MinFaultsDone >= 0 && *s.Live.MinFaultsDone <= 1):
		return fail("live.min_faults_done must be a fraction from 0 to 1")
	case s.Limits != nil && (s.Limits.Pending < 0 || s.Limits.DiskBytes < 0 || s.Limits.Reports < 0 || s.Limits.TraceBytes < 0):
		return fail("limits.pending, limits.disk_bytes, limits.reports and limits.trace_bytes must be ≥ 0 (0: the default)")
	}
	servers, err := s.Shape().Nodes(s.Replicas)
	if err != nil {
		return fail("%v", err)
	}
	names := append(slices.Clone(servers), StoreNode)
	for i, n := range servers {
		if n == "" || n == StoreNode || strings.HasPrefix(n, "@") || slices.Index(servers, n) != i {
			return fail("design %s: node name %q is empty, \"store\", a role (@…) or repeated", s.Design, n)
		}
	}
	for i, c := range s.Clients {
		switch {
		case c.Name == "" || slices.Contains(names, c.Name):
			return fail("client %d: name %q is empty or already taken", i, c.Name)
		case c.Resource == "":
			return fail("client %s: resource is empty", c.Name)
		case c.TTL <= 0:
			return fail("client %s: ttl must be positive", c.Name)
		case c.Cycles < 0 || c.WritesPerHold < 0 || c.WorkDuration < 0 || c.StartDelay < 0 || c.ThinkTime < 0:
			return fail("client %s: cycles, writes_per_hold, work_duration, start_delay and think_time must be ≥ 0", c.Name)
		case c.DriftBoundPPM < 0 || c.DriftBoundPPM >= 1_000_000:
			return fail("client %s: drift_bound_ppm must be in [0, 1000000)", c.Name)
		case c.Wait < 0 || time.Duration(c.Wait) > lockservice.DefaultLimits().MaxWait:
			return fail("client %s: wait must be in [0, %v]", c.Name, lockservice.DefaultLimits().MaxWait)
		}
		names = append(names, c.Name)
	}
	for i, op := range s.Faults {
		if op.At >= s.Duration {
			return fail("fault %d (%s) at %v lies beyond the duration %v", i, op, time.Duration(op.At), time.Duration(s.Duration))
		}
	}
	// Faults name nodes, or roles the design must have (a replica's number,
	// a leader): the error says which role is missing and what to aim at.
	if err := s.Faults.ValidateFor(s.Cluster()); err != nil {
		return fail("design %s: %v", s.Design, err)
	}
	return nil
}

// Parse reads a spec from JSON, rejecting unknown fields (a typo must not
// silently become a default), and validates it.
func Parse(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("scenario: %v", err)
	}
	if dec.More() {
		return Spec{}, fmt.Errorf("scenario: trailing data after the JSON object")
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Builtin returns every built-in scenario, sorted by name.
func Builtin() []Spec {
	entries, err := builtin.Files.ReadDir(".")
	if err != nil {
		panic(err)
	}
	var out []Spec
	for _, e := range entries { // ReadDir returns sorted names
		b, err := builtin.Files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		s, err := Parse(b)
		if err != nil {
			panic(fmt.Sprintf("built-in %s: %v", e.Name(), err)) // a broken build, caught by tests
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup finds a built-in scenario by name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Builtin() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// IsBuiltin reports whether s is a built-in scenario as built in, with
// a planted bug or not: `simrun run -scenario NAME` runs it. A spec read
// from a file may carry a built-in's name and differ.
func IsBuiltin(s Spec) bool {
	b, ok := Lookup(s.Name)
	if !ok {
		return false
	}
	s.Mutant = b.Mutant
	x, errX := json.Marshal(s)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// Names lists the built-in scenario names.
func Names() []string {
	var out []string
	for _, s := range Builtin() {
		out = append(out, s.Name)
	}
	return out
}

func validMutant(m string) bool {
	_, err := bugs.ParseMutant(m)
	return err == nil
}
