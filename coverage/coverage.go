// Package coverage counts the protocol corners a run reached: named marks
// (TigerBeetle's coverage marks) that the Raft core, the reference replica,
// the lock client and the nemesis hit when a rare moment happens — a log
// truncated, an entry of an earlier term committed through a current one, a
// renewal that raced the expiry, a crash right after a vote before it was
// durable. A sweep tallies them over seeds to show which corners the search
// reaches and how often, so a corner nobody reaches is seen instead of
// assumed tested.
//
// The list of marks below is the one place they are named; the names are
// stable (they appear in sweep output and in tests' thresholds), so a mark
// is renamed only with its users.
//
// A run owns one *Counts and hands it to every component it builds (the
// runner does, in package scenarios). Counting is an array increment on
// the event loop's thread: deterministic, nothing reaches the trace hash or
// the components' behaviour, and a nil *Counts — what a unit test or the
// real runtime passes — counts nothing. The real runtime does not count:
// the marks measure how far a search over many seeds reaches, which says
// nothing about one long-running process, and exporting them as metrics
// would make their names an operator's contract. The package is a leaf,
// importable by the Raft core and the reference without dragging anything
// in.
package coverage

import (
	"fmt"
	"strings"
)

// Mark names one protocol corner.
type Mark uint8

// The marks. Each comment says what hits it; "where" in Doc.
const (
	_ Mark = iota

	// Raft core (lockservice/raft).

	// RaftVoteSplit: a voter refused a candidate because it had voted for
	// another candidate in the same term (competing candidates).
	RaftVoteSplit
	// RaftElectionLost: a candidate or pre-candidate lost its election.
	RaftElectionLost
	// RaftVoteLeaseIgnored: a vote request was ignored because the node
	// heard from a leader within the election timeout (CheckQuorum lease).
	RaftVoteLeaseIgnored
	// RaftAppendConflict: a follower refused an append whose previous
	// entry its log holds with another term (log conflict).
	RaftAppendConflict
	// RaftAppendGap: a follower refused an append whose previous entry is
	// beyond its log (it lags: the leader probes back).
	RaftAppendGap
	// RaftLogTruncated: a follower dropped an uncommitted suffix of its log
	// for the leader's entries.
	RaftLogTruncated
	// RaftCommitEarlierTerm: a leader's commit index moved over entries of
	// an earlier term, committed through an entry of its own term (Raft
	// Figure 8).
	RaftCommitEarlierTerm
	// RaftAppendStaleTerm: an append or heartbeat from a leader of an
	// older term was refused.
	RaftAppendStaleTerm
	// RaftAppendBehindCommit: an append for a point below the follower's
	// commit index arrived (reordered or duplicated), answered with the
	// commit index.
	RaftAppendBehindCommit
	// RaftAppendDuplicate: an append whose entries the follower already
	// held arrived (reordered or duplicated) and changed nothing.
	RaftAppendDuplicate
	// RaftLeaderUncommittedTail: a new leader took over with entries past
	// its commit index (an uncommitted tail of earlier terms).
	RaftLeaderUncommittedTail
	// RaftCheckQuorumStepDown: a leader stepped down because it did not
	// hear from a majority within an election timeout.
	RaftCheckQuorumStepDown
	// RaftLogCompacted: a node dropped entries covered by its snapshot
	// from its in-memory log.
	RaftLogCompacted
	// RaftSnapshotSent: a leader sent its snapshot to a peer whose next
	// entry it had compacted away (InstallSnapshot).
	RaftSnapshotSent
	// RaftSnapshotRestored: a follower replaced its log by a leader's
	// snapshot.
	RaftSnapshotRestored
	// RaftSnapshotStale: a follower got a snapshot at or below its commit
	// index (a duplicate, or appends got there first) and ignored it.
	RaftSnapshotStale
	// RaftSnapshotFastForward: a follower got a snapshot whose last entry
	// its log already held, and only moved its commit index.
	RaftSnapshotFastForward
	// RaftInflightFull: a leader held back entries from a peer because its
	// window of appends in flight to the peer was full.
	RaftInflightFull
	// RaftAppendCapped: a leader's append to a peer carried only part of
	// the entries the peer lacked (the per-append cap); the rest follow.
	RaftAppendCapped

	// Reference replica and lock table (lockservice/reference).

	// ReplicaRestartReplay: a replica restarted with a persisted log.
	ReplicaRestartReplay
	// ReplicaNewLeaderLeases: a new leader restarted leases it inherited.
	ReplicaNewLeaderLeases
	// ReplicaStepDownPending: a leader stepped down with client requests
	// still waiting for their entries.
	ReplicaStepDownPending
	// ReplicaShed: a replica shed a request at its ingress bound.
	ReplicaShed
	// ReplicaGroupCommit: with group commit, the end of a batch did the
	// Raft work of several events in one append and one fsync.
	ReplicaGroupCommit
	// ReplicaDuplicateEntry: a second log entry of one request applied (a
	// copy proposed while the first was in flight), answered as a replay.
	ReplicaDuplicateEntry
	// ReplicaLogTailCut: a restarted replica found its log torn or
	// incomplete at the tail (a crash before the sync) and cut it there.
	ReplicaLogTailCut
	// ReplicaLogTermCut: a restarted replica cut log entries of a term
	// newer than its persisted hard state (a crash kept unsynced appends
	// but lost the term written before them).
	ReplicaLogTermCut
	// ReplicaSnapshotTaken: a replica snapshotted its lock table and
	// compacted its log (the entries or bytes threshold was passed).
	ReplicaSnapshotTaken
	// ReplicaRestartFromSnapshot: a replica restarted from a persisted
	// snapshot and the log after it.
	ReplicaRestartFromSnapshot
	// ReplicaSnapshotTorn: a restarted replica found its newest snapshot
	// torn (a crash while writing it) and started from the one before.
	ReplicaSnapshotTorn
	// ReplicaSnapshotSegmentsLeft: a restarted replica found log segments
	// its snapshot covers (a crash between writing the snapshot and
	// dropping them) and dropped them.
	ReplicaSnapshotSegmentsLeft
	// ReplicaSnapshotLogMismatch: a restarted replica found a log that
	// does not continue its snapshot (a crash between installing a
	// leader's snapshot and dropping the old log) and dropped it.
	ReplicaSnapshotLogMismatch
	// ReplicaHandOver: a release entry ended a lease and granted the
	// resource's head waiter in the same entry (waitqueue.go).
	ReplicaHandOver
	// ReplicaHandOverRefused: a release entry carrying the head waiter's
	// acquire did not end the lease (its owner check failed when the
	// entry applied): the waiter was not granted by it and was parked
	// again.
	ReplicaHandOverRefused
	// ReplicaGroupCommitWindow: a group-commit window ended with work to
	// do: events that came after the batch's first joined its append.
	ReplicaGroupCommitWindow
	// ReplicaHolderFirst: a renewal or a release was admitted past the
	// ingress bound that sheds acquires (holders come first, up to twice
	// the bound).
	ReplicaHolderFirst
	// LockExpireRaced: an expiry entry applied after a renewal or a new
	// grant restarted the lease it meant to end, so it ended nothing
	// (renew racing expiry).
	LockExpireRaced
	// LockRenewAfterExpiry: a renewal applied after its lease had ended.
	LockRenewAfterExpiry
	// LockReleaseAfterRegrant: a release applied after the resource was
	// granted to another token.
	LockReleaseAfterRegrant
	// LockHolderReacquired: the holder's own fresh acquire was granted
	// again with the same token (its earlier reply was lost).
	LockHolderReacquired
	// TokenCross2p31 … TokenCross2p63: a grant's token was at or above
	// 2^k while the token before it on that replica was below.
	TokenCross2p31
	TokenCross2p32
	TokenCross2p53
	TokenCross2p63

	// Fenced store (lockservice/fencedstore).

	// StoreFenced: the store refused a write whose token was below the
	// highest it had accepted (the fence doing its work).
	StoreFenced
	// StoreReplayedWrite: a retried or duplicated write was answered from
	// the store's dedup table.
	StoreReplayedWrite
	// StoreLateCopy: a late copy of a client's earlier write was dropped.
	StoreLateCopy

	// lockd in the simulator (lockservice/lockdsim).

	// LockdRequestRemembered: an acquire was answered from its request's
	// memory — a late copy of a request granted before, its lease ended.
	LockdRequestRemembered
	// LockdHeldSettled: a held answer was settled, and a copy of the
	// request turned out granted meanwhile: the answer is that grant.
	LockdHeldSettled
	// LockdQueueHandOver: a waiting acquire was answered from the grant a
	// release, or an acquire that found the lock free, handed it in
	// lockd's wait queue (scripts.QueuedRelease, QueuedAcquire).
	LockdQueueHandOver
	// LockdQueueKeptFree: an acquire found the lock free but kept for
	// the wait queue's head, which it could not hand the lock to (no
	// fence, or the fence refused), and was answered held (as
	// overloaded). Most such acquires hand the head the lock
	// (scripts.QueuedAcquire) and are answered held truly; heads whose
	// requests were answered already leave the line (fencesim-0.16).
	LockdQueueKeptFree

	// The reference's front end (lockservice/frontend).

	// FrontendDedupHit: a keyed acquire (a client's request id) applied
	// under a new request number was answered from the lock table's memory
	// of that key: the same attempt, taken again by a front end.
	FrontendDedupHit
	// FrontendRetryOtherNode: an acquire was answered after its request id
	// had gone to more than one node (the client's retry at another node).
	FrontendRetryOtherNode
	// FrontendHandoverWaiters: a leader began handing the lead over with
	// acquires parked in its wait queue or requests in flight.
	FrontendHandoverWaiters
	// FrontendUnknownOutcome: requests a replica dropped when it lost the
	// lead were answered not-leader (their outcome unknown).
	FrontendUnknownOutcome
	// FrontendResubmitted: a request held for a leader was submitted again
	// to the node's replica once it led.
	FrontendResubmitted
	// FrontendReleaseReplayed: a retried release that had taken effect was
	// answered released from the log's record of its request id.
	FrontendReleaseReplayed

	// Lock client (lockservice/lockclient).

	// ClientAcquireAcrossLeaders: an acquire was granted after the leader a
	// redirect had named for it redirected it again or went silent, so
	// that the same request id went on to the next leader (the lead
	// changed while the acquire was in flight).
	ClientAcquireAcrossLeaders
	// ClientGrantPastTTL: an acquire was granted more than one TTL after
	// its request id was first sent (its replies lost past the lease).
	ClientGrantPastTTL
	// ClientRenewRefused: a renewal was refused (the lease had ended).
	ClientRenewRefused
	// ClientWatchdogFired: the watchdog ended a belief before a renewal
	// extended it.
	ClientWatchdogFired
	// ClientReleaseRefused: a release was answered with anything but
	// Released.
	ClientReleaseRefused

	// Nemesis (nemesis).

	// CrashAfterVoteUnsynced / CrashAfterVoteSynced: a replica crashed
	// within a heartbeat of persisting a vote, before / after the sync that
	// made it durable completed.
	CrashAfterVoteUnsynced
	CrashAfterVoteSynced
	// CrashAfterAppendUnsynced / CrashAfterAppendSynced: the same for log
	// entries.
	CrashAfterAppendUnsynced
	CrashAfterAppendSynced
	// CrashAfterSnapshot: a replica crashed within a heartbeat of writing
	// a snapshot (its own, or one a leader sent it), before or after
	// the segments it covers were deleted.
	CrashAfterSnapshot
	// CrashMajority: a crash left a majority of the servers down at once.
	CrashMajority
	// CrashLeader: the leader crashed.
	CrashLeader
	// StoreCrashHolderPaused: the store crashed while a client that
	// believed it held a lock was paused.
	StoreCrashHolderPaused
	// PauseHolder: a client that believed it held a lock was paused.
	PauseHolder
	// WallJumpLeader / WallJumpClient: the wall clock of the leader / of a
	// client jumped by 1–4 TTLs (either way).
	WallJumpLeader
	WallJumpClient
	// PartitionLeader: a partition cut the leader off from a majority.
	PartitionLeader
	// RaftPersistedReplaced: with asynchronous storage writes, a sync
	// completed for entries a new leader's append had replaced meanwhile
	// (the report was ignored).
	RaftPersistedReplaced
	// ReplicaSyncOverlapped: with asynchronous storage writes, a replica
	// wrote a Ready while an earlier one's sync was still in flight.
	ReplicaSyncOverlapped

	numMarks
)

// info is each mark's stable name and where it is hit.
var info = [numMarks]struct{ name, where, doc string }{
	RaftVoteSplit:             {"raft.vote-split", "raft", "a voter refused a candidate: it had voted for another in the term"},
	RaftElectionLost:          {"raft.election-lost", "raft", "a candidate lost its election"},
	RaftVoteLeaseIgnored:      {"raft.vote-lease-ignored", "raft", "a vote request ignored under the CheckQuorum lease"},
	RaftAppendConflict:        {"raft.append-conflict", "raft", "a follower refused an append: its previous entry has another term"},
	RaftAppendGap:             {"raft.append-gap", "raft", "a follower refused an append: it lacks the previous entry"},
	RaftLogTruncated:          {"raft.log-truncated", "raft", "a follower dropped an uncommitted suffix for the leader's entries"},
	RaftCommitEarlierTerm:     {"raft.commit-earlier-term", "raft", "entries of an earlier term committed through a current-term entry"},
	RaftAppendStaleTerm:       {"raft.append-stale-term", "raft", "an append or heartbeat of an older term refused"},
	RaftAppendBehindCommit:    {"raft.append-behind-commit", "raft", "a reordered or duplicated append below the commit index"},
	RaftAppendDuplicate:       {"raft.append-duplicate", "raft", "a reordered or duplicated append whose entries were all there"},
	RaftLeaderUncommittedTail: {"raft.leader-uncommitted-tail", "raft", "a new leader took over with an uncommitted tail"},
	RaftCheckQuorumStepDown:   {"raft.checkquorum-step-down", "raft", "a leader stepped down: no majority heard within a timeout"},
	RaftLogCompacted:          {"raft.log-compacted", "raft", "a node dropped log entries its snapshot covers"},
	RaftSnapshotSent:          {"raft.snapshot-sent", "raft", "a leader sent its snapshot to a peer behind its compacted log"},
	RaftSnapshotRestored:      {"raft.snapshot-restored", "raft", "a follower replaced its log by a leader's snapshot"},
	RaftSnapshotStale:         {"raft.snapshot-stale", "raft", "a follower ignored a snapshot at or below its commit index"},
	RaftSnapshotFastForward:   {"raft.snapshot-fast-forward", "raft", "a follower's log held a snapshot's last entry: commit moved only"},
	RaftInflightFull:          {"raft.inflight-full", "raft", "a leader held entries back: its window of appends to a peer was full"},
	RaftAppendCapped:          {"raft.append-capped", "raft", "an append carried only part of what a peer lacked (the per-append cap)"},

	ReplicaRestartReplay:        {"replica.restart-replay", "reference", "a replica restarted with a persisted log"},
	ReplicaNewLeaderLeases:      {"replica.new-leader-leases", "reference", "a new leader restarted inherited leases"},
	ReplicaStepDownPending:      {"replica.step-down-pending", "reference", "a leader stepped down with requests waiting"},
	ReplicaShed:                 {"replica.shed", "reference", "a request shed at the ingress bound"},
	ReplicaGroupCommit:          {"replica.group-commit", "reference", "one append and one fsync for a batch of several events (group commit)"},
	ReplicaDuplicateEntry:       {"replica.duplicate-entry", "reference", "a second log entry of one request applied as a replay"},
	ReplicaLogTailCut:           {"replica.log-tail-cut", "reference", "a restarted replica cut a torn or incomplete log tail"},
	ReplicaLogTermCut:           {"replica.log-term-cut", "reference", "a restarted replica cut entries newer than its persisted term"},
	ReplicaSnapshotTaken:        {"replica.snapshot-taken", "reference", "a replica snapshotted its table and compacted its log"},
	ReplicaRestartFromSnapshot:  {"replica.restart-from-snapshot", "reference", "a replica restarted from a snapshot and the log after it"},
	ReplicaSnapshotTorn:         {"replica.snapshot-torn", "reference", "a restarted replica found its newest snapshot torn and used the one before"},
	ReplicaSnapshotSegmentsLeft: {"replica.snapshot-segments-left", "reference", "a restarted replica dropped log segments its snapshot covers"},
	ReplicaSnapshotLogMismatch:  {"replica.snapshot-log-mismatch", "reference", "a restarted replica dropped a log that does not continue its snapshot"},
	ReplicaHandOver:             {"replica.hand-over", "reference", "a release entry granted the head waiter in the same entry"},
	ReplicaHandOverRefused:      {"replica.hand-over-refused", "reference", "a hand-over entry ended no lease: its waiter was parked again"},
	ReplicaGroupCommitWindow:    {"replica.group-commit-window", "reference", "a group-commit window gathered a batch's work and did it when it ended"},
	ReplicaHolderFirst:          {"replica.holder-first", "reference", "a renewal or release admitted past the bound that sheds acquires"},
	LockExpireRaced:             {"lock.expire-raced", "reference", "an expiry applied after a renewal restarted the lease (renew racing expiry)"},
	LockRenewAfterExpiry:        {"lock.renew-after-expiry", "reference", "a renewal applied after its lease ended"},
	LockReleaseAfterRegrant:     {"lock.release-after-regrant", "reference", "a release applied after the resource was granted again"},
	LockHolderReacquired:        {"lock.holder-reacquired", "reference", "the holder's fresh acquire granted with the same token"},
	TokenCross2p31:              {"token.cross-2^31", "reference", "a grant's token crossed 2^31"},
	TokenCross2p32:              {"token.cross-2^32", "reference", "a grant's token crossed 2^32"},
	TokenCross2p53:              {"token.cross-2^53", "reference", "a grant's token crossed 2^53"},
	TokenCross2p63:              {"token.cross-2^63", "reference", "a grant's token crossed 2^63"},

	StoreFenced:        {"store.fenced", "store", "the store refused a write with a token below its highest"},
	StoreReplayedWrite: {"store.replayed-write", "store", "a retried or duplicated write answered from the dedup table"},
	StoreLateCopy:      {"store.late-copy", "store", "a late copy of an earlier write dropped"},

	LockdRequestRemembered: {"lockd.request-remembered", "lockd", "a late copy of a granted acquire answered from its request's memory"},
	LockdHeldSettled:       {"lockd.held-settled-granted", "lockd", "a held answer settled as the grant a copy of the request got meanwhile"},
	LockdQueueHandOver:     {"lockd.queue-hand-over", "lockd", "a waiting acquire answered from the grant a release handed it in the wait queue"},
	LockdQueueKeptFree:     {"lockd.queue-kept-free", "lockd", "an acquire answered held while the lock was free, kept for the wait queue's head"},

	FrontendDedupHit:        {"frontend.dedup-hit", "frontend", "a keyed acquire taken again under a new number answered from the table's memory"},
	FrontendRetryOtherNode:  {"frontend.retry-other-node", "client", "an acquire answered after its request id went to more than one node"},
	FrontendHandoverWaiters: {"frontend.handover-waiters", "frontend", "a hand-over began with acquires waiting or requests in flight"},
	FrontendUnknownOutcome:  {"frontend.unknown-outcome", "frontend", "requests a deposed leader dropped answered not-leader (outcome unknown)"},
	FrontendResubmitted:     {"frontend.resubmitted", "frontend", "a request held for a leader submitted again once the node led"},
	FrontendReleaseReplayed: {"frontend.release-replayed", "frontend", "a retried release that took effect answered released"},

	ClientAcquireAcrossLeaders: {"client.acquire-across-leaders", "client", "an acquire granted after the leader it was sent to stopped leading"},
	ClientGrantPastTTL:         {"client.grant-past-ttl", "client", "an acquire granted more than a TTL after its first send"},
	ClientRenewRefused:         {"client.renew-refused", "client", "a renewal refused"},
	ClientWatchdogFired:        {"client.watchdog-fired", "client", "the watchdog ended a belief"},
	ClientReleaseRefused:       {"client.release-refused", "client", "a release answered with anything but released"},

	CrashAfterVoteUnsynced:   {"nemesis.crash-after-vote-unsynced", "nemesis", "a replica crashed right after a vote, before its sync completed"},
	CrashAfterVoteSynced:     {"nemesis.crash-after-vote-synced", "nemesis", "a replica crashed right after a vote, once durable"},
	CrashAfterAppendUnsynced: {"nemesis.crash-after-append-unsynced", "nemesis", "a replica crashed right after an append, before its sync completed"},
	CrashAfterAppendSynced:   {"nemesis.crash-after-append-synced", "nemesis", "a replica crashed right after an append, once durable"},
	CrashAfterSnapshot:       {"nemesis.crash-after-snapshot", "nemesis", "a replica crashed right after writing a snapshot"},
	CrashMajority:            {"nemesis.crash-majority", "nemesis", "a crash left a majority of the servers down"},
	CrashLeader:              {"nemesis.crash-leader", "nemesis", "the leader crashed"},
	StoreCrashHolderPaused:   {"nemesis.store-crash-holder-paused", "nemesis", "the store crashed while a holder was paused"},
	PauseHolder:              {"nemesis.pause-holder", "nemesis", "a client that believed it held its lock was paused"},
	WallJumpLeader:           {"nemesis.wall-jump-leader", "nemesis", "the leader's wall clock jumped 1-4 TTLs"},
	WallJumpClient:           {"nemesis.wall-jump-client", "nemesis", "a client's wall clock jumped 1-4 TTLs"},
	PartitionLeader:          {"nemesis.partition-leader", "nemesis", "a link fault cut the leader off from a majority"},
	RaftPersistedReplaced:    {"raft.persisted-replaced", "raft", "a sync completed for entries replaced meanwhile (async writes)"},
	ReplicaSyncOverlapped:    {"replica.sync-overlapped", "reference", "a Ready written while an earlier one's sync was in flight (async writes)"},
}

// All returns every mark, in declaration order.
func All() []Mark {
	out := make([]Mark, 0, numMarks-1)
	for m := Mark(1); m < numMarks; m++ {
		out = append(out, m)
	}
	return out
}

// String is the mark's stable name.
func (m Mark) String() string {
	if m > 0 && m < numMarks {
		return info[m].name
	}
	return fmt.Sprintf("mark(%d)", uint8(m))
}

// Where names the component that hits the mark: raft, reference, store,
// client or nemesis.
func (m Mark) Where() string {
	if m > 0 && m < numMarks {
		return info[m].where
	}
	return ""
}

// Doc says in one line what hits the mark.
func (m Mark) Doc() string {
	if m > 0 && m < numMarks {
		return info[m].doc
	}
	return ""
}

// Parse returns the mark named name, or an error listing the names.
func Parse(name string) (Mark, error) {
	for m := Mark(1); m < numMarks; m++ {
		if info[m].name == name {
			return m, nil
		}
	}
	names := make([]string, 0, numMarks-1)
	for _, m := range All() {
		names = append(names, m.String())
	}
	return 0, fmt.Errorf("coverage: unknown mark %q (known: %s)", name, strings.Join(names, ", "))
}

// Counts are one run's hits per mark. The zero value is ready; a nil
// *Counts counts nothing, so a component built without one pays a nil
// check per corner.
type Counts struct {
	n [numMarks]uint64
}

// Hit counts one hit of m.
func (c *Counts) Hit(m Mark) {
	if c != nil {
		c.n[m]++
	}
}

// Get returns m's hits.
func (c *Counts) Get(m Mark) uint64 {
	if c == nil || m >= numMarks {
		return 0
	}
	return c.n[m]
}

// Map returns the marks hit at least once, by name (for JSON).
func (c *Counts) Map() map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range All() {
		if n := c.Get(m); n > 0 {
			out[m.String()] = n
		}
	}
	return out
}

// CountsFromMap rebuilds Counts from Map's form, refusing unknown names.
func CountsFromMap(in map[string]uint64) (*Counts, error) {
	c := &Counts{}
	for name, n := range in { //detlint:sorted (each name sets its own slot)
		m, err := Parse(name)
		if err != nil {
			return nil, err
		}
		c.n[m] = n
	}
	return c, nil
}

// Add adds o's hits to c.
func (c *Counts) Add(o *Counts) {
	if o == nil {
		return
	}
	for i := range c.n {
		c.n[i] += o.n[i]
	}
}

// Tally sums marks over runs (a sweep's seeds): each mark's hits and how
// many runs hit it at least once.
type Tally struct {
	Runs int
	hits [numMarks]uint64
	runs [numMarks]int
}

// Add folds one run's counts in (nil: a run that counted nothing, such as
// one that could not start).
func (t *Tally) Add(c *Counts) {
	t.Runs++
	if c == nil {
		return
	}
	for m, n := range c.n {
		if n > 0 {
			t.hits[m] += n
			t.runs[m]++
		}
	}
}

// Hits returns m's hits over every run.
func (t *Tally) Hits(m Mark) uint64 { return t.hits[m] }

// RunsHit returns how many runs hit m at least once.
func (t *Tally) RunsHit(m Mark) int { return t.runs[m] }

// Fraction is the share of runs that hit m, in [0, 1] (0 with no run).
func (t *Tally) Fraction(m Mark) float64 {
	if t.Runs == 0 {
		return 0
	}
	return float64(t.runs[m]) / float64(t.Runs)
}
