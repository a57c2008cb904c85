package reference

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/process"
)

// ReplicaConfig configures one replica of the replicated lock service.
type ReplicaConfig struct {
	// Peers are every replica of the group, this one included (3 or 5).
	Peers []process.NodeID
	// TickInterval is the Raft tick on the replica's monotonic clock.
	TickInterval time.Duration
	// ElectionTick and HeartbeatTick are in ticks (see raft.Config).
	ElectionTick, HeartbeatTick int
	// MaxAppendEntries and MaxInflight cap the entries per Raft append and
	// the appends in flight per follower (raft.Config.MaxEntriesPerMsg and
	// MaxInflightMsgs; 0: Raft's defaults, 64 and 32).
	MaxAppendEntries, MaxInflight int
	// IngressDepth bounds the client requests a replica has proposed and
	// not yet answered; beyond it acquires are shed at once as Overloaded,
	// and beyond twice it renewals and releases too (holders first: see
	// Replica.shed).
	IngressDepth int
	Limits       lockservice.Limits
	Observer     lockservice.Observer
	// Marks counts the protocol corners the replica and its Raft node
	// reach (package coverage); nil counts nothing.
	Marks *coverage.Counts
	// TokenOffset is added to the granting entry's log index to make its
	// fencing token, so that a run can start its tokens near an integer
	// boundary (2^31, 2^32, 2^53, 2^63) and show that every component
	// carries them as uint64. It is part of the group's identity: every
	// replica of a group, and every restart, must use the same offset.
	TokenOffset uint64
	// WaitQueueDepth bounds the acquires parked at the leader per
	// resource, WaitQueueTotal over all resources (waitqueue.go); beyond
	// them a waiting acquire is proposed at once. 0: no wait queue.
	WaitQueueDepth, WaitQueueTotal int

	// The injection points (variant.go); the zero values are the reference.

	// Quorum is Raft's quorum for n voters (raft.Config.Quorum). nil: a
	// majority.
	Quorum func(n int) int
	// Table: the lock table's rules.
	Table TableRules
	// Tokens is where grants' tokens come from. nil: the granting entry's
	// log index.
	Tokens TokenSource
	// LeaseTimers time the leader's leases. nil: one timer per lease on
	// the monotonic clock.
	LeaseTimers LeaseTimers
	// Grants lets the leader decide part of an acquire outside the log.
	// nil: the log decides.
	Grants GrantRule
	// Predict answers an acquire the leader has just proposed at index,
	// before it commits, from the leader's applied table (false: no early
	// answer). nil: a client is answered only once its entry applies.
	Predict func(t *LockTable, c Command, index uint64) (lockservice.LockReply, bool)
	// GroupCommit defers the work of each event's Ready (persist, sync,
	// send, apply) to the end of the runtime's batch of queued events
	// (process.Batcher): proposals and appends that arrive while a sync is
	// in flight go out in one append and one fsync. The real runtime's
	// executor runs events in batches; the simulator ends a batch when its
	// next event is not another of the node's at the same instant (the
	// swarm draws GroupCommit for half of its seeds).
	GroupCommit bool
	// GroupCommitWindow, with GroupCommit, holds a batch's Raft work
	// until this long after the first event that left some, so that
	// events arriving within it share one append and one fsync: the real
	// runtime's batches gather the events that queue while the previous
	// batch's fsync runs, which the simulator's instants alone do not. A
	// deferral only delays appends, syncs and answers, never reorders
	// them. 0: the work is done at the end of the runtime's batch.
	GroupCommitWindow time.Duration
	// UnsafeNoFsync writes term, vote and log but does not sync them
	// before the messages that depend on them (etcd's --unsafe-no-fsync).
	UnsafeNoFsync bool
	// SendBeforeSync sends each Ready's messages (votes, append acks)
	// before persisting and syncing the state they promise, instead of
	// after: a crash during the sync takes back a vote or an entry
	// another replica has already counted.
	SendBeforeSync bool
	// AsyncWrites syncs each Ready in the background (etcd raft's
	// AsyncStorageWrites) when the disk can (process.SyncNotifier): the
	// replica goes on stepping messages, proposing and applying while a
	// sync runs, and its votes and acknowledgements wait for the syncs
	// of their Ready and of every Ready before it. A leader then counts
	// its own entries once its sync reports them, and a replica applies
	// only entries its own disk holds durably. It is what lets a leader's
	// fsync overlap its followers' acknowledgements instead of holding
	// them up (the real node turns it on; the swarm draws it).
	AsyncWrites bool

	// SnapshotEntries and SnapshotBytes trigger a snapshot (snapshot.go):
	// once that many entries, or that many bytes of commands, were applied
	// since the last one, the replica snapshots its lock table and drops
	// the log the snapshot covers, so that its disk, its memory and its
	// restart time are bounded by the thresholds, not by its history. 0
	// turns a trigger off; both 0: no snapshots, the log grows for ever.
	SnapshotEntries, SnapshotBytes uint64
	// SnapshotKeep is how many entries before its snapshot a replica keeps
	// in memory, so that a follower just behind catches up by appends
	// rather than by the whole snapshot.
	SnapshotKeep uint64
	// SegmentEntries is how many entries one log segment on disk holds
	// (0: 4096). A snapshot lets a segment go once it covers all of it,
	// so small segments (as the simulator draws) let the disk shrink
	// after every snapshot. It is part of the disk's format: a data
	// directory must always be opened with the same value.
	SegmentEntries uint64
}

// DefaultReplicaConfig: 10 ms ticks, elections after 100–200 ms of
// silence, heartbeats every 20 ms, 64 requests in flight per replica, 256
// acquires waiting per resource and 4096 in all, and a snapshot every
// DefaultSnapshotEntries entries or DefaultSnapshotBytes bytes of
// commands, keeping DefaultSnapshotKeep entries before it in memory.
func DefaultReplicaConfig(peers []process.NodeID) ReplicaConfig {
	return ReplicaConfig{Peers: peers, TickInterval: 10 * time.Millisecond, ElectionTick: 10, HeartbeatTick: 2,
		IngressDepth: 64, WaitQueueDepth: 256, WaitQueueTotal: 4096, Limits: lockservice.DefaultLimits(),
		SnapshotEntries: DefaultSnapshotEntries, SnapshotBytes: DefaultSnapshotBytes, SnapshotKeep: DefaultSnapshotKeep}
}

// The snapshot defaults, for a long-running service: a restart replays at
// most 20,000 entries (a few milliseconds) after loading a snapshot of the
// lock table, a snapshot costs one encoding of the table per 20,000
// commands, and a follower up to 2,000 entries behind catches up by
// appends.
const (
	DefaultSnapshotEntries = 20_000
	DefaultSnapshotBytes   = 8 << 20
	DefaultSnapshotKeep    = 2_000
)

// RaftMessage carries a Raft message between replicas.
type RaftMessage struct{ M raft.Message }

// Fingerprint folds the message's header into the trace hash.
func (m RaftMessage) Fingerprint() uint64 {
	r := m.M
	var last uint64
	if n := len(r.Entries); n > 0 {
		last = r.Entries[n-1].Index<<20 | r.Entries[n-1].Term
	}
	var rej uint64
	if r.Reject {
		rej = 1 << 63
	}
	if r.Transfer {
		rej |= 1 << 62 // zero unless a leadership transfer: old traces keep their hash
	}
	if s := r.Snapshot; s != nil {
		rej |= 1 << 61
		last ^= s.Index<<20 | s.Term
	}
	return fold(9, uint64(r.Type)<<56|uint64(r.From)<<28|uint64(r.To), r.Term<<32|r.LogTerm, r.Index^r.Commit<<32, last^rej^uint64(len(r.Entries))<<40)
}

// waiter is a client to answer once the entry at its index applies.
type waiter struct {
	to      process.NodeID
	client  string
	request uint64
	waited  time.Duration // in the wait queue, on this replica's clock
	// next: the waiter a release hands the lock to (Command.Next),
	// answered with its acquire's reply.
	next bool
}

// leaderLease is a lease the leader times (ReplicaConfig.LeaseTimers):
// when it is due the leader proposes CmdExpire.
type leaderLease struct {
	token, since uint64
}

// Replica is one member of the replicated lock service. Lock commands go
// through the Raft log; the fencing token of a grant is the log index of the
// committed entry that granted it, so it grows with the log and is never
// reissued, across crashes and leader changes. Answers go out only after
// the entry commits and applies. Leases are timed by the leader's monotonic
// clock alone: it proposes CmdExpire when its timer fires, and a new leader
// restarts every lease at its full TTL (it may extend a lease, never
// shorten it). An acquire that may wait (AcquireRequest.Wait) for a lock
// held by another client waits at the leader, outside the log, and is
// proposed when the lease ends or its wait passes (waitqueue.go).
type Replica struct {
	cfg  ReplicaConfig
	env  process.Env
	node *raft.Node

	table   *LockTable
	started map[string]uint64 // resource → index of the grant/renewal that started its current lease (while leased)
	applied uint64

	log           diskLog        // the persisted log's segments
	persistedHard raft.HardState // the hard state last written
	names         nameTable      // resource and client names of applied commands
	// hsBuf is reused to encode the hard state (the disk keeps its own
	// copy), so that persisting allocates nothing.
	hsBuf     [3*binary.MaxVarintLen64 + 1]byte
	hardState record.Slotted
	pending   map[uint64][]waiter // by log index, leader only
	inflight  int                 // client proposals not yet applied
	leases    map[string]leaderLease
	// decided: index → term of the acquires this process, leading,
	// granted itself (LeaderGrants), until they apply. Only this process
	// knows: the log does not say so.
	decided map[uint64]uint64
	timers  LeaseTimers
	leader  bool
	// ledTerm is the last term this process reported winning (EvElected).
	ledTerm uint64
	clock   raftClock
	// lastGrant is the token of the last grant applied, for the token
	// boundary marks.
	lastGrant uint64
	// votedAt and appendedAt are when the replica last persisted a vote
	// and log entries (its monotonic clock; 0: never), recorded only when
	// coverage marks are counted (LastPersist).
	votedAt, appendedAt time.Duration
	// batched counts the events of the current batch that left Raft work
	// (GroupCommit).
	batched int
	// dirty: an event of the current batch left Raft work for EndBatch
	// (GroupCommit).
	dirty bool
	// windowOpen: a GroupCommitWindow is running, and its timer will do
	// the batch's work.
	windowOpen bool
	// flushWindowFn is the window timer's callback, made once.
	flushWindowFn func()
	// syncing are the Readys written and not yet known durable
	// (AsyncWrites), oldest first; syncSeq numbers them.
	syncing []heldSync
	syncSeq uint64
	// asyncWrites: this process syncs in the background (async), decided
	// once at Start rather than by a type assertion every Ready.
	asyncWrites bool

	// snapshot is the slotted record of the newest snapshot; sinceSnap
	// and sinceSnapBytes count the entries and command bytes applied since
	// it (snapshot.go). snapshotAt is when the replica last wrote one (its
	// monotonic clock; 0: not since it started).
	snapshot                  record.Slotted
	sinceSnap, sinceSnapBytes uint64
	snapshotAt                time.Duration
	// compactTo is the index of a snapshot whose segments wait to be
	// deleted with the next Ready's writes (0: none).
	compactTo uint64
	// loadedSnap and loadedEntries are what Start loaded: the snapshot's
	// index and the log entries after it (Loaded).
	loadedSnap    uint64
	loadedEntries int

	// The wait queue (waitqueue.go), leader only: parked acquires by
	// resource, oldest first; how many in all; the index of the acquire
	// promoted from each queue, or of the end handing it over, until it
	// applies; the resources whose lease ended in the entries being
	// applied.
	parked    map[string][]*parkedAcquire
	parkedN   int
	promoting map[string]promotion
	freed     []string
}

// NewReplica returns a replica process; every restart needs a new one.
func NewReplica(cfg ReplicaConfig) *Replica {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	return &Replica{cfg: cfg}
}

const hardStateKey = "raft/hardstate"

// Start loads term, vote and log from disk, rebuilds the lock table by
// replaying the committed log, and starts Raft's clock.
func (r *Replica) Start(env process.Env) {
	r.env = env
	r.table = NewLockTable()
	r.started = map[string]uint64{}
	r.pending = map[uint64][]waiter{}
	r.leases = map[string]leaderLease{}
	r.decided = map[uint64]uint64{}
	r.parked = map[string][]*parkedAcquire{}
	r.promoting = map[string]promotion{}
	r.timers = r.cfg.LeaseTimers
	if r.timers == nil {
		r.timers = monotonicTimers{}
	}
	r.table.Rules = r.cfg.Table
	r.lastGrant = r.cfg.TokenOffset // tokens start above it: only a crossing in the run is marked
	var hs raft.HardState
	r.hardState = record.Slotted{Key: hardStateKey}
	if b, ok := r.hardState.Load(env.Disk()); ok {
		var err error
		if hs, err = decodeHardState(b); err != nil {
			panic(fmt.Sprintf("lockservice: sealed raft hard state does not decode: %v", err))
		}
	}
	snap := r.loadSnapshot(env.Disk())
	if hs.Term < snap.Term {
		// The hard state written with the snapshot was lost while the
		// snapshot survived: the term is at least the snapshot's.
		hs = raft.HardState{Term: snap.Term, Commit: hs.Commit}
	}
	entries, dlog := loadLog(env.Disk(), cmp.Or(r.cfg.SegmentEntries, segmentEntries), snap)
	if dlog.cut {
		r.cfg.Marks.Hit(coverage.ReplicaLogTailCut)
	}
	if dlog.segmentsLeft {
		r.cfg.Marks.Hit(coverage.ReplicaSnapshotSegmentsLeft)
	}
	if dlog.mismatch {
		r.cfg.Marks.Hit(coverage.ReplicaSnapshotLogMismatch)
	}
	loaded := len(entries)
	entries = dlog.keepTerms(env.Disk(), entries, hs.Term)
	if len(entries) < loaded {
		r.cfg.Marks.Hit(coverage.ReplicaLogTermCut)
	}
	r.log = dlog
	r.persistedHard = hs
	r.loadedSnap, r.loadedEntries = snap.Index, len(entries)
	peers := make([]raft.ID, len(r.cfg.Peers))
	for i, p := range r.cfg.Peers {
		peers[i] = raftID(p)
	}
	r.asyncWrites = r.async()
	rc := raft.Config{
		ID: raftID(env.ID()), Peers: peers, ElectionTick: r.cfg.ElectionTick, HeartbeatTick: r.cfg.HeartbeatTick,
		Rand: env.Rand(), PreVote: true, CheckQuorum: true, HardState: hs, Snapshot: snap, Entries: entries, Quorum: r.cfg.Quorum,
		Marks: r.cfg.Marks, MaxEntriesPerMsg: r.cfg.MaxAppendEntries, MaxInflightMsgs: r.cfg.MaxInflight,
		AsyncStorageWrites: r.asyncWrites,
	}
	if len(entries) > 0 {
		r.cfg.Marks.Hit(coverage.ReplicaRestartReplay)
	}
	if !snap.IsEmpty() {
		r.cfg.Marks.Hit(coverage.ReplicaRestartFromSnapshot)
	}
	node, err := raft.New(rc)
	if err != nil {
		panic(fmt.Sprintf("lockservice: replica %s: %v", env.Name(), err))
	}
	r.node = node
	env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.start", slog.Uint64("term", hs.Term), slog.Uint64("commit", hs.Commit),
		slog.Uint64("snapshot", snap.Index), slog.Int("log", len(entries)))
	r.flush()
	r.startClock()
}

// raftID maps a node to a Raft id (Raft reserves 0 for "none").
func raftID(id process.NodeID) raft.ID { return raft.ID(id) + 1 }
func nodeID(id raft.ID) process.NodeID { return process.NodeID(id) - 1 }

// Receive handles Raft traffic and client requests.
func (r *Replica) Receive(env process.Env, from process.NodeID, msg process.Message) {
	switch m := msg.(type) {
	case RaftMessage:
		if err := checkEntries(m.M); err != nil {
			// Wire input is untrusted: an entry this replica could not
			// apply must not reach its log (it would fail every restart).
			env.Log().Warn("replica.bad-raft-message", slog.String("err", err.Error()))
			return
		}
		r.catchUp() // Step reads the election count (the leader lease)
		if err := r.node.Step(m.M); err != nil {
			env.Log().Warn("replica.bad-raft-message", slog.String("err", err.Error()))
		}
		r.flushSoon()
	case lockservice.AcquireRequest:
		if err := r.cfg.Limits.CheckAcquire(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		r.acquire(from, m)
	case lockservice.RenewRequest:
		if err := r.cfg.Limits.CheckRenew(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		r.serve(from, m.Client, m.Request, Command{Kind: CmdRenew, Resource: m.Resource, Client: m.Client, TTL: m.TTL, Token: m.Token, Request: m.Request})
	case lockservice.ReleaseRequest:
		if err := r.cfg.Limits.CheckRelease(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		r.serve(from, m.Client, m.Request, Command{Kind: CmdRelease, Resource: m.Resource, Client: m.Client, Token: m.Token, Request: m.Request, RequestID: m.RequestID})
	default:
		env.Log().Warn("replica.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// serve answers a client request: a redirect from a follower, a replay from
// the dedup table, an Overloaded shed at the ingress bound, or a proposal
// answered once it applies.
func (r *Replica) serve(from process.NodeID, client string, request uint64, c Command) {
	env := r.env
	if r.node.Role() != raft.Leader {
		lead := lockservice.NoLeader
		if l := r.node.Lead(); l != 0 {
			lead = nodeID(l)
		}
		env.Send(from, lockservice.LockReply{Request: request, Status: lockservice.NotLeader, Leader: lead})
		return
	}
	if rep, ok := r.table.Seen(client, request); ok && r.table.replays(c.Kind) {
		env.Send(from, rep) // applied already: a retry or a duplicate
		return
	}
	if r.shed(c.Kind) {
		r.cfg.Marks.Hit(coverage.ReplicaShed)
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.shed", slog.String("client", client), slog.Uint64("req", request), slog.Int("inflight", r.inflight))
		env.Send(from, lockservice.LockReply{Request: request, Status: lockservice.Overloaded})
		return
	}
	index, ok := r.propose(from, client, request, c, 0)
	if !ok {
		return
	}
	r.flushSoon()
	if r.cfg.Predict != nil && c.Kind == CmdAcquire {
		if rep, ok := r.cfg.Predict(r.table, c, index); ok {
			env.Send(from, rep)
		}
	}
}

// shed says whether a request of kind k is shed at the ingress bound.
// Holders come first: a renewal or a release is shed only at twice the
// bound, an acquire at the bound. A holder's request shed keeps a lock
// held that its holder is done with, or takes the lease of a holder at
// work, and either prolongs the contention that filled the bound: under a
// bound of one request and a group-commit window of a few ms, a holder's
// release lost the one slot to the waiters' retried acquires again and
// again, for seconds (swarm seeds 129217, 158223 and 172132 at
// fencesim-0.15 failed liveness so). Twice the bound keeps it a bound: a
// flood of renewals and releases is shed too.
func (r *Replica) shed(k CommandKind) bool {
	bound := r.cfg.IngressDepth
	if k == CmdAcquire {
		return r.inflight >= bound
	}
	if r.inflight >= bound && r.inflight < 2*bound {
		r.cfg.Marks.Hit(coverage.ReplicaHolderFirst)
	}
	return r.inflight >= 2*bound
}

// propose proposes c for the client at from, to be answered when it
// applies, and reports its index; if the replica cannot propose, it
// answers NotLeader and reports false. waited is how long c waited in the
// wait queue (LockReply.Waited). The caller flushes.
func (r *Replica) propose(from process.NodeID, client string, request uint64, c Command, waited time.Duration) (uint64, bool) {
	env := r.env
	decision := LogDecides
	if c.Kind == CmdAcquire {
		decision = r.stampAcquire(&c)
	}
	if decision == LeaderExpires {
		r.expireHolder(c)
	}
	next := r.handOver(&c) // a release may carry the head waiter's acquire
	index, term, err := r.node.Propose(encodeCommand(c))
	if err != nil {
		lead := lockservice.NoLeader
		if errors.Is(err, raft.ErrTransferring) {
			// Point the client at the next leader: it takes over within a
			// round trip or two, sooner than a client told "no leader"
			// would come back.
			lead = nodeID(r.node.LeadTransferee())
		}
		env.Send(from, lockservice.LockReply{Request: request, Status: lockservice.NotLeader, Leader: lead})
		return 0, false
	}
	if decision == LeaderGrants {
		r.decided[index] = term
	}
	r.inflight++
	r.pending[index] = append(r.pending[index], waiter{to: from, client: client, request: request, waited: waited})
	if next != nil {
		r.handing(next, index)
	}
	return index, true
}

// stampAcquire fills in what the leader decides of an acquire when it
// proposes it, and says who decides the grant: nothing and the log in the
// reference, which proposes an acquire as the client sent it.
func (r *Replica) stampAcquire(c *Command) GrantDecision {
	if r.cfg.Tokens != nil {
		c.Token = r.cfg.Tokens.Stamp(r.env)
	}
	if r.cfg.Grants == nil {
		return LogDecides
	}
	return r.cfg.Grants.Decide(r.env, r.table, *c)
}

// expireHolder proposes the expiry of another client's lease on c's
// resource, as the leader's applied table has it (LeaderExpires).
func (r *Replica) expireHolder(c Command) {
	if l, held := r.table.Lease(c.Resource); held && l.Holder != c.Client {
		if _, _, err := r.node.Propose(encodeCommand(Command{Kind: CmdExpire, Resource: c.Resource, Token: l.Token, Since: r.started[c.Resource]})); err == nil {
			r.flushSoon()
		}
	}
}

// flush carries out every Ready: persist term, vote and entries and sync
// them, then send the messages that depend on them, then apply what
// committed; then it promotes the waiters of the leases that ended, whose
// proposals make a Ready of their own.
func (r *Replica) flush() {
	for {
		for r.node.HasReady() {
			rd := r.node.Ready()
			switch {
			case r.asyncWrites:
				r.persistAsync(rd)
			case !rd.MustSync:
				r.send(rd.Messages, allMessages)
			case r.cfg.SendBeforeSync:
				r.send(rd.Messages, allMessages)
				r.persist(rd)
			default:
				// A leader's appends leave before its own sync, which then
				// overlaps its followers' (the Raft thesis, 10.2.1): they
				// promise nothing of this Ready's writes (its term was
				// synced before it asked for votes), and it counts itself
				// towards a quorum only for entries synced (raft: after
				// Advance). Votes and acknowledgements wait for the sync.
				r.send(rd.Messages, leaderMessages)
				r.persist(rd)
				r.send(rd.Messages, promisingMessages)
			}
			if !rd.Snapshot.IsEmpty() {
				r.restoreState(rd.Snapshot)
			}
			for _, e := range rd.CommittedEntries {
				r.apply(e)
			}
			r.node.Advance()
			r.leadership(r.node.Role() == raft.Leader)
			r.maybeSnapshot()
		}
		if len(r.freed) == 0 {
			break
		}
		r.promoteFreed()
	}
	r.rearm(false)
}

// messageSet selects some of a Ready's messages (Replica.send).
type messageSet int

const (
	allMessages messageSet = iota
	// leaderMessages are those only a leader sends (appends, heartbeats,
	// snapshots), which promise nothing of the Ready's writes.
	leaderMessages
	// promisingMessages are the others: votes and acknowledgements (and
	// a leadership transfer's MsgTimeoutNow, sent after the sync too).
	promisingMessages
)

// send sends the messages of msgs in set, in order.
func (r *Replica) send(msgs []raft.Message, set messageSet) {
	for _, m := range msgs {
		leader := m.Type == raft.MsgApp || m.Type == raft.MsgHeartbeat || m.Type == raft.MsgSnap
		if set == allMessages || leader == (set == leaderMessages) {
			r.env.Send(nodeID(m.To), RaftMessage{M: m})
		}
	}
}

// flushSoon flushes now, or at the end of the runtime's batch of events
// with GroupCommit.
func (r *Replica) flushSoon() {
	if r.cfg.GroupCommit {
		r.dirty = true
		r.batched++
		return
	}
	r.flush()
}

// EndBatch implements process.Batcher: with GroupCommit, the Raft work
// the batch's events left is done here, in one Ready.
func (r *Replica) EndBatch(process.Env) {
	if !r.dirty || r.windowOpen {
		return
	}
	if w := r.cfg.GroupCommitWindow; w > 0 {
		r.windowOpen = true
		if r.flushWindowFn == nil {
			r.flushWindowFn = r.flushWindow
		}
		r.env.Clock().AfterFunc(w, r.flushWindowFn)
		return
	}
	r.flushBatch()
}

// flushWindow ends a GroupCommitWindow: the batch's work is done now.
func (r *Replica) flushWindow() {
	r.windowOpen = false
	if r.dirty {
		if r.batched > 1 {
			r.cfg.Marks.Hit(coverage.ReplicaGroupCommitWindow)
		}
		r.flushBatch()
	}
}

// flushBatch does the Raft work the batch's events left, in one Ready.
func (r *Replica) flushBatch() {
	if r.batched > 1 {
		r.cfg.Marks.Hit(coverage.ReplicaGroupCommit)
	}
	r.dirty, r.batched = false, 0
	r.flush()
}

// elected reports a won election once per term and process; a restarted
// process that leads the same term again (which Raft forbids) reports it
// again, and S9 reports that.
func (r *Replica) elected() {
	if term := r.node.Term(); term != r.ledTerm {
		r.ledTerm = term
		r.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvElected, Node: r.env.Name(), Term: term})
	}
}

func (r *Replica) persist(rd raft.Ready) {
	voted := r.write(rd)
	if !r.cfg.UnsafeNoFsync {
		r.env.Disk().Sync()
	}
	r.persisted(rd.HardState.Term, voted, lastEntry(rd.Entries))
}

// lastEntry returns the last of ents (zero: none).
func lastEntry(ents []raft.Entry) raft.Entry {
	if len(ents) == 0 {
		return raft.Entry{}
	}
	return ents[len(ents)-1]
}

// write writes a Ready's snapshot, log entries and hard state, unsynced,
// and reports whether the hard state holds a new vote for another replica.
func (r *Replica) write(rd raft.Ready) (voted bool) {
	d := r.env.Disk()
	if r.cfg.Marks != nil { // only the coverage marks need the instants
		now := r.env.Clock().Monotonic()
		if rd.HardState.Vote != raft.None && rd.HardState.Vote != r.persistedHard.Vote {
			r.votedAt = now
		}
		if len(rd.Entries) > 0 {
			r.appendedAt = now
		}
	}
	if !rd.Snapshot.IsEmpty() {
		r.installSnapshot(d, rd.Snapshot) // replaces the whole log
	}
	r.compactLog(d)
	r.log.append(d, rd.Entries) // may replace a conflicting suffix
	// A vote for another replica (a candidate's vote for itself is part of
	// its campaign).
	voted = rd.HardState.Vote != 0 && rd.HardState.Vote != raftID(r.env.ID()) &&
		(rd.HardState.Vote != r.persistedHard.Vote || rd.HardState.Term != r.persistedHard.Term)
	if rd.HardState != r.persistedHard {
		r.hardState.Store(d, appendHardState(r.hsBuf[:0], rd.HardState))
		r.persistedHard = rd.HardState
	}
	return voted
}

// persisted reports a Ready's writes durable to the observer: the moments
// the nemesis aims crashes at, after the writes, before the messages that
// depend on them leave.
func (r *Replica) persisted(term uint64, voted bool, last raft.Entry) {
	if voted {
		r.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvVoted, Node: r.env.Name(), Term: term})
	}
	if last.Index > 0 && r.node.Role() != raft.Leader { // a follower's, from a leader
		r.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvAppended, Node: r.env.Name(), Index: last.Index, Term: last.Term})
	}
}

// async reports whether the replica syncs in the background
// (AsyncWrites, on a disk that can; never with the planted bugs that
// skip or reorder the sync, which have their own paths).
func (r *Replica) async() bool {
	if !r.cfg.AsyncWrites || r.cfg.UnsafeNoFsync || r.cfg.SendBeforeSync {
		return false
	}
	_, ok := r.env.Disk().(process.SyncNotifier)
	return ok
}

// heldSync is a Ready written and not yet known durable (AsyncWrites): the
// votes and acknowledgements that wait for it, and its entries' mark for
// Raft (zero: it wrote none).
type heldSync struct {
	seq  uint64
	done bool // its sync completed; it waits for an older one
	msgs []raft.Message
	mark raft.LogMark
}

// persistAsync is flush's path with AsyncWrites: a leader's appends leave
// at once; the Ready's writes are made and their sync started; the votes
// and acknowledgements wait until it, and every sync started before it,
// has completed (syncDone). A Ready with nothing to sync still sends its
// promising messages only after the syncs in flight: they may acknowledge
// entries those syncs carry (a duplicate append, a commit index).
func (r *Replica) persistAsync(rd raft.Ready) {
	r.send(rd.Messages, leaderMessages)
	if !rd.MustSync && len(r.syncing) == 0 {
		r.send(rd.Messages, promisingMessages)
		return
	}
	var h heldSync
	for _, m := range rd.Messages {
		if !(m.Type == raft.MsgApp || m.Type == raft.MsgHeartbeat || m.Type == raft.MsgSnap) {
			h.msgs = append(h.msgs, m) // a copy: Ready.Messages is reused
		}
	}
	if !rd.MustSync {
		last := &r.syncing[len(r.syncing)-1]
		last.msgs = append(last.msgs, h.msgs...)
		return
	}
	voted := r.write(rd)
	h.mark = rd.Mark
	r.syncSeq++
	h.seq = r.syncSeq
	if len(r.syncing) > 0 {
		r.cfg.Marks.Hit(coverage.ReplicaSyncOverlapped)
	}
	r.syncing = append(r.syncing, h)
	seq := h.seq
	synced := r.env.Disk().(process.SyncNotifier).SyncThen(func() { r.syncDone(seq, true) })
	// The moments the nemesis aims crashes at come with the writes, as
	// without AsyncWrites: a crash right after them stops their sync, and
	// the messages that depend on it never leave.
	r.persisted(rd.HardState.Term, voted, lastEntry(rd.Entries))
	if synced {
		r.syncDone(seq, false)
	}
}

// syncDone is told that the sync of Ready seq completed, and with it every
// earlier one (a disk completes syncs in order). It sends the messages
// that waited for them and tells Raft what is durable; from the disk's
// event (later), it then does the Raft work that follows, such as
// applying what committed.
func (r *Replica) syncDone(seq uint64, later bool) {
	for i := range r.syncing {
		if r.syncing[i].seq <= seq {
			r.syncing[i].done = true
		}
	}
	k := 0
	for k < len(r.syncing) && r.syncing[k].done {
		h := r.syncing[k]
		r.send(h.msgs, allMessages)
		if h.mark.Index > 0 {
			r.node.Persisted(h.mark)
		}
		k++
	}
	if k == 0 {
		return
	}
	clear(r.syncing[:k])
	r.syncing = append(r.syncing[:0], r.syncing[k:]...)
	if later {
		r.flushSoon()
	}
}

// leadership reacts to gaining or losing the lead.
func (r *Replica) leadership(leader bool) {
	if leader {
		r.elected() // also a new term led without a step down in between
	}
	if leader == r.leader && (leader || len(r.pending) == 0 && r.inflight == 0 && r.parkedN == 0) {
		return
	}
	// (Not leading, with requests still pending: this replica led and
	// stepped down within one batch of events — group commit flushes once
	// a batch — so it never saw itself lead; they are dropped all the
	// same, or they would hold its ingress bound for good.)
	r.leader = leader
	if leader {
		// Restart every lease at its full TTL: the new leader cannot know
		// how much of it the old one had measured.
		if len(r.table.Leases()) > 0 {
			r.cfg.Marks.Hit(coverage.ReplicaNewLeaderLeases)
		}
		for _, l := range r.table.Leases() {
			r.arm(l.Resource, l.Token, r.started[l.Resource], l.TTL)
		}
		r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.leader", slog.Uint64("term", r.node.Term()), slog.Int("leases", len(r.leases)))
		return
	}
	for _, res := range r.leaseResources() {
		r.disarm(res)
	}
	// Clients waiting on this replica retry elsewhere with the same ids.
	if len(r.pending) > 0 {
		r.cfg.Marks.Hit(coverage.ReplicaStepDownPending)
	}
	// Parked waiters are told at once to retry elsewhere.
	lead := lockservice.NoLeader
	if l := r.node.Lead(); l != raft.None {
		lead = nodeID(l)
	}
	r.dropParked(lead)
	clear(r.pending)
	if r.cfg.Grants != nil {
		r.cfg.Grants.StepDown()
	}
	r.inflight = 0
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.follower", slog.Uint64("term", r.node.Term()))
}

func (r *Replica) leaseResources() []string { return sortedKeys(r.leases) }

// apply applies one committed entry to the table, on every replica alike,
// and answers the waiting client if this replica is the one it asked.
func (r *Replica) apply(e raft.Entry) {
	if e.Index <= r.applied {
		return
	}
	r.applied = e.Index
	r.sinceSnap++
	r.sinceSnapBytes += uint64(len(e.Data))
	waiters := r.pending[e.Index]
	delete(r.pending, e.Index)
	if len(waiters) > 0 {
		r.inflight -= len(waiters)
	}
	r.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvEntryApplied, Node: r.env.Name(), Index: e.Index, Term: e.Term, Digest: CommandDigest(e.Data)})
	if e.Data == nil {
		return // a new leader's empty entry
	}
	c, err := decodeCommandNames(e.Data, &r.names)
	if err != nil {
		panic(err.Error())
	}
	var rep lockservice.LockReply
	replayed := false // an acquire's grant replayed from an earlier entry
	ended := false    // a release or an expiry that ended the lease
	obs := r.cfg.Observer
	switch c.Kind {
	case CmdAcquire:
		rep, replayed = r.applyAcquire(c, e)
	case CmdRenew:
		_, replay := r.table.Seen(c.Client, c.Request) // as for CmdAcquire
		rep = r.table.Renew(lockservice.RenewRequest{Resource: c.Resource, Client: c.Client, Token: c.Token, Request: c.Request, TTL: c.TTL}, 0)
		if rep.Status == lockservice.NotHolder && !replay {
			r.cfg.Marks.Hit(coverage.LockRenewAfterExpiry)
		}
		if rep.Status == lockservice.Renewed && !replay {
			obs.Observe(lockservice.Event{Kind: lockservice.EvRenewed, Resource: c.Resource, Client: c.Client, Token: c.Token, Request: c.Request})
			r.started[c.Resource] = e.Index
			if r.leader {
				r.arm(c.Resource, rep.Token, e.Index, rep.TTL)
			}
		}
	case CmdRelease:
		var l *Lease
		rep, l = r.table.Release(lockservice.ReleaseRequest{Resource: c.Resource, Client: c.Client, Token: c.Token, Request: c.Request})
		if cur, held := r.table.Lease(c.Resource); l == nil && held && cur.Token > c.Token {
			r.cfg.Marks.Hit(coverage.LockReleaseAfterRegrant)
		}
		if l != nil {
			obs.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: c.Resource, Client: l.Holder, Token: l.Token, Reason: "released", Index: e.Index, RequestID: c.RequestID})
			r.leaseGone(c.Resource)
			ended = true
		}
	case CmdExpire:
		if r.started[c.Resource] == c.Since {
			if l, ok := r.table.ExpireToken(c.Resource, c.Token); ok {
				obs.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: c.Resource, Client: l.Holder, Token: l.Token, Reason: "expired", Index: e.Index})
				r.leaseGone(c.Resource)
				ended = true
			}
		}
		if !ended {
			r.cfg.Marks.Hit(coverage.LockExpireRaced)
		}
	default:
		panic(fmt.Sprintf("lockservice: unknown command kind %d at index %d", c.Kind, e.Index))
	}
	// The hand-over (waitqueue.go): the carried acquire is applied only
	// if this entry's own end freed the resource.
	next, hands := c.next()
	var nrep lockservice.LockReply
	nreplayed, handed := false, false
	if hands {
		if _, held := r.table.Lease(c.Resource); ended && !held {
			nrep, nreplayed = r.applyAcquire(next, e)
			handed = true
			r.cfg.Marks.Hit(coverage.ReplicaHandOver)
		}
	}
	if r.leader {
		r.promotionApplied(c.Resource, e.Index, handed)
		if c.Kind == CmdAcquire {
			r.answerParked(c, rep)
		}
		if handed {
			r.answerParked(next, nrep)
		}
	}
	for _, w := range waiters {
		switch {
		case w.next:
			if handed { // else parked again (promotionApplied)
				r.answer(w, nrep, nreplayed)
			}
		case w.client == c.Client && w.request == c.Request:
			r.answer(w, rep, replayed)
		}
	}
}

// applyAcquire applies an acquire at entry e — its own entry, or the
// release that hands the resource to it — and returns its reply
// and whether that replays an earlier entry's grant.
func (r *Replica) applyAcquire(c Command, e raft.Entry) (lockservice.LockReply, bool) {
	// A second entry of a request (a copy proposed while the first was
	// in flight) only replays its reply: it must not restart the lease,
	// nor re-arm a timer on a resource that may have changed hands.
	// So does a keyed acquire whose key the table remembers (the
	// same attempt submitted again under another request number).
	acq := lockservice.AcquireRequest{Resource: c.Resource, Client: c.Client, TTL: c.TTL, Request: c.Request, Key: c.Key}
	seen, replay := r.table.SeenAcquire(acq)
	replay = replay && r.table.replays(CmdAcquire)
	if replay {
		r.cfg.Marks.Hit(coverage.ReplicaDuplicateEntry)
		if _, byNumber := r.table.Seen(c.Client, c.Request); c.Key != "" && !byNumber {
			r.cfg.Marks.Hit(coverage.FrontendDedupHit) // the key's memory, not the number's
		}
	}
	token := e.Index + r.cfg.TokenOffset
	if r.cfg.Tokens != nil {
		token = r.cfg.Tokens.Token(c.Token, e.Index)
	}
	if term, ok := r.decided[e.Index]; ok {
		delete(r.decided, e.Index)
		if term == e.Term && !replay && !r.table.stale(c.Client, c.Request) {
			r.takeOver(c)
		}
	}
	prev, held := r.table.Lease(c.Resource)
	rep := seen
	if !replay {
		rep = r.table.acquireUnseen(acq, 0, token)
	}
	if rep.Status == lockservice.Granted && !replay {
		if !held || prev.Token != rep.Token { // not the holder's own grant standing
			r.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvGranted, Resource: c.Resource, Client: c.Client, Token: rep.Token, Index: e.Index, Request: c.Request, RequestID: c.Key})
			r.markToken(rep.Token)
		} else {
			r.cfg.Marks.Hit(coverage.LockHolderReacquired)
		}
		r.started[c.Resource] = e.Index
		if r.leader {
			r.arm(c.Resource, rep.Token, e.Index, c.TTL)
		}
	}
	if r.cfg.Grants != nil && r.leader && !replay {
		r.cfg.Grants.Applied(r.env, c, rep)
	}
	return rep, replay
}

// leaseGone drops what the replica keeps of a lease an entry ended.
func (r *Replica) leaseGone(resource string) {
	delete(r.started, resource) // kept only while leased: it is in every snapshot
	r.disarm(resource)
	r.leaseEnded(resource)
}

// answer sends w the reply to its request.
func (r *Replica) answer(w waiter, rep lockservice.LockReply, replayed bool) {
	if rep.Status == lockservice.Granted && !replayed {
		// This answer's, not the table's; a replayed grant began with an
		// earlier entry, maybe before this copy's wait ended, so it
		// claims none.
		rep.Waited = w.waited
	}
	r.env.Send(w.to, rep)
}

// tokenBoundaries are the integer boundaries a token crossing is marked at.
var tokenBoundaries = [...]struct {
	at   uint64
	mark coverage.Mark
}{{1 << 31, coverage.TokenCross2p31}, {1 << 32, coverage.TokenCross2p32}, {1 << 53, coverage.TokenCross2p53}, {1 << 63, coverage.TokenCross2p63}}

// markToken marks a grant whose token crossed an integer boundary since
// the replica's last grant (package coverage).
func (r *Replica) markToken(token uint64) {
	if r.cfg.Marks == nil {
		return
	}
	for _, b := range tokenBoundaries {
		if token >= b.at && r.lastGrant < b.at {
			r.cfg.Marks.Hit(b.mark)
		}
	}
	r.lastGrant = token
}

// takeOver silently ends another client's lease on c's resource before
// c's acquire is applied, on the replica whose GrantRule decided the grant
// outside the log (LeaderGrants).
func (r *Replica) takeOver(c Command) {
	l, held := r.table.Lease(c.Resource)
	if !held || l.Holder == c.Client {
		return
	}
	r.table.ExpireToken(c.Resource, l.Token)
	r.disarm(c.Resource)
}

// arm (re)starts the leader's timer for the lease started at index since.
func (r *Replica) arm(resource string, token, since uint64, ttl time.Duration) {
	r.disarm(resource)
	r.timers.Arm(r.env, resource, ttl, func() { r.leaseDue(resource, token, since) })
	r.leases[resource] = leaderLease{token: token, since: since}
}

// leaseDue proposes the end of the lease the leader timed.
func (r *Replica) leaseDue(resource string, token, since uint64) {
	delete(r.leases, resource)
	if r.node.Role() != raft.Leader {
		return
	}
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.lease-due", slog.String("resource", resource), slog.Uint64("token", token))
	_, _, err := r.node.Propose(encodeCommand(Command{Kind: CmdExpire, Resource: resource, Token: token, Since: since}))
	switch {
	case err == nil:
		r.flushSoon()
	case errors.Is(err, raft.ErrTransferring):
		// Handing over: the next leader restarts the lease in full; if the
		// transfer is abandoned, this leader must still end it, so it
		// tries again a tick later.
		r.arm(resource, token, since, r.cfg.TickInterval)
	}
}

func (r *Replica) disarm(resource string) {
	if _, ok := r.leases[resource]; ok {
		r.timers.Disarm(resource)
		delete(r.leases, resource)
	}
}

// TransferLeadership hands the lead to replica to, or, if to is
// lockservice.NoLeader, to the follower whose log is most up to date (see
// raft.Node.TransferLeadership): a leader that is about to stop calls it so
// that the group needs no election timeout to go on. Meanwhile the replica
// refuses new requests as NotLeader (the client retries, there or on the
// next leader) and answers those already proposed as they commit; the
// target takes over once its log matches, and restarts every lease at its
// full TTL as any new leader does, so a transfer never shortens a lease.
// It returns the target. The transfer is abandoned if the target does not
// lead within an election timeout. Call it on the replica's thread (the
// simulator's event loop, realrt's Node.Do).
func (r *Replica) TransferLeadership(to process.NodeID) (process.NodeID, error) {
	if r.node == nil || r.node.Role() != raft.Leader {
		return lockservice.NoLeader, raft.ErrNotLeader
	}
	target := r.node.TransferTarget()
	if to != lockservice.NoLeader {
		target = raftID(to)
	}
	if target == raft.None {
		return lockservice.NoLeader, errors.New("lockservice: no follower to transfer the lead to")
	}
	r.catchUp() // the transfer's timeout counts from now
	if err := r.node.TransferLeadership(target); err != nil {
		return lockservice.NoLeader, err
	}
	r.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "replica.transfer", slog.Uint64("term", r.node.Term()), slog.Int("to", int(nodeID(target))))
	r.dropParked(nodeID(target))
	r.flush()
	return nodeID(target), nil
}

// Transferring reports whether the replica is handing the lead over.
func (r *Replica) Transferring() bool {
	return r.node != nil && r.node.LeadTransferee() != raft.None
}

// Leader returns the leader the replica knows of in its term, or
// lockservice.NoLeader.
func (r *Replica) Leader() process.NodeID {
	if r.node == nil || r.node.Lead() == raft.None {
		return lockservice.NoLeader
	}
	return nodeID(r.node.Lead())
}

// IsLeader reports whether the replica believes it leads, and its term.
func (r *Replica) IsLeader() (bool, uint64) {
	if r.node == nil {
		return false, 0
	}
	return r.node.Role() == raft.Leader, r.node.Term()
}

// LastPersist returns when the replica last wrote a vote and log entries
// to its disk, on its monotonic clock (0: not since it started), so that
// the nemesis can mark a crash right after either. It is recorded only
// when ReplicaConfig.Marks is set.
func (r *Replica) LastPersist() (vote, entries time.Duration) { return r.votedAt, r.appendedAt }

// LastSnapshot returns when the replica last wrote a snapshot to its disk,
// its own or a leader's, on its monotonic clock (0: not since it started),
// so that the nemesis can mark a crash right after one.
func (r *Replica) LastSnapshot() time.Duration { return r.snapshotAt }

// Loaded returns what the replica's last Start loaded from its disk: the
// index of its snapshot (0: none) and the number of log entries after it,
// which it replayed. With snapshots the entries are bounded by the
// thresholds, not by the history. Call it on the replica's thread.
func (r *Replica) Loaded() (snapshot uint64, entries int) { return r.loadedSnap, r.loadedEntries }

// Table exposes the replica's applied state for tests and the harness.
func (r *Replica) Table() *LockTable { return r.table }

// fold folds a message's fields into its fingerprint, as the lock
// protocol's messages do.
func fold(kind, a, b, c, d uint64) uint64 {
	return process.Mix(process.Mix(process.Mix(process.Mix(kind, a), b), c), d)
}
