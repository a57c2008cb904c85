package raft

import (
	"errors"
	"fmt"
)

// ID identifies a node in the cluster. IDs are chosen by the caller and must
// be nonzero, because the zero ID is reserved to mean "no node" (no vote, no
// known leader).
type ID uint64

// None is the zero ID; it stands for "no node" in a vote or a leader field,
// so that those fields need no separate "set" flag.
const None ID = 0

// Entry is one record of the replicated log. Term and Index place it in the
// log, which is what the consistency check compares; Data is the caller's
// command. A nil Data marks the empty entry that a new leader appends to
// commit entries of earlier terms (see doc.go); proposals always carry a
// non-nil Data, so the caller can tell the two apart when applying. Data is
// never modified once it enters the log, and callers must not modify it
// either.
type Entry struct {
	Term  uint64
	Index uint64
	Data  []byte
}

// MessageType says which Raft RPC a Message carries, so that a single Message
// struct can travel over any transport.
type MessageType uint8

// The message types. Each request has a response type; the responses carry
// the responder's term so that a stale sender learns it is behind.
const (
	// MsgVote asks for a vote in an election at Term, carrying the
	// candidate's last log index (Index) and term (LogTerm).
	MsgVote MessageType = iota + 1
	// MsgVoteResp grants (Reject false) or refuses a MsgVote.
	MsgVoteResp
	// MsgPreVote asks whether the recipient would vote for the sender at
	// Term (the sender's term + 1) without the sender bumping its term.
	MsgPreVote
	// MsgPreVoteResp grants (Reject false) or refuses a MsgPreVote.
	MsgPreVoteResp
	// MsgApp is AppendEntries: Entries follow the entry at (Index,
	// LogTerm); Commit is the leader's commit index.
	MsgApp
	// MsgAppResp acknowledges a MsgApp up to Index, or rejects it (Reject)
	// with a hint (RejectHint, LogTerm) for the leader's next probe.
	MsgAppResp
	// MsgHeartbeat asserts leadership and carries a safe commit index.
	MsgHeartbeat
	// MsgHeartbeatResp answers a MsgHeartbeat, so that the leader knows the
	// follower is alive (CheckQuorum) and can resume replication to it.
	MsgHeartbeatResp
	// MsgTimeoutNow tells the leadership transfer's target (see
	// Node.TransferLeadership) to campaign at once, without waiting for
	// its election timeout and without a pre-election.
	MsgTimeoutNow
	// MsgSnap is InstallSnapshot: the leader sends its snapshot to a
	// follower whose next entry it has compacted away. Snapshot carries
	// it; the follower answers with a MsgAppResp for the snapshot's index
	// once it has persisted it.
	MsgSnap
)

var messageTypeNames = [...]string{
	MsgVote:          "MsgVote",
	MsgVoteResp:      "MsgVoteResp",
	MsgPreVote:       "MsgPreVote",
	MsgPreVoteResp:   "MsgPreVoteResp",
	MsgApp:           "MsgApp",
	MsgAppResp:       "MsgAppResp",
	MsgHeartbeat:     "MsgHeartbeat",
	MsgHeartbeatResp: "MsgHeartbeatResp",
	MsgTimeoutNow:    "MsgTimeoutNow",
	MsgSnap:          "MsgSnap",
}

// String returns the constant's name, so that traces and test failures read
// as protocol steps rather than numbers.
func (t MessageType) String() string {
	if int(t) < len(messageTypeNames) && messageTypeNames[t] != "" {
		return messageTypeNames[t]
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// valid reports whether t is one of the defined message types.
func (t MessageType) valid() bool {
	return t >= MsgVote && t <= MsgSnap
}

// Message is one Raft RPC between two nodes. It is a plain value so that the
// caller's transport (or the simulator) can copy, delay, drop, duplicate or
// reorder it; fields that a type does not use are zero.
type Message struct {
	Type MessageType
	From ID
	To   ID
	// Term is the sender's term, except in MsgPreVote and a granting
	// MsgPreVoteResp, where it is the term the sender would campaign at.
	Term uint64
	// LogTerm and Index locate an entry: the candidate's last entry in
	// MsgVote and MsgPreVote, the entry preceding Entries in MsgApp, the
	// acknowledged (or rejected) index in MsgAppResp, whose LogTerm is the
	// term of the RejectHint entry in a rejection.
	LogTerm uint64
	Index   uint64
	Entries []Entry
	Commit  uint64
	Reject  bool
	// Transfer marks a MsgVote of a campaign the leader asked for
	// (MsgTimeoutNow): voters grant it despite the leader lease
	// (CheckQuorum), which would otherwise make them ignore a vote request
	// while they hear from that very leader. (Beside Reject, it takes no
	// room: the struct's padding holds it.)
	Transfer bool
	// RejectHint is, in a rejected MsgAppResp, the follower's guess of the
	// highest index at which its log might match the leader's.
	RejectHint uint64
	// Snapshot is the leader's snapshot in a MsgSnap (nil otherwise). It
	// is shared, never modified, by every copy of the message.
	Snapshot *Snapshot
}

// Snapshot is the state machine's state as of the entry at Index, of term
// Term, as the caller encoded it (Data): it stands for every entry up to
// Index, which the log may then drop (Node.Compact). The caller makes one
// with Node.CreateSnapshot, persists it, and hands the persisted one back
// in Config.Snapshot on a restart; a follower the leader sends one to gets
// it in Ready.Snapshot, to persist and apply. The zero Snapshot is none.
type Snapshot struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// IsEmpty reports whether s is no snapshot at all.
func (s Snapshot) IsEmpty() bool { return s.Index == 0 }

// String renders the message compactly for traces and test failures.
func (m Message) String() string {
	s := fmt.Sprintf("%s %d->%d t%d li%d lt%d c%d", m.Type, m.From, m.To, m.Term, m.Index, m.LogTerm, m.Commit)
	if len(m.Entries) > 0 {
		s += fmt.Sprintf(" ents[%d..%d]", m.Entries[0].Index, m.Entries[len(m.Entries)-1].Index)
	}
	if m.Reject {
		s += fmt.Sprintf(" reject hint%d", m.RejectHint)
	}
	if m.Transfer {
		s += " transfer"
	}
	if m.Snapshot != nil {
		s += fmt.Sprintf(" snap%d/%d", m.Snapshot.Index, m.Snapshot.Term)
	}
	return s
}

// HardState is the part of a node's state that must be durable before the
// node sends the messages of the same Ready: the current term and the vote
// cast in it, so that a restarted node never votes twice in one term, and
// the commit index, so that a restart knows how much of the log to replay.
type HardState struct {
	Term   uint64
	Vote   ID
	Commit uint64
}

// Role is a node's part in the protocol. It is reported in SoftState and
// Status so that callers can route proposals to the leader.
type Role uint8

// The roles.
const (
	// Follower accepts entries from a leader and votes in elections.
	Follower Role = iota
	// PreCandidate is running a pre-election (PreVote) without having
	// bumped its term.
	PreCandidate
	// Candidate has bumped its term, voted for itself and asks for votes.
	Candidate
	// Leader accepts proposals and replicates its log.
	Leader
)

var roleNames = [...]string{
	Follower:     "Follower",
	PreCandidate: "PreCandidate",
	Candidate:    "Candidate",
	Leader:       "Leader",
}

// String returns the role's name, so that logs and test failures are
// readable.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// SoftState is the volatile part of a node's state, reported in Ready so
// that the caller can track who leads without polling; it need not be
// persisted because a restarted node relearns it.
type SoftState struct {
	Lead ID
	Role Role
	Term uint64
}

// Ready is everything a node asks its caller to do at once: persist, send,
// apply. The order matters and is documented on the fields and in the
// package doc; when done, the caller calls Advance.
type Ready struct {
	// SoftState is the node's current leader, role and term.
	SoftState SoftState
	// HardState is the state to persist when MustSync is set.
	HardState HardState
	// MustSync reports whether the term, the vote or Entries changed since
	// the last Ready, so that the caller can skip the disk when nothing did.
	// A change of HardState.Commit alone does not set it (as in etcd): a
	// restarted node that lost its newest commit index learns it again from
	// the leader, and committed entries stay committed whatever it recalls.
	MustSync bool
	// Snapshot, if not empty, is a snapshot from the leader that replaces
	// the follower's whole log (Snapshot.Index is committed, and the log
	// ends there): persist it, and drop the persisted log, BEFORE sending
	// Messages, whose acknowledgement of it promises that it survives a
	// crash; then restore the state machine from it BEFORE applying
	// CommittedEntries, which follow it.
	Snapshot Snapshot
	// Entries are log entries to persist BEFORE sending Messages. If
	// Entries[0].Index is at or below the last persisted index, the caller
	// first truncates its persisted log from that index, because a
	// conflicting suffix was replaced.
	Entries []Entry
	// Messages are to be sent only after HardState and Entries are
	// persisted, because votes and acknowledgements in them rely on it;
	// a leader's MsgApp, MsgHeartbeat and MsgSnap may go first (doc.go).
	// The slice is valid until the next call of Ready, which reuses it.
	Messages []Message
	// CommittedEntries are to be applied to the state machine in order,
	// after persisting. After a restart they start again after the
	// snapshot the node was given (Config.Snapshot), or from index 1.
	CommittedEntries []Entry
	// Mark, for a Ready with Entries on a node with
	// Config.AsyncStorageWrites, is what to hand Persisted once Entries
	// (and everything written before them) are durable.
	Mark LogMark
}

// LogMark names a write of log entries (Ready.Mark): the last index it
// wrote and the node's count of log truncations when it was handed out,
// so that Persisted can tell which of its entries a later truncation
// replaced — even ones put back since with the same index and term.
type LogMark struct {
	Index, Epoch uint64
}

// Status is a snapshot of a node's state for tests, metrics and debugging;
// reading it changes nothing.
type Status struct {
	ID        ID
	Role      Role
	Term      uint64
	Lead      ID
	Commit    uint64
	Applied   uint64
	LastIndex uint64
	// Snapshot is the index of the node's snapshot (0: none), and
	// FirstIndex the first index its in-memory log still holds.
	Snapshot, FirstIndex uint64
	// DroppedMessages counts messages dropped because the outbox was full
	// (MaxPendingMsgs), so that a caller who never drains Ready notices.
	DroppedMessages uint64
}

// ErrNotLeader is returned by Propose on a node that is not the leader,
// because only the leader may append to the replicated log; the caller
// should redirect the proposal to Lead().
var ErrNotLeader = errors.New("raft: not the leader; propose on the leader (see Lead)")

// ErrTransferring is returned by Propose while the leader is handing
// leadership over (Node.TransferLeadership): an entry appended now would
// only lengthen the catch-up the transfer waits for, so the caller should
// retry on the next leader (or here, if the transfer is abandoned).
var ErrTransferring = errors.New("raft: proposal refused: leadership is being transferred; retry on the next leader")

// ErrProposalDropped is returned by Propose when the leader already holds
// MaxUncommittedEntries uncommitted entries, so that a stalled cluster
// cannot grow the log without bound; the caller should back off and retry.
var ErrProposalDropped = errors.New("raft: proposal dropped: too many uncommitted entries; back off and retry")
