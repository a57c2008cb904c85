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
// real runtime passes — counts nothing. The package is a leaf, importable
// by the Raft core and the reference without dragging anything in.
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
	// entry its log does not hold (log conflict).
	RaftAppendConflict
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
	// ReplicaDuplicateEntry: a second log entry of one request applied (a
	// copy proposed while the first was in flight), answered as a replay.
	ReplicaDuplicateEntry
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

	// Lock client (lockservice/lockclient).

	// ClientAcquireAcrossLeaders: an acquire was granted after a NotLeader
	// redirect or a timeout sent the same request id to another server.
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

	numMarks
)

// info is each mark's stable name and where it is hit.
var info = [numMarks]struct{ name, where string }{
	RaftVoteSplit:             {"raft.vote-split", "raft"},
	RaftElectionLost:          {"raft.election-lost", "raft"},
	RaftVoteLeaseIgnored:      {"raft.vote-lease-ignored", "raft"},
	RaftAppendConflict:        {"raft.append-conflict", "raft"},
	RaftLogTruncated:          {"raft.log-truncated", "raft"},
	RaftCommitEarlierTerm:     {"raft.commit-earlier-term", "raft"},
	RaftAppendStaleTerm:       {"raft.append-stale-term", "raft"},
	RaftAppendBehindCommit:    {"raft.append-behind-commit", "raft"},
	RaftAppendDuplicate:       {"raft.append-duplicate", "raft"},
	RaftLeaderUncommittedTail: {"raft.leader-uncommitted-tail", "raft"},
	RaftCheckQuorumStepDown:   {"raft.checkquorum-step-down", "raft"},

	ReplicaRestartReplay:    {"replica.restart-replay", "reference"},
	ReplicaNewLeaderLeases:  {"replica.new-leader-leases", "reference"},
	ReplicaStepDownPending:  {"replica.step-down-pending", "reference"},
	ReplicaShed:             {"replica.shed", "reference"},
	ReplicaDuplicateEntry:   {"replica.duplicate-entry", "reference"},
	LockExpireRaced:         {"lock.expire-raced", "reference"},
	LockRenewAfterExpiry:    {"lock.renew-after-expiry", "reference"},
	LockReleaseAfterRegrant: {"lock.release-after-regrant", "reference"},
	LockHolderReacquired:    {"lock.holder-reacquired", "reference"},
	TokenCross2p31:          {"token.cross-2^31", "reference"},
	TokenCross2p32:          {"token.cross-2^32", "reference"},
	TokenCross2p53:          {"token.cross-2^53", "reference"},
	TokenCross2p63:          {"token.cross-2^63", "reference"},

	ClientAcquireAcrossLeaders: {"client.acquire-across-leaders", "client"},
	ClientGrantPastTTL:         {"client.grant-past-ttl", "client"},
	ClientRenewRefused:         {"client.renew-refused", "client"},
	ClientWatchdogFired:        {"client.watchdog-fired", "client"},
	ClientReleaseRefused:       {"client.release-refused", "client"},

	CrashAfterVoteUnsynced:   {"nemesis.crash-after-vote-unsynced", "nemesis"},
	CrashAfterVoteSynced:     {"nemesis.crash-after-vote-synced", "nemesis"},
	CrashAfterAppendUnsynced: {"nemesis.crash-after-append-unsynced", "nemesis"},
	CrashAfterAppendSynced:   {"nemesis.crash-after-append-synced", "nemesis"},
	CrashMajority:            {"nemesis.crash-majority", "nemesis"},
	CrashLeader:              {"nemesis.crash-leader", "nemesis"},
	StoreCrashHolderPaused:   {"nemesis.store-crash-holder-paused", "nemesis"},
	PauseHolder:              {"nemesis.pause-holder", "nemesis"},
	WallJumpLeader:           {"nemesis.wall-jump-leader", "nemesis"},
	WallJumpClient:           {"nemesis.wall-jump-client", "nemesis"},
	PartitionLeader:          {"nemesis.partition-leader", "nemesis"},
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

// Where names the component that hits the mark: raft, reference, client
// or nemesis.
func (m Mark) Where() string {
	if m > 0 && m < numMarks {
		return info[m].where
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
