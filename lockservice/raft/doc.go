// Package raft is fencesim's consensus core: Raft leader election and log
// replication, with the PreVote and CheckQuorum extensions, written as a pure
// state machine.
//
// # Why our own Raft
//
// go.etcd.io/raft/v3 draws its randomized election timeout from a
// process-wide crypto/rand source with no injection point, so a seeded
// simulation that uses it does not replay: two runs with the same seed elect
// different leaders at different times. fencesim's whole value is that every
// failure it finds replays exactly from its seed, so this package is written
// in etcd raft's shape but takes its only randomness from a *rand.Rand that
// the caller injects per node (Config.Rand).
//
// # Shape
//
// A Node is a pure state machine. Input arrives only through Step (a message
// from a peer), Tick (one unit of logical time) and Propose (a new command,
// on the leader). Output leaves only through Ready: the soft state for
// observers, a leader's snapshot to install, the hard state and log entries
// to persist, the messages to send and the committed entries to apply. The
// caller does all I/O for a Ready in this order, then calls Advance:
//
//  1. if Ready.MustSync, persist Ready.Snapshot (if not empty: it replaces
//     the whole persisted log), Ready.HardState and Ready.Entries durably
//     (when Entries[0].Index is at or below the last persisted index, first
//     truncate the persisted log from that index: a conflicting suffix was
//     replaced);
//  2. only then send Ready.Messages, because votes and acknowledgements in
//     them promise that the state they depend on survives a crash — except
//     a leader's MsgApp, MsgHeartbeat and MsgSnap, which may leave before
//     step 1, so that its sync overlaps its followers' (the Raft thesis,
//     10.2.1): they promise nothing of the Ready's writes (the leader's
//     term and vote were synced before the votes that elected it were
//     asked for, and it counts itself towards a quorum only for entries
//     past Advance, below);
//  3. restore the state machine from Ready.Snapshot, if not empty, then
//     apply Ready.CommittedEntries to it, in order;
//  4. call Advance.
//
// With Config.AsyncStorageWrites (etcd raft's option of the same name) the
// caller may call Advance before step 1's writes are durable and go on
// stepping, ticking and proposing while they reach the disk; it reports
// each Ready's entries durable with Persisted(Ready.Mark), in the order it
// wrote them. The node then counts a leader towards a quorum only for
// entries so reported, hands out in CommittedEntries only entries so
// reported (a replica never acts on an entry its own disk may still lose),
// and does not count entries a truncation replaced after the write was
// handed out — even ones a later leader put back with the same index and
// term. The votes and acknowledgements of a Ready must still wait for its
// writes — and, since a later Ready's acknowledgement may cover entries an
// earlier one wrote, for the writes of every Ready before it. A
// Ready.Snapshot must be durable before the caller moves on (the node
// counts the log persisted up to it at once).
//
// The package does no I/O, reads no clock, starts no goroutines and uses no
// channels, select, mutexes, wall-clock time, global math/rand or
// crypto/rand; internal/detlint checks its syntax for this. Peers are kept in
// sorted slices, never maps, so iteration order never reaches behaviour.
// Given the same Config (including the seed of Config.Rand) and the same
// sequence of calls, a Node produces the same sequence of Readys, bit for
// bit.
//
// # Protocol
//
// The package follows the Raft paper (Ongaro and Ousterhout, "In Search of an
// Understandable Consensus Algorithm", 2014) and etcd raft:
//
//   - A follower that hears from no leader for a randomized timeout, drawn
//     from [ElectionTick, 2*ElectionTick) on every reset, starts an election.
//   - With PreVote, it first runs a pre-election at term+1 without bumping
//     its term; only a pre-vote majority makes it a Candidate, so a node that
//     was partitioned away cannot disrupt a healthy cluster's term when it
//     rejoins.
//   - With CheckQuorum, a leader that has not heard from a majority
//     (counting itself) within an election timeout steps down, and a node
//     that has heard from a leader within the election timeout ignores
//     (pre-)vote requests for a higher term (the leader lease).
//   - Log replication uses the AppendEntries consistency check, truncates
//     conflicting suffixes, and follower reject hints let the leader skip a
//     whole divergent term per round trip. The leader tracks match and next
//     per peer (probe and replicate states, with a bounded window of
//     in-flight appends) and sends heartbeats every HeartbeatTick ticks
//     carrying commit = min(match, commit).
//   - A leader advances its commit index only to an index replicated on a
//     quorum whose entry is of its current term (the paper's Figure 8);
//     earlier entries commit indirectly. A new leader appends an empty entry
//     (Data == nil) of its term so that this happens promptly.
//   - The leader counts itself towards a quorum only for entries it has
//     persisted, that is, after the Advance of the Ready that carried them
//     (with AsyncStorageWrites, once Persisted reports them).
//   - Leadership transfer (TransferLeadership), as in etcd raft: the leader
//     refuses proposals, brings the target's log up to date, then sends it
//     MsgTimeoutNow; the target campaigns at once (no pre-election) with
//     votes marked Transfer, which voters grant despite the leader lease.
//     The leader abandons the transfer after an election timeout. Without a
//     call to TransferLeadership nothing of this runs.
//
// # Snapshots and log compaction
//
// As in etcd raft, the caller decides when to snapshot its state machine:
// CreateSnapshot(index, data) records data, the state as of an applied
// index, as the node's snapshot (etcd's MemoryStorage.CreateSnapshot), and
// Compact(index) drops the in-memory entries up to index, which the
// snapshot must cover (MemoryStorage.Compact; compacting a little below the
// snapshot keeps a tail with which a peer just behind catches up by
// appends). The caller persists the snapshot first and then drops the
// persisted log it covers, so that a crash in between leaves both.
//
// A leader whose next entry for a peer was compacted away sends the peer
// its snapshot (MsgSnap, InstallSnapshot) and treats it as a probe: the
// peer is paused until it acknowledges the snapshot's index, or until a
// heartbeat response shows it alive, upon which the next probe (from the
// snapshot's index) is answered either way; a lost snapshot is a lost
// probe (etcd instead waits for its transport to report the snapshot sent
// or failed). The follower ignores a snapshot at or below its commit index
// (stale: a duplicate, or appends got there first), only moves its commit
// index when its log already holds the snapshot's last entry with the same
// term (its log matches up to there), and otherwise replaces its whole log
// by the snapshot, which it gets in Ready.Snapshot to persist, acknowledge
// and apply.
//
// # Restart
//
// New with the Snapshot, HardState and Entries persisted from earlier
// Readys continues safely: the persisted vote prevents voting twice in a
// term, and because Applied starts at the snapshot's index every committed
// entry after it is delivered again in CommittedEntries, so the caller
// restores its state machine from the snapshot and rebuilds the rest by
// replay. A commit index persisted before the snapshot is raised to the
// snapshot's index.
//
// # Bounds
//
// With snapshots, the log in memory holds the entries after the last
// Compact, and a restart replays only the entries after the snapshot; how
// often to snapshot is the caller's choice (the reference replica does it
// every SnapshotEntries entries or SnapshotBytes bytes). A caller that
// never snapshots keeps every entry, in memory and on disk, for the life
// of the node, and replays the whole log on every restart.
//
// Every queue inside a Node is bounded: a MsgApp carries at most
// MaxEntriesPerMsg entries; each peer has at most MaxInflightMsgs appends in
// flight; a leader refuses proposals (ErrProposalDropped) while
// MaxUncommittedEntries entries are uncommitted; a follower ignores appends
// while MaxUnstableEntries entries wait to be persisted; one Ready carries at
// most MaxCommittedPerReady committed entries; and the outbox holds at most
// MaxPendingMsgs messages, dropping (and counting) the rest, which Raft
// tolerates as message loss.
//
// # Errors and panics
//
// Wire input is untrusted. A malformed or misaddressed message from a peer
// is answered with an error from Step and changes nothing: one from a node
// that is not a member, a term above MaxTerm or more than MaxTermJump
// ahead of the node's (so that the term never wraps nor runs out), a log term above the message's term, entries that are not
// contiguous or conflict with committed ones, an acknowledgement beyond the
// leader's log, and leader traffic from another node than the term's leader; messages from older terms are ignored (or
// answered with the current term), as the paper prescribes. The package
// panics only when one of its own invariants is broken, with a message that
// says which.
package raft
