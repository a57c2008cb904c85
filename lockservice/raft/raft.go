package raft

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fencesim/fencesim/coverage"
)

// Bounds on every queue a Node keeps; see "Bounds" in the package doc.
const (
	// MaxEntriesPerMsg caps the entries in one MsgApp, so that one message
	// (and the work to handle it) stays small however far a peer lags.
	MaxEntriesPerMsg = 64
	// MaxInflightMsgs caps the MsgApps with entries in flight to one peer
	// in replicate state, so that a slow peer cannot make the leader queue
	// its whole log.
	MaxInflightMsgs = 32
	// MaxUncommittedEntries caps the entries a leader holds beyond its
	// commit index; Propose returns ErrProposalDropped beyond it, so that a
	// cluster that cannot commit does not grow the log without bound.
	MaxUncommittedEntries = 4096
	// MaxUnstableEntries caps the entries a follower holds that it has not
	// yet handed out for persisting; appends beyond it are ignored (the
	// leader retries), so that a caller that is slow to drain Ready does
	// not let the follower's memory grow without bound.
	MaxUnstableEntries = 4096
	// MaxCommittedPerReady caps the committed entries in one Ready, so
	// that a restart that replays a long log hands it out in slices.
	MaxCommittedPerReady = 1024
	// MaxPendingMsgs caps the outbox between Readys; further messages are
	// dropped and counted (Status.DroppedMessages), which Raft tolerates
	// as message loss.
	MaxPendingMsgs = 4096
	// MaxTerm is the highest term a node takes or campaigns at, and
	// MaxTermJump the furthest ahead of its own term a message's term may
	// be. A message past either is refused (Step's error), so that a
	// forged or corrupt term cannot wrap the term to 0 at the next
	// election (which breaks the log's order), nor push a group to its
	// last term in a few frames (each term step must be persisted, so
	// 2^62/2^20 of them take centuries). An honest node falls 2^20 terms
	// behind only by missing a million elections its group held.
	MaxTerm     = 1 << 62
	MaxTermJump = 1 << 20
)

type voteState uint8

const (
	voteUnknown voteState = iota
	voteGranted
	voteRejected
)

type electionResult uint8

const (
	electionPending electionResult = iota
	electionWon
	electionLost
)

// Node is one Raft participant as a pure state machine: Step, Tick and
// Propose change it, Ready reports what the caller must do, Advance says it
// was done. A Node is not safe for concurrent use; the simulator drives it
// from its single thread.
type Node struct {
	id    ID
	peers []ID // sorted, including id
	self  int  // index of id in peers
	prs   []progress
	votes []voteState
	// matchBuf is scratch space for maybeCommit, so that committing does
	// not allocate.
	matchBuf []uint64

	electionTimeout  int
	heartbeatTimeout int
	rand             *rand.Rand
	preVote          bool
	checkQuorum      bool
	quorumFn         func(int) int
	marks            *coverage.Counts
	maxEntries       uint64 // entries per MsgApp (Config.MaxEntriesPerMsg)
	maxInflight      int    // appends in flight per peer (Config.MaxInflightMsgs)
	asyncWrites      bool   // Config.AsyncStorageWrites: Persisted, not Advance, marks entries durable
	// epoch counts the truncations of entries handed out for persisting
	// (AsyncStorageWrites), and truncs are those a write report still in
	// flight may predate: each epoch and the first index it replaced.
	epoch  uint64
	truncs []truncation

	term uint64
	vote ID
	lead ID
	role Role
	log  raftLog

	electionElapsed           int
	heartbeatElapsed          int
	randomizedElectionTimeout int

	msgs    []Message
	dropped uint64
	// spareMsgs is the buffer the last Ready handed out; the next Ready
	// reuses it (Ready.Messages is valid until then).
	spareMsgs []Message

	// What the last Ready handed out: the soft and hard state, the last
	// log index (clipped when a truncation replaces handed-out entries)
	// and the last committed index. Advance turns handed and handedApplied
	// into the persisted and applied watermarks.
	prevSoft      SoftState
	prevHard      HardState
	handed        uint64
	handedApplied uint64

	// leadTransferee is the follower a leader is handing leadership to
	// (TransferLeadership), None otherwise; transferElapsed counts the
	// ticks since the transfer began, so that it is abandoned after an
	// election timeout.
	leadTransferee  ID
	transferElapsed int

	// snapshot is the newest snapshot: made here (CreateSnapshot), given
	// on restart (Config.Snapshot) or received from a leader (MsgSnap). A
	// leader sends it to a peer whose next entry was compacted away.
	// snapshotReady says a received one waits to go out in a Ready.
	snapshot      Snapshot
	snapshotReady bool
}

// New builds a node from c, which it validates first. A Config carrying a
// persisted HardState, Snapshot and Entries restarts a node: it keeps its
// term and vote, starts as a follower with no known leader, and redelivers
// every committed entry after the snapshot (from index 1 without one),
// because Applied starts at the snapshot's index: the caller restores its
// state machine from the snapshot before it applies them.
func New(c Config) (*Node, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	peers := slices.Clone(c.Peers)
	slices.Sort(peers)
	self, _ := slices.BinarySearch(peers, c.ID)
	q := c.Quorum
	if q == nil {
		q = func(n int) int { return n/2 + 1 }
	}
	n := &Node{
		id:               c.ID,
		peers:            peers,
		self:             self,
		prs:              make([]progress, len(peers)),
		votes:            make([]voteState, len(peers)),
		matchBuf:         make([]uint64, len(peers)),
		electionTimeout:  c.ElectionTick,
		heartbeatTimeout: c.HeartbeatTick,
		rand:             c.Rand,
		preVote:          c.PreVote,
		checkQuorum:      c.CheckQuorum,
		quorumFn:         q,
		marks:            c.Marks,
		maxEntries:       uint64(cmp.Or(c.MaxEntriesPerMsg, MaxEntriesPerMsg)),
		maxInflight:      cmp.Or(c.MaxInflightMsgs, MaxInflightMsgs),
		asyncWrites:      c.AsyncStorageWrites,
		term:             c.HardState.Term,
		vote:             c.HardState.Vote,
	}
	n.log.entries = slices.Clone(c.Entries)
	n.log.offset, n.log.offsetTerm = c.Snapshot.Index, c.Snapshot.Term
	// A commit index persisted before the snapshot was taken may be
	// older than it; the snapshot holds only committed entries.
	n.log.committed = max(c.HardState.Commit, c.Snapshot.Index)
	n.log.applied = c.Snapshot.Index
	n.log.unstable = n.log.lastIndex() + 1
	n.handed = n.log.lastIndex()
	n.handedApplied = c.Snapshot.Index
	n.snapshot = c.Snapshot
	n.becomeFollower(n.term, None)
	n.prevSoft = n.softState()
	n.prevHard = n.hardState()
	return n, nil
}

// Tick advances the node's logical clock by one tick. The caller calls it at
// a fixed interval of its own (virtual) time, so that timeouts are counted
// in ticks and the package needs no clock.
func (n *Node) Tick() {
	if n.role == Leader {
		n.tickHeartbeat()
		return
	}
	n.tickElection()
}

// TicksToDeadline returns k >= 1 such that the next k-1 calls to Tick only
// count (they change no role, term, log or vote and send nothing), and the
// k-th may act: a follower's or candidate's election timeout, a leader's
// heartbeat, its CheckQuorum check, or the end of a leadership transfer.
// A caller that is not bound to tick at a fixed rate (a tickless replica)
// sleeps until that tick instead of waking for every one; it must still
// deliver the ticks that passed before feeding the node a message, since
// Step reads the election count (the leader lease). Steps, proposals and
// transfers may move the deadline, so ask again after them.
func (n *Node) TicksToDeadline() int {
	var k int
	if n.role == Leader {
		k = min(n.heartbeatTimeout-n.heartbeatElapsed, n.electionTimeout-n.electionElapsed)
		if n.leadTransferee != None {
			k = min(k, n.electionTimeout-n.transferElapsed)
		}
	} else {
		k = n.randomizedElectionTimeout - n.electionElapsed
	}
	return max(k, 1)
}

// tickElection runs on followers and (pre-)candidates: after a randomized
// election timeout without hearing from a leader, campaign.
func (n *Node) tickElection() {
	n.electionElapsed++
	if n.electionElapsed >= n.randomizedElectionTimeout {
		n.electionElapsed = 0
		n.campaign(n.preVote, false)
	}
}

// tickHeartbeat runs on the leader: heartbeat every HeartbeatTick ticks and,
// with CheckQuorum, step down every ElectionTick ticks unless a majority was
// heard from.
func (n *Node) tickHeartbeat() {
	if n.leadTransferee != None {
		n.transferElapsed++
		if n.transferElapsed >= n.electionTimeout {
			// The target did not take over in time (down, cut off or
			// too far behind): lead on, and accept proposals again.
			n.abortTransfer()
		}
	}
	n.heartbeatElapsed++
	n.electionElapsed++
	if n.electionElapsed >= n.electionTimeout {
		n.electionElapsed = 0
		if n.checkQuorum && !n.quorumActive() {
			n.marks.Hit(coverage.RaftCheckQuorumStepDown)
			n.becomeFollower(n.term, None)
			return
		}
	}
	if n.heartbeatElapsed >= n.heartbeatTimeout {
		n.heartbeatElapsed = 0
		n.bcastHeartbeat()
	}
}

// Propose appends data to the leader's log as a new entry of the current
// term and starts replicating it. It returns the entry's index and term, so
// that the caller can recognize the entry when it is committed (or learn
// that it was replaced, if another entry is committed at that index). Only
// the leader accepts proposals (ErrNotLeader otherwise), and only while
// fewer than MaxUncommittedEntries entries are uncommitted
// (ErrProposalDropped otherwise). Data is copied.
func (n *Node) Propose(data []byte) (index, term uint64, err error) {
	if n.role != Leader {
		return 0, 0, ErrNotLeader
	}
	if n.leadTransferee != None {
		return 0, 0, ErrTransferring
	}
	if n.log.lastIndex()-n.log.committed >= MaxUncommittedEntries {
		return 0, 0, ErrProposalDropped
	}
	// A non-nil copy: nil Data marks only the leader's empty entry.
	e := Entry{Term: n.term, Index: n.log.lastIndex() + 1, Data: append(make([]byte, 0, len(data)), data...)}
	n.log.append(e)
	n.bcastAppend()
	return e.Index, e.Term, nil
}

// Step feeds the node one message from a peer. Messages from older terms are
// ignored (or answered with the current term, so that a stale leader or
// candidate steps down), as the paper prescribes. A message addressed to
// another node, from an unknown node, of an unknown type or malformed is
// answered with an error and changes nothing, because a peer's bad message
// must never crash the node.
func (n *Node) Step(m Message) error {
	if err := n.checkMessage(m); err != nil {
		return err
	}
	switch {
	case m.Term > n.term:
		if m.Type == MsgVote || m.Type == MsgPreVote {
			// The leader lease (CheckQuorum): a node that has heard from a
			// leader within the election timeout ignores vote requests, so
			// a node that merely lost contact cannot unseat a live leader.
			// A campaign the leader itself asked for (Transfer) is the
			// exception: it is how a live leader hands over.
			if n.checkQuorum && n.lead != None && n.electionElapsed < n.electionTimeout && !(m.Type == MsgVote && m.Transfer) {
				n.marks.Hit(coverage.RaftVoteLeaseIgnored)
				return nil
			}
		}
		switch {
		case m.Type == MsgPreVote:
			// A pre-vote never changes the recipient's term.
		case m.Type == MsgPreVoteResp && !m.Reject:
			// A granted pre-vote carries the term the pre-candidate will
			// campaign at; it bumps its term only with a majority.
		case m.Type == MsgApp || m.Type == MsgHeartbeat || m.Type == MsgSnap:
			n.becomeFollower(m.Term, m.From)
		default:
			n.becomeFollower(m.Term, None)
		}
	case m.Term < n.term:
		switch {
		case (n.checkQuorum || n.preVote) && (m.Type == MsgApp || m.Type == MsgHeartbeat || m.Type == MsgSnap):
			n.marks.Hit(coverage.RaftAppendStaleTerm)
			// Tell a stale leader our term so it steps down. Without
			// this, a leader cut off by CheckQuorum or PreVote from the
			// higher term could never learn it.
			n.send(Message{To: m.From, Type: MsgAppResp})
		case m.Type == MsgPreVote:
			// Reject with our term so the pre-candidate catches up
			// instead of pre-campaigning forever at a stale term.
			n.send(Message{To: m.From, Type: MsgPreVoteResp, Reject: true})
		}
		return nil
	}

	switch m.Type {
	case MsgVote, MsgPreVote:
		n.handleVote(m)
		return nil
	}
	switch n.role {
	case Leader:
		return n.stepLeader(m)
	case PreCandidate, Candidate:
		return n.stepCandidate(m)
	default:
		return n.stepFollower(m)
	}
}

// checkMessage rejects a message that is misaddressed or malformed before it
// can change anything.
func (n *Node) checkMessage(m Message) error {
	if m.To != n.id {
		return fmt.Errorf("raft: %v is addressed to node %d, not to this node %d; deliver each message to its To", m, m.To, n.id)
	}
	if m.From == n.id {
		return fmt.Errorf("raft: %v claims to come from this node itself; nodes never message themselves", m)
	}
	if _, ok := slices.BinarySearch(n.peers, m.From); !ok {
		return fmt.Errorf("raft: %v comes from node %d, which is not among the peers %v", m, m.From, n.peers)
	}
	if !m.Type.valid() {
		return fmt.Errorf("raft: message from node %d has unknown type %d", m.From, uint8(m.Type))
	}
	if m.Term == 0 {
		return fmt.Errorf("raft: %v has term 0; every message carries a term >= 1", m)
	}
	if m.Term > MaxTerm {
		return fmt.Errorf("raft: %v has term %d above MaxTerm %d; refused, so that the term never wraps", m, m.Term, uint64(MaxTerm))
	}
	if m.Term > n.term+MaxTermJump {
		return fmt.Errorf("raft: %v has term %d, more than MaxTermJump %d ahead of this node's %d; refused", m, m.Term, uint64(MaxTermJump), n.term)
	}
	if m.LogTerm > m.Term {
		return fmt.Errorf("raft: %v has log term %d above its term %d; no log holds an entry of a later term than its node's", m, m.LogTerm, m.Term)
	}
	if (m.Snapshot != nil) != (m.Type == MsgSnap) {
		return fmt.Errorf("raft: %v: a MsgSnap, and only a MsgSnap, carries a snapshot", m)
	}
	if s := m.Snapshot; s != nil && (s.Index == 0 || s.Term == 0 || s.Term > m.Term) {
		return fmt.Errorf("raft: %v: snapshot at index %d of term %d; a snapshot is of an entry >= 1, of a term >= 1 and not above the message's", m, s.Index, s.Term)
	}
	if m.Type != MsgApp {
		if len(m.Entries) > 0 {
			return fmt.Errorf("raft: %v carries entries; only MsgApp may", m)
		}
		return nil
	}
	prevTerm := m.LogTerm
	for i, e := range m.Entries {
		if e.Index != m.Index+uint64(i)+1 || e.Index == 0 {
			return fmt.Errorf("raft: %v: entry %d has index %d, want %d; entries must follow Index contiguously", m, i, e.Index, m.Index+uint64(i)+1)
		}
		if e.Term < prevTerm || e.Term == 0 || e.Term > m.Term {
			return fmt.Errorf("raft: %v: entry %d has term %d; terms must be >= 1, never decrease from LogTerm %d and not exceed the message's term",
				m, e.Index, e.Term, m.LogTerm)
		}
		prevTerm = e.Term
		// A current leader's log contains every committed entry (Leader
		// Completeness), so a conflict with one means a broken peer. A
		// stale leader's message may conflict legitimately; it is ignored
		// by the term check.
		// (Compacted entries are committed too, but their terms are
		// gone: a snapshot covers them.)
		if t, ok := n.log.term(e.Index); ok && m.Term >= n.term && e.Index <= n.log.committed && t != e.Term {
			return fmt.Errorf("raft: %v: entry %d of term %d conflicts with committed entry of term %d; the sender's log is corrupt",
				m, e.Index, e.Term, t)
		}
	}
	return nil
}

// handleVote answers MsgVote and MsgPreVote (at the node's term or, for a
// pre-vote, a higher one).
func (n *Node) handleVote(m Message) {
	resp := MsgVoteResp
	if m.Type == MsgPreVote {
		resp = MsgPreVoteResp
	}
	// We can vote if we already voted for the sender in this term, if we
	// have neither voted nor heard from a leader in this term, or, for a
	// pre-vote, if it is for a later term.
	canVote := n.vote == m.From ||
		(n.vote == None && n.lead == None) ||
		(m.Type == MsgPreVote && m.Term > n.term)
	if canVote && n.log.isUpToDate(m.Index, m.LogTerm) {
		// The grant carries the request's term: for a pre-vote that is the
		// pre-candidate's future term, which it recognizes as a grant.
		n.send(Message{To: m.From, Type: resp, Term: m.Term})
		if m.Type == MsgVote {
			// The vote is in the HardState of the same Ready, persisted
			// before this response is sent.
			n.electionElapsed = 0
			n.vote = m.From
		}
		return
	}
	if m.Type == MsgVote && n.vote != None && n.vote != m.From {
		n.marks.Hit(coverage.RaftVoteSplit)
	}
	n.send(Message{To: m.From, Type: resp, Reject: true})
}

func (n *Node) stepLeader(m Message) error {
	i, _ := slices.BinarySearch(n.peers, m.From)
	pr := &n.prs[i]
	switch m.Type {
	case MsgAppResp:
		if !m.Reject && m.Index > n.log.lastIndex() {
			return fmt.Errorf("raft: %v acknowledges index %d beyond the leader's last index %d; the sender is broken",
				m, m.Index, n.log.lastIndex())
		}
		pr.recentActive = true
		if m.Reject {
			hint := m.RejectHint
			if m.LogTerm > 0 {
				// Skip every entry of ours whose term is above the
				// follower's term at the hint: none of them can match.
				hint, _ = n.log.findConflictByTerm(m.RejectHint, m.LogTerm)
			}
			if pr.maybeDecrTo(m.Index, hint) {
				if pr.state == stateReplicate {
					pr.becomeProbe()
				}
				n.sendAppend(i, true)
			}
			return nil
		}
		if pr.maybeUpdate(m.Index) || (pr.match == m.Index && pr.state == stateProbe) {
			switch pr.state {
			case stateProbe:
				pr.becomeReplicate()
			case stateReplicate:
				pr.inflights.freeLE(m.Index)
			}
			if n.maybeCommit() {
				n.bcastCommit()
			}
			for n.sendAppend(i, false) {
			}
			if m.From == n.leadTransferee && pr.match == n.log.lastIndex() {
				// The target has caught up: let it campaign now.
				n.send(Message{To: m.From, Type: MsgTimeoutNow})
			}
		}
	case MsgHeartbeatResp:
		pr.recentActive = true
		pr.probeSent = false
		if pr.state == stateReplicate && pr.inflights.full() {
			// An append may have been lost; let one more through.
			pr.inflights.freeFirst()
		}
		if pr.match < n.log.lastIndex() || pr.state == stateProbe {
			n.sendAppend(i, true)
		}
	case MsgApp, MsgHeartbeat, MsgSnap:
		return fmt.Errorf("raft: %v: another leader in this node's term %d; at most one leader is elected per term", m, n.term)
	}
	return nil
}

func (n *Node) stepCandidate(m Message) error {
	resp := MsgVoteResp
	if n.role == PreCandidate {
		resp = MsgPreVoteResp
	}
	switch m.Type {
	case MsgApp:
		// A leader of our term (or a later one) exists.
		n.becomeFollower(m.Term, m.From)
		n.handleAppend(m)
	case MsgHeartbeat:
		n.becomeFollower(m.Term, m.From)
		n.handleHeartbeat(m)
	case MsgSnap:
		n.becomeFollower(m.Term, m.From)
		n.handleSnapshot(m)
	case resp:
		switch n.poll(m.From, !m.Reject) {
		case electionWon:
			if n.role == PreCandidate {
				n.campaign(false, false)
			} else {
				n.becomeLeader()
			}
		case electionLost:
			n.marks.Hit(coverage.RaftElectionLost)
			n.becomeFollower(n.term, None)
		}
	}
	return nil
}

func (n *Node) stepFollower(m Message) error {
	switch m.Type {
	case MsgApp, MsgHeartbeat, MsgTimeoutNow:
		// At most one leader is elected per term: leader traffic at our
		// term from another node than the leader we follow is forged or
		// broken, and must not move our log, commit index or role.
		if n.lead != None && m.From != n.lead {
			return fmt.Errorf("raft: %v: node %d leads this node's term %d, not node %d; at most one leader is elected per term", m, n.lead, n.term, m.From)
		}
	}
	switch m.Type {
	case MsgApp:
		n.electionElapsed = 0
		n.lead = m.From
		n.handleAppend(m)
	case MsgHeartbeat:
		n.electionElapsed = 0
		n.lead = m.From
		n.handleHeartbeat(m)
	case MsgSnap:
		n.electionElapsed = 0
		n.lead = m.From
		n.handleSnapshot(m)
	case MsgTimeoutNow:
		// The leader hands over to us with our log up to date with its:
		// campaign at once, skipping the election timeout and the
		// pre-election (the leader's own vote request would fail it: the
		// others still hear from the leader).
		n.campaign(false, true)
	}
	return nil
}

// handleAppend is the follower's side of AppendEntries: the consistency
// check, conflict truncation, commit, and the ack or a rejection with a hint.
func (n *Node) handleAppend(m Message) {
	if m.Index < n.log.committed {
		// Everything up to our commit index matches any current leader.
		n.marks.Hit(coverage.RaftAppendBehindCommit)
		n.send(Message{To: m.From, Type: MsgAppResp, Index: n.log.committed})
		return
	}
	if !n.log.matchTerm(m.Index, m.LogTerm) {
		// Hint at the last index that can still match: at most our last
		// index, and skipping our entries of terms above m.LogTerm, which
		// cannot match the leader's entry at m.Index.
		hintIndex, hintTerm := n.log.findConflictByTerm(min(m.Index, n.log.lastIndex()), m.LogTerm)
		if m.Index <= n.log.lastIndex() {
			n.marks.Hit(coverage.RaftAppendConflict)
		} else {
			n.marks.Hit(coverage.RaftAppendGap)
		}
		n.send(Message{To: m.From, Type: MsgAppResp, Index: m.Index, Reject: true, RejectHint: hintIndex, LogTerm: hintTerm})
		return
	}
	lastNew := m.Index + uint64(len(m.Entries))
	if ci := n.log.findConflict(m.Entries); ci != 0 {
		// Entries from ci on will wait to be handed out for persisting.
		if lastNew-min(n.handed, ci-1) > MaxUnstableEntries {
			return // no answer: the leader retries once we have caught up
		}
		if ci <= n.log.lastIndex() {
			n.marks.Hit(coverage.RaftLogTruncated)
		}
		if ci <= n.handed {
			n.truncated(ci)
		}
		n.log.truncateAndAppend(m.Entries[ci-m.Index-1:])
		n.handed = min(n.handed, ci-1)
	} else if len(m.Entries) > 0 {
		n.marks.Hit(coverage.RaftAppendDuplicate)
	}
	n.log.commitTo(min(m.Commit, lastNew))
	n.send(Message{To: m.From, Type: MsgAppResp, Index: lastNew})
}

// handleSnapshot is the follower's side of InstallSnapshot (etcd's
// handleSnapshot and restore). A snapshot at or below the commit index is
// stale (a duplicate, or one that raced appends that got there first) and
// only acknowledges the commit index. One whose last entry the log already
// holds with the same term only moves the commit index: the log matches
// up to it, and entries after it are kept. Any other replaces the whole
// log; it goes out in the next Ready to be persisted and applied, and the
// acknowledgement, in the same Ready, leaves only after it is persisted.
func (n *Node) handleSnapshot(m Message) {
	s := *m.Snapshot
	switch {
	case s.Index <= n.log.committed:
		n.marks.Hit(coverage.RaftSnapshotStale)
		n.send(Message{To: m.From, Type: MsgAppResp, Index: n.log.committed})
		return
	case n.log.matchTerm(s.Index, s.Term):
		n.marks.Hit(coverage.RaftSnapshotFastForward)
		n.log.commitTo(s.Index)
		n.send(Message{To: m.From, Type: MsgAppResp, Index: n.log.committed})
		return
	}
	n.marks.Hit(coverage.RaftSnapshotRestored)
	n.truncated(s.Index + 1) // the whole log is replaced
	n.log.restore(s)
	n.snapshot, n.snapshotReady = s, true
	// Nothing older is left to hand out: entries, and committed entries
	// to apply, start after the snapshot.
	n.handed, n.handedApplied = s.Index, s.Index
	n.send(Message{To: m.From, Type: MsgAppResp, Index: s.Index})
}

// handleHeartbeat takes the commit index from a heartbeat. The leader sends
// min(match, commit), which our log is known to match up to.
func (n *Node) handleHeartbeat(m Message) {
	n.log.commitTo(min(m.Commit, n.log.lastIndex()))
	n.send(Message{To: m.From, Type: MsgHeartbeatResp})
}

// campaign starts a pre-election (pre) or an election; transfer marks the
// election as one the leader asked for (MsgTimeoutNow).
func (n *Node) campaign(pre, transfer bool) {
	if n.term >= MaxTerm {
		return // never reached (MaxTerm, MaxTermJump); the term must not wrap
	}
	typ := MsgVote
	if pre {
		n.becomePreCandidate()
		typ = MsgPreVote
	} else {
		n.becomeCandidate()
	}
	term := n.term
	if pre {
		term++ // the term we would campaign at; ours stays
	}
	if n.poll(n.id, true) == electionWon {
		// A single-node cluster wins at once.
		if pre {
			n.campaign(false, false)
		} else {
			n.becomeLeader()
		}
		return
	}
	for i, p := range n.peers {
		if i == n.self {
			continue
		}
		n.send(Message{To: p, Type: typ, Term: term, Index: n.log.lastIndex(), LogTerm: n.log.lastTerm(), Transfer: transfer})
	}
}

// quorum is how many voters make a majority, from Config.Quorum, clamped
// below at 1 so that a planted bug cannot make a node index out of range.
func (n *Node) quorum() int {
	return max(1, n.quorumFn(len(n.peers)))
}

// poll records id's (pre-)vote and tallies the election.
func (n *Node) poll(id ID, granted bool) electionResult {
	i, _ := slices.BinarySearch(n.peers, id)
	if n.votes[i] == voteUnknown {
		if granted {
			n.votes[i] = voteGranted
		} else {
			n.votes[i] = voteRejected
		}
	}
	var yes, no int
	for _, v := range n.votes {
		switch v {
		case voteGranted:
			yes++
		case voteRejected:
			no++
		}
	}
	q := n.quorum()
	switch {
	case yes >= q:
		return electionWon
	case no > len(n.peers)-q:
		return electionLost
	}
	return electionPending
}

// quorumActive reports whether a majority (counting the leader) was heard
// from since the last check, and starts the next check period.
func (n *Node) quorumActive() bool {
	active := 0
	for i := range n.prs {
		if i == n.self || n.prs[i].recentActive {
			active++
		}
		if i != n.self {
			n.prs[i].recentActive = false
		}
	}
	return active >= n.quorum()
}

// maybeCommit advances the leader's commit index to the highest index
// replicated on a quorum, but only if that entry is of the current term
// (Figure 8 of the paper): an entry of an earlier term can be on a majority
// and still be overwritten by a later leader, so it commits only indirectly,
// under an entry of the current term.
func (n *Node) maybeCommit() bool {
	q := n.quorum()
	if q > len(n.prs) {
		return false
	}
	for i := range n.prs {
		n.matchBuf[i] = n.prs[i].match
	}
	slices.Sort(n.matchBuf)
	idx := n.matchBuf[len(n.matchBuf)-q] // q-th highest
	if idx <= n.log.committed || n.log.mustTerm(idx) != n.term {
		return false
	}
	if n.log.mustTerm(n.log.committed+1) != n.term {
		n.marks.Hit(coverage.RaftCommitEarlierTerm)
	}
	return n.log.commitTo(idx)
}

// sendAppend sends peer i the entries it needs next, if its progress allows;
// with sendIfEmpty it sends an empty MsgApp (a probe, or news of the commit
// index) when there is nothing new. It reports whether it sent.
func (n *Node) sendAppend(i int, sendIfEmpty bool) bool {
	pr := &n.prs[i]
	if pr.isPaused() {
		if pr.state == stateReplicate && pr.next <= n.log.lastIndex() {
			n.marks.Hit(coverage.RaftInflightFull)
		}
		return false
	}
	prevIndex := pr.next - 1
	prevTerm, ok := n.log.term(prevIndex)
	if !ok && prevIndex < n.log.offset {
		// The peer's next entry was compacted away: only the snapshot
		// can bring it up to date.
		return n.sendSnapshot(i)
	}
	if !ok {
		panic(fmt.Sprintf("raft: internal error: next index %d for peer %d is beyond last index %d + 1",
			pr.next, n.peers[i], n.log.lastIndex()))
	}
	var ents []Entry
	last := min(n.log.lastIndex(), prevIndex+n.maxEntries)
	if pr.next <= last {
		ents = n.log.slice(pr.next, last)
		if last < n.log.lastIndex() {
			n.marks.Hit(coverage.RaftAppendCapped)
		}
	}
	if len(ents) == 0 && !sendIfEmpty {
		return false
	}
	n.send(Message{To: n.peers[i], Type: MsgApp, Index: prevIndex, LogTerm: prevTerm, Entries: ents, Commit: n.log.committed})
	pr.appended = true
	if len(ents) > 0 {
		switch pr.state {
		case stateReplicate:
			pr.next = last + 1
			pr.inflights.add(last)
		case stateProbe:
			pr.probeSent = true
		}
	}
	return true
}

// sendSnapshot sends peer i the snapshot, as etcd's maybeSendSnapshot does,
// and treats it as a probe: the peer is paused until it answers (its
// MsgAppResp for the snapshot's index moves it to replicate) or a heartbeat
// response shows it alive, upon which the next probe, from the snapshot's
// index, is answered either way (etcd waits instead for its transport to
// report the snapshot sent or lost; here a lost snapshot is a lost probe).
func (n *Node) sendSnapshot(i int) bool {
	pr := &n.prs[i]
	s := n.snapshot
	if s.Index < n.log.offset {
		panic(fmt.Sprintf("raft: internal error: snapshot at %d is older than the compacted log at %d", s.Index, n.log.offset))
	}
	n.marks.Hit(coverage.RaftSnapshotSent)
	n.send(Message{To: n.peers[i], Type: MsgSnap, Snapshot: &s, Commit: n.log.committed})
	pr.appended = true
	pr.becomeProbe()
	pr.next = s.Index + 1
	pr.probeSent = true
	return true
}

func (n *Node) bcastAppend() {
	for i := range n.peers {
		if i != n.self {
			n.sendAppend(i, true)
		}
	}
}

// bcastCommit spreads a new commit index. It rides only on appends that
// carry entries anyway: a follower needs the index just to apply, and the
// next heartbeat (HeartbeatTick) brings it otherwise. etcd sends an empty
// append to every follower here instead, which with its answer is half of
// all the messages of a busy group, for no gain in safety or in the
// latency a client sees (the leader answers from its own apply).
func (n *Node) bcastCommit() {
	for i := range n.peers {
		if i != n.self {
			n.sendAppend(i, false)
		}
	}
}

// bcastHeartbeat asserts leadership to every peer that got no append since
// the last heartbeat: as in the Raft paper, heartbeats fill idle periods,
// and a peer that appends keep busy hears from the leader anyway (etcd
// heartbeats every peer regardless, which in a busy group is a fifth of
// the messages). A skipped heartbeat's commit index rides on the next
// append or heartbeat.
func (n *Node) bcastHeartbeat() {
	for i, p := range n.peers {
		if i == n.self {
			continue
		}
		if n.prs[i].appended {
			n.prs[i].appended = false
			continue
		}
		// Only up to match is the peer's log known to equal ours.
		commit := min(n.prs[i].match, n.log.committed)
		n.send(Message{To: p, Type: MsgHeartbeat, Commit: commit})
	}
}

// send queues m for the next Ready, stamping the sender and, unless set,
// the current term.
func (n *Node) send(m Message) {
	m.From = n.id
	if m.Term == 0 {
		m.Term = n.term
	}
	if len(n.msgs) >= MaxPendingMsgs {
		n.dropped++
		return
	}
	n.msgs = append(n.msgs, m)
}

// reset moves to term (forgetting the vote if the term changes) and starts
// a new election timeout drawn from the injected random stream.
func (n *Node) reset(term uint64) {
	if n.term != term {
		n.term = term
		n.vote = None
	}
	n.lead = None
	n.electionElapsed = 0
	n.heartbeatElapsed = 0
	n.abortTransfer()
	n.randomizedElectionTimeout = n.electionTimeout + n.rand.IntN(n.electionTimeout)
	clear(n.votes)
	for i := range n.prs {
		n.prs[i] = progress{next: n.log.lastIndex() + 1, inflights: inflights{limit: n.maxInflight}}
	}
	// The leader counts itself only for what it has persisted.
	n.prs[n.self].match = n.log.stable()
}

func (n *Node) becomeFollower(term uint64, lead ID) {
	n.reset(term)
	n.role = Follower
	n.lead = lead
}

func (n *Node) becomePreCandidate() {
	if n.role == Leader {
		panic("raft: internal error: a leader cannot become a pre-candidate")
	}
	// The term and vote stay: a pre-election changes neither.
	clear(n.votes)
	n.lead = None
	n.role = PreCandidate
}

func (n *Node) becomeCandidate() {
	if n.role == Leader {
		panic("raft: internal error: a leader cannot become a candidate")
	}
	n.reset(n.term + 1)
	n.vote = n.id
	n.role = Candidate
}

// becomeLeader takes over and appends an empty entry of the new term, so
// that entries of earlier terms commit (indirectly) as soon as it does.
func (n *Node) becomeLeader() {
	if n.role != Candidate {
		panic(fmt.Sprintf("raft: internal error: only a candidate can become leader, not a %v", n.role))
	}
	if n.log.lastIndex() > n.log.committed {
		n.marks.Hit(coverage.RaftLeaderUncommittedTail)
	}
	n.reset(n.term)
	n.lead = n.id
	n.role = Leader
	n.prs[n.self].state = stateReplicate
	n.log.append(Entry{Term: n.term, Index: n.log.lastIndex() + 1})
	n.bcastAppend()
}

func (n *Node) softState() SoftState {
	return SoftState{Lead: n.lead, Role: n.role, Term: n.term}
}

func (n *Node) hardState() HardState {
	return HardState{Term: n.term, Vote: n.vote, Commit: n.log.committed}
}

// HasReady reports whether Ready has anything for the caller, so that an
// idle node costs the caller nothing.
func (n *Node) HasReady() bool {
	return n.softState() != n.prevSoft ||
		n.hardState() != n.prevHard ||
		n.log.lastIndex() > n.handed ||
		n.snapshotReady ||
		n.applyLimit() > n.handedApplied ||
		len(n.msgs) > 0
}

// applyLimit is the last committed index the caller may apply: with
// AsyncStorageWrites, only entries persisted here are handed out to apply,
// so that a replica never acts on an entry its own disk may still lose.
func (n *Node) applyLimit() uint64 {
	if n.asyncWrites {
		return min(n.log.committed, n.log.stable())
	}
	return n.log.committed
}

// Ready returns what the caller must do now: persist, then send, then
// apply, then call Advance (see the package doc). Each message and entry is
// handed out once; calling Ready again before Advance returns only what is
// new, and Advance then acknowledges both.
func (n *Node) Ready() Ready {
	rd := Ready{SoftState: n.softState(), HardState: n.hardState()}
	if n.snapshotReady {
		rd.Snapshot, n.snapshotReady = n.snapshot, false
	}
	if n.handed < n.log.lastIndex() {
		rd.Entries = n.log.slice(n.handed+1, n.log.lastIndex())
	}
	rd.MustSync = rd.HardState.Term != n.prevHard.Term || rd.HardState.Vote != n.prevHard.Vote || len(rd.Entries) > 0 || !rd.Snapshot.IsEmpty()
	// The two message buffers alternate, so this Ready's messages stay
	// intact until the next Ready and sending allocates nothing.
	rd.Messages = n.msgs
	n.msgs, n.spareMsgs = n.spareMsgs[:0], n.msgs
	if hi := min(n.applyLimit(), n.handedApplied+MaxCommittedPerReady); hi > n.handedApplied {
		rd.CommittedEntries = n.log.slice(n.handedApplied+1, hi)
		n.handedApplied = hi
	}
	n.prevSoft, n.prevHard = rd.SoftState, rd.HardState
	n.handed = n.log.lastIndex()
	if len(rd.Entries) > 0 {
		rd.Mark = LogMark{Index: n.handed, Epoch: n.epoch}
	}
	return rd
}

// Advance tells the node that the caller persisted, sent and applied
// everything of the Readys handed out so far. The node then counts the
// persisted entries (a leader counts itself towards a quorum only for
// those) and the applied ones. With AsyncStorageWrites it counts only the
// applied ones: Persisted reports the persisted entries.
func (n *Node) Advance() {
	n.log.applied = max(n.log.applied, n.handedApplied)
	if !n.asyncWrites {
		n.stableTo(n.handed)
	}
}

// truncation is a replacement of log entries handed out for persisting:
// from index on, in epoch.
type truncation struct{ epoch, index uint64 }

// truncated records that the entries from index on, some of them handed
// out for persisting, were replaced (AsyncStorageWrites): a write of them
// still in flight makes durable only what precedes index.
func (n *Node) truncated(index uint64) {
	if !n.asyncWrites {
		return
	}
	n.epoch++
	n.truncs = append(n.truncs, truncation{n.epoch, index})
}

// Persisted tells a node with AsyncStorageWrites that the write m
// (Ready.Mark) is durable, and with it every write handed out before it;
// the caller reports writes in the order it made them. Entries a
// truncation replaced after m was handed out are not counted — their
// replacements' write is still to come — even where the same index and
// term came back since. A report that says nothing new is ignored.
func (n *Node) Persisted(m LogMark) {
	if !n.asyncWrites {
		panic("raft: Persisted called on a node without Config.AsyncStorageWrites; Advance reports the writes")
	}
	upTo := min(m.Index, n.handed)
	k := 0
	for _, t := range n.truncs {
		if t.epoch > m.Epoch {
			upTo = min(upTo, t.index-1)
			n.truncs[k] = t
			k++
		}
	}
	// Reports come in order: no later one predates what this one follows.
	n.truncs = n.truncs[:k]
	if upTo < m.Index {
		n.marks.Hit(coverage.RaftPersistedReplaced)
	}
	if upTo > n.log.stable() {
		n.stableTo(upTo)
	}
}

// stableTo marks the log durable up to index; a leader counts itself
// towards a quorum for it.
func (n *Node) stableTo(index uint64) {
	n.log.unstable = index + 1
	if n.role == Leader && n.prs[n.self].maybeUpdate(n.log.stable()) {
		if n.maybeCommit() {
			n.bcastCommit()
		}
	}
}

// Status returns a snapshot of the node's state, for tests, metrics and
// debugging.
func (n *Node) Status() Status {
	return Status{
		ID:              n.id,
		Role:            n.role,
		Term:            n.term,
		Lead:            n.lead,
		Commit:          n.log.committed,
		Applied:         n.log.applied,
		LastIndex:       n.log.lastIndex(),
		Snapshot:        n.snapshot.Index,
		FirstIndex:      n.log.firstIndex(),
		DroppedMessages: n.dropped,
	}
}

// CreateSnapshot records data, the caller's state machine as of the
// applied entry at index, as the node's snapshot, the one a leader sends
// to a peer whose next entry was compacted away (etcd's
// MemoryStorage.CreateSnapshot). It returns the snapshot, with the term
// of index, for the caller to persist. index must be applied and above the
// current snapshot's index. The node keeps data; the caller must not
// modify it.
func (n *Node) CreateSnapshot(index uint64, data []byte) (Snapshot, error) {
	if index > n.log.applied {
		return Snapshot{}, fmt.Errorf("raft: snapshot at index %d is beyond the applied index %d; snapshot only what was applied", index, n.log.applied)
	}
	if index <= n.snapshot.Index {
		return Snapshot{}, fmt.Errorf("raft: snapshot at index %d is not above the current snapshot's index %d", index, n.snapshot.Index)
	}
	t, ok := n.log.term(index)
	if !ok {
		return Snapshot{}, fmt.Errorf("raft: snapshot at index %d: its entry was compacted away (first index %d)", index, n.log.firstIndex())
	}
	n.snapshot = Snapshot{Index: index, Term: t, Data: data}
	return n.snapshot, nil
}

// SnapshotData returns the data of the node's snapshot (nil: none), which
// the caller must not modify.
func (n *Node) SnapshotData() []byte { return n.snapshot.Data }

// Compact drops the in-memory entries up to index, which the snapshot must
// cover (etcd's MemoryStorage.Compact): a peer that needs one of them gets
// the snapshot instead. A caller that compacts a little below its
// snapshot's index keeps a tail with which a peer just behind catches up
// by appends. Compacting at or below the current first index does
// nothing.
func (n *Node) Compact(index uint64) error {
	if index > n.snapshot.Index {
		return fmt.Errorf("raft: compacting to index %d, beyond the snapshot's index %d; create a snapshot first", index, n.snapshot.Index)
	}
	if index <= n.log.offset {
		return nil
	}
	n.marks.Hit(coverage.RaftLogCompacted)
	n.log.compactTo(index)
	return nil
}

// TransferLeadership asks the leader to hand leadership to the follower to,
// as etcd raft does: the leader stops accepting proposals
// (ErrTransferring), brings to's log up to date with its own and then sends
// it MsgTimeoutNow, on which to campaigns at once instead of after an
// election timeout. Its log being complete, it wins unless it or a majority
// is cut off. If to does not lead within an election timeout, the transfer
// is abandoned and the leader accepts proposals again. A transfer to the
// leader itself or to the current target does nothing; a new target
// replaces the current one. Only the leader can transfer (ErrNotLeader).
func (n *Node) TransferLeadership(to ID) error {
	if n.role != Leader {
		return ErrNotLeader
	}
	i, ok := slices.BinarySearch(n.peers, to)
	if !ok {
		return fmt.Errorf("raft: cannot transfer leadership to node %d, which is not among the peers %v", to, n.peers)
	}
	if to == n.id || to == n.leadTransferee {
		return nil
	}
	n.leadTransferee = to
	n.transferElapsed = 0
	if n.prs[i].match == n.log.lastIndex() {
		n.send(Message{To: to, Type: MsgTimeoutNow})
		return nil
	}
	n.sendAppend(i, true) // catch-up; its ack sends MsgTimeoutNow
	return nil
}

// abortTransfer forgets a leadership transfer, on timeout or role change.
func (n *Node) abortTransfer() {
	n.leadTransferee = None
	n.transferElapsed = 0
}

// TransferTarget returns the follower a leader would best hand over to: the
// one whose log matches the leader's furthest (the lowest id among equals),
// so that the transfer waits least for catch-up. None if this node is not
// the leader or has no peers.
func (n *Node) TransferTarget() ID {
	if n.role != Leader {
		return None
	}
	best, bestMatch := None, uint64(0)
	for i, p := range n.peers {
		if i != n.self && (best == None || n.prs[i].match > bestMatch) {
			best, bestMatch = p, n.prs[i].match
		}
	}
	return best
}

// LeadTransferee returns the follower a transfer is under way to, or None.
func (n *Node) LeadTransferee() ID { return n.leadTransferee }

// Lead returns the leader this node knows of in its term, or None, so that
// a caller can redirect proposals.
func (n *Node) Lead() ID { return n.lead }

// Role returns the node's current role, so that a caller can tell whether
// to propose here.
func (n *Node) Role() Role { return n.role }

// Term returns the node's current term, so that a caller can tell whether a
// leader it saw is still current.
func (n *Node) Term() uint64 { return n.term }
