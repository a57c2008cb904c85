package raft

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fencesim/fencesim/coverage"
)

// Config is everything New needs to build a node: its identity and peers,
// its timing in ticks, its random stream, the protocol options, and, on a
// restart, the state it persisted from earlier Readys.
type Config struct {
	// ID is this node's nonzero ID.
	ID ID
	// Peers lists all voters, including this node; typically 3 or 5.
	Peers []ID
	// ElectionTick is the election timeout in ticks: a follower that hears
	// from no leader for a randomized [ElectionTick, 2*ElectionTick) ticks
	// starts an election, and a CheckQuorum leader checks for a majority
	// every ElectionTick ticks. It must exceed HeartbeatTick.
	ElectionTick int
	// HeartbeatTick is how many ticks a leader waits between heartbeats.
	HeartbeatTick int
	// Rand is the node's own random stream for election jitter; required,
	// so that seeded runs replay.
	Rand *rand.Rand
	// PreVote makes a node win a pre-election before bumping its term.
	PreVote bool
	// CheckQuorum makes a leader step down when it has not heard from a
	// majority within an election timeout, and makes nodes that have heard
	// from a leader within it ignore vote requests.
	CheckQuorum bool

	// HardState is the hard state persisted from earlier Readys (zero for a
	// fresh node).
	HardState HardState
	// Snapshot is the persisted snapshot (zero for none): the caller has
	// restored its state machine from it, and the node applies only what
	// follows it.
	Snapshot Snapshot
	// Entries is the persisted log after the snapshot, indexes
	// Snapshot.Index+1.. contiguous (from 1 without a snapshot; empty for
	// a fresh node).
	Entries []Entry

	// MaxEntriesPerMsg caps the entries in one MsgApp and MaxInflightMsgs
	// the appends in flight to one peer; 0 means the package's
	// MaxEntriesPerMsg and MaxInflightMsgs, which are also their upper
	// bounds. Small values are for tests and simulations, which draw them
	// to make the paths of a lagging peer and a full window common.
	MaxEntriesPerMsg, MaxInflightMsgs int

	// Quorum returns how many voters make a majority of n; nil means
	// n/2+1. It is a hook so that a planted bug can change it.
	Quorum func(n int) int

	// AsyncStorageWrites lets the caller persist a Ready after Advance, in
	// the background, and report it with Persisted (etcd raft's option of
	// the same name): Advance then no longer says the Ready's entries are
	// durable, a leader counts itself towards a quorum only for entries
	// reported by Persisted, and Ready hands out for applying only
	// committed entries that are persisted here. The caller must still
	// hold a Ready's votes and acknowledgements until its writes, and
	// those of every Ready before it, are durable.
	AsyncStorageWrites bool
	// Marks counts the protocol corners the node reaches (coverage's
	// Raft marks); nil counts nothing. Counting never changes what the
	// node does.
	Marks *coverage.Counts
}

// Validate reports the first problem with c, so that a misconfigured node
// fails at construction instead of misbehaving later. Its errors say what to
// fix.
func (c Config) Validate() error {
	if c.ID == None {
		return errors.New("raft: Config.ID is 0; give the node a nonzero ID (0 means none)")
	}
	if len(c.Peers) == 0 {
		return errors.New("raft: Config.Peers is empty; list every voter, including this node")
	}
	sorted := slices.Clone(c.Peers)
	slices.Sort(sorted)
	if sorted[0] == None {
		return errors.New("raft: Config.Peers contains ID 0; peer IDs must be nonzero")
	}
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("raft: Config.Peers lists %d twice; list each voter once", sorted[i])
		}
	}
	if _, ok := slices.BinarySearch(sorted, c.ID); !ok {
		return fmt.Errorf("raft: Config.Peers %v does not contain Config.ID %d; list every voter, including this node", c.Peers, c.ID)
	}
	if c.HeartbeatTick <= 0 {
		return fmt.Errorf("raft: Config.HeartbeatTick is %d; set it to at least 1", c.HeartbeatTick)
	}
	if c.ElectionTick <= c.HeartbeatTick {
		return fmt.Errorf("raft: Config.ElectionTick (%d) must be greater than Config.HeartbeatTick (%d); typically 10 and 1",
			c.ElectionTick, c.HeartbeatTick)
	}
	if c.MaxEntriesPerMsg < 0 || c.MaxEntriesPerMsg > MaxEntriesPerMsg {
		return fmt.Errorf("raft: Config.MaxEntriesPerMsg is %d; set it to 1..%d, or 0 for %d", c.MaxEntriesPerMsg, MaxEntriesPerMsg, MaxEntriesPerMsg)
	}
	if c.MaxInflightMsgs < 0 || c.MaxInflightMsgs > MaxInflightMsgs {
		return fmt.Errorf("raft: Config.MaxInflightMsgs is %d; set it to 1..%d, or 0 for %d", c.MaxInflightMsgs, MaxInflightMsgs, MaxInflightMsgs)
	}
	if c.Rand == nil {
		return errors.New("raft: Config.Rand is nil; inject a seeded *rand.Rand (e.g. rand.New(rand.NewPCG(seed, id))) so runs replay")
	}
	snap := c.Snapshot
	if (snap.Index == 0) != (snap.Term == 0) {
		return fmt.Errorf("raft: Config.Snapshot has index %d and term %d; a snapshot has both >= 1, no snapshot both 0", snap.Index, snap.Term)
	}
	prevTerm := snap.Term
	for i, e := range c.Entries {
		if want := snap.Index + uint64(i+1); e.Index != want {
			return fmt.Errorf("raft: Config.Entries[%d] has index %d, want %d; pass the persisted log contiguous from the snapshot's index + 1 (%d)", i, e.Index, want, snap.Index+1)
		}
		if e.Term == 0 {
			return fmt.Errorf("raft: Config.Entries[%d] (index %d) has term 0; entries are written in terms >= 1", i, e.Index)
		}
		if e.Term < prevTerm {
			return fmt.Errorf("raft: Config.Entries[%d] (index %d) has term %d after term %d; terms in a log never decrease",
				i, e.Index, e.Term, prevTerm)
		}
		prevTerm = e.Term
	}
	hs := c.HardState
	if hs.Term < prevTerm {
		return fmt.Errorf("raft: Config.HardState.Term %d is below the last entry's term %d (or the snapshot's); pass the HardState persisted with these entries",
			hs.Term, prevTerm)
	}
	if last := snap.Index + uint64(len(c.Entries)); hs.Commit > last {
		return fmt.Errorf("raft: Config.HardState.Commit %d is beyond the last entry %d; pass the entries persisted with this HardState",
			hs.Commit, last)
	}
	if hs.Vote != None {
		if _, ok := slices.BinarySearch(sorted, hs.Vote); !ok {
			return fmt.Errorf("raft: Config.HardState.Vote %d is not in Config.Peers %v; pass the HardState persisted by this cluster", hs.Vote, c.Peers)
		}
		if hs.Term == 0 {
			return fmt.Errorf("raft: Config.HardState has Vote %d in term 0; votes are cast in terms >= 1", hs.Vote)
		}
	}
	return nil
}
