package lockservice

import (
	"fmt"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/process"
)

// Design is a lock design the harness can run: how many nodes its service
// has and what they are called, the process each of them runs, and how its
// clients speak to it. Every design of the harness is one — the reference
// (replicated), single-node, lease-only and redlock, in lockservice/designs
// — and a user plugs their own lock in the same way
// (scenarios.RegisterDesign), then names it in a scenario's "design" field.
//
// The harness owns the rest of a run: the fenced store
// (lockservice/fencedstore, fencing unless the design or the scenario turns
// it off), the lock client (lockservice/lockclient) and the workload it
// runs (scenarios/workload: acquire → fenced writes → read → release
// cycles), the faults and the checker. What the checker judges comes from the
// processes' Observer events, so a design's processes must report them:
//
//   - the service: EvGranted when it grants (Token unique per grant),
//     EvRenewed when it restarts a lease, EvEnded when a grant ends
//     (Reason "released" or "expired"). A service whose several nodes
//     report one decision sets Index to the log index of the entry that
//     decided it, so that the reports count as one grant or end; without
//     it, each report is a decision of its own (a grant reported again
//     while it is open excepted). A service that replicates a log may
//     also report EvElected and EvEntryApplied for S9 and S10;
//   - the client: EvCall and EvReturn for acquire, renew, release, write and
//     read, and EvBeliefEnd when it stops believing it holds the lock.
//     The harness's lock client (lockclient) reports these itself; a
//     design whose service speaks other messages keeps that client and
//     translates its requests with a Protocol (ClientProtocol).
//
// A design's processes must be deterministic (see internal/detlint): no
// goroutines, channels, machine clocks, global randomness or map order
// reaching behaviour; time, randomness and storage come from process.Env.
type Design interface {
	DesignShape
	// NewServer returns the process of service node i (an index into
	// Nodes). It is called at the node's boot and at every restart: a
	// restarted process keeps only what it synced to its disk.
	NewServer(i int, run DesignRun) process.Process
	// ClientProtocol returns the client side of the design's protocol for
	// one client process, or nil if the service speaks the reference's
	// messages (AcquireRequest, RenewRequest, ReleaseRequest, LockReply).
	// The harness runs the workload over its own lock client, which sends
	// its requests through the Protocol. cfg comes filled in: Servers are
	// the service's nodes, Observer the run's, and the run's planted bug
	// injected. Called at boot and at every restart.
	ClientProtocol(cfg ClientConfig, run DesignRun) Protocol
}

// DesignShape is what a plan needs of a design: its name, how the harness
// judges it, and its nodes' names — no processes, so that a plan is drawn
// and checked without linking them (scenarios/spec; the built-ins' shapes
// are lockservice/designs/shape's).
type DesignShape interface {
	// Info names the design and says how the harness must judge it.
	Info() DesignInfo
	// Nodes names the service's nodes for a scenario whose "replicas" field
	// is replicas (0 when absent), or says what to fix. Names must not be
	// "store" nor a client's.
	Nodes(replicas int) ([]string, error)
}

// DesignInfo describes a design to the harness.
type DesignInfo struct {
	// Name is what scenarios put in their "design" field (kebab-case).
	Name string
	// Description is one line for listings.
	Description string
	// UnfencedStore turns the store's fencing off for every run of the
	// design (StoreConfig.IgnoreTokens): for designs whose tokens a store
	// cannot order, or that demonstrate what fencing prevents.
	UnfencedStore bool
	// UnorderedTokens says the design's tokens are unique per grant but do
	// not grow with it (Redlock's random values). The checker's
	// properties compare tokens (S1, S3, S7, S8), so the harness renames
	// each token in the records to its grant's rank in true-time order (1
	// for the run's first grant); S1 then holds by construction and judges
	// nothing, while S3 and S8 judge what they mean: a write of an older
	// grant accepted after a newer grant's. Processes still see, send and
	// log the raw values.
	UnorderedTokens bool
	// ClientGrants says there is no service that decides: the design's
	// clients report EvGranted and EvEnded themselves, from their own
	// belief. The harness then ends a client's open grants when the client
	// restarts (its belief ended at the crash, which no process can
	// report).
	ClientGrants bool
	// Leader says the service elects a leader: the nemesis's "@leader"
	// selector then aims at the node whose process implements Leader,
	// claims to lead, and has the highest term. A scenario that aims at
	// @leader is refused for a design without one.
	Leader bool
	// SyncedDecisions says a service node reports each grant and lease end
	// right after syncing it to its own disk, without a replicated log
	// (the single node): such a decision is a fact only once that sync
	// completes, and a crash of the node before then takes it back (the
	// restarted node may issue the token again). The harness then holds
	// each EvGranted and EvEnded a node reports while its slow sync is in
	// flight as tentative until the sync ends. A replicated service's
	// decisions are facts once committed, whatever one replica's disk does.
	SyncedDecisions bool
	// ResourceTokens says the design counts tokens per resource (lockd's
	// fence counter per key), while the checker compares tokens across
	// resources (S1). The harness renames each (resource, token) to its
	// grant's rank in true-time order, as for UnorderedTokens, but the
	// store fences the raw tokens: S1 then judges tokens issued twice for
	// a resource, and S3 and S8 judge grant order.
	ResourceTokens bool
	// WallClockLeases says the service ends leases by a node's wall clock
	// (Redis expires a key at an absolute wall time): a wall jump on a
	// service node is then outside the lease model (L1 excuses it), as
	// that design's documentation says; fencing still holds.
	WallClockLeases bool
	// BackEnds counts the last nodes of Nodes that clients never address
	// (lockd's Redis): the clients' Servers are the nodes before them.
	// Faults reach them as any node.
	BackEnds int
}

// DesignRun is what a design's processes are built with for one run.
type DesignRun struct {
	// Servers are the service's nodes, in the order of Design.Nodes.
	Servers []process.NodeID
	// Store is the fenced store.
	Store process.NodeID
	// Limits bound what requests may ask for.
	Limits Limits
	// Observer records what the checker needs; processes report to it.
	Observer Observer
	// Mutant is the run's planted bug, "" for the reference.
	Mutant Mutant
	// IngressDepth bounds each server's requests in flight (0: the
	// design's default), for designs that shed load.
	IngressDepth int
	// GroupCommit runs the service's processes as the real runtime does,
	// for designs whose processes are process.Batchers: work deferred to
	// the end of each batch of queued events (one append and one fsync
	// for the batch). Designs without batching ignore it.
	GroupCommit bool
	// GroupCommitWindow, with GroupCommit, holds each batch's work that
	// long after its first event, so that later events join it (the
	// real runtime's batches gather what queues during an fsync). 0: the
	// end of the runtime's batch.
	GroupCommitWindow time.Duration
	// AsyncWrites syncs the service's writes in the background where its
	// design can (the reference's replicas: reference.ReplicaConfig.
	// AsyncWrites). Designs without it ignore it.
	AsyncWrites bool
	// Marks counts the protocol corners the run reaches (package
	// coverage): the harness hands every run its own; a design's processes
	// may hit marks in it or ignore it. nil counts nothing.
	Marks *coverage.Counts
	// TokenOffset is where the service's fencing tokens start (0: at 1),
	// for designs whose tokens are numbers they issue in order (the
	// reference adds it to the granting log index). Designs that cannot
	// offset their tokens ignore it.
	TokenOffset uint64
	// SnapshotEntries and SnapshotBytes, when either is set, make the
	// servers snapshot their state and compact their logs after that many
	// entries or bytes of commands (small, in a simulation, so that
	// snapshots, compaction and snapshot transfer happen under the run's
	// faults); 0 and 0: the design's defaults. Designs without a log
	// ignore them.
	SnapshotEntries, SnapshotBytes uint64
	// Buggify are protocol knobs drawn away from the design's defaults
	// (zero fields keep them); designs without the knob ignore it.
	Buggify Buggify
}

// Buggify are protocol knobs that production leaves at safe defaults and a
// simulation draws small or tight, so that the paths they guard become
// common in the search (FoundationDB's BUGGIFY): a lagging follower caught
// up a few entries at a time behind a full window of appends, elections
// that follow heartbeats closely. None of them may make a correct service
// unsafe; a zero field is the design's default.
type Buggify struct {
	// AppendEntries caps the entries in one Raft append (1..64).
	AppendEntries int `json:"append_entries,omitempty"`
	// Inflight caps the Raft appends in flight to one follower (1..32).
	Inflight int `json:"inflight,omitempty"`
	// ElectionTicks and HeartbeatTicks are Raft's election timeout and
	// heartbeat interval in ticks (set both, election > heartbeat).
	ElectionTicks  int `json:"election_ticks,omitempty"`
	HeartbeatTicks int `json:"heartbeat_ticks,omitempty"`
}

// Leader is implemented by the processes of a service that elects a
// leader (Replica does), for the nemesis's "@leader" selector.
type Leader interface {
	// IsLeader reports whether the process believes it leads, and its term.
	IsLeader() (leads bool, term uint64)
}

// Mutant names a planted bug: values for the reference's injection points
// (lockservice/reference's variant.go), so the harness can prove it
// catches the bugs real lock services have shipped. The zero value is the
// reference. The catalogue and the injections are lockservice/mutants':
// every component of a run is built with the same Mutant's injections
// (mutants.Inject*), which touch only the components the bug concerns.
type Mutant string

// NumberedNodes returns n1…nN: the node names of a design whose nodes are
// alike (the reference's replicas, Redlock's independent nodes), which the
// nemesis's "@replica:N" selector counts.
func NumberedNodes(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}
