package reference

import (
	"encoding/binary"
	"fmt"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/process"
)

// Snapshots and log compaction. A replica snapshots its state machine —
// the lock table and the index each lease last started at — once
// ReplicaConfig.SnapshotEntries entries or SnapshotBytes bytes of commands
// were applied since its last snapshot, and drops the log the snapshot
// covers, on disk and in memory:
//
//  1. the snapshot is written to its slotted record ("raft/snapshot/0|1")
//     and synced: a torn write leaves the previous snapshot in the other
//     slot, and the log it was taken from is still whole;
//  2. in memory, Raft's log is compacted to SnapshotKeep entries before
//     the snapshot, so that a follower just behind catches up by appends;
//  3. the log segments the snapshot covers entirely are deleted with the
//     next Ready's writes, under its sync, so that compaction costs no
//     fsync of its own; a crash before that leaves segments a restart
//     finds covered, and deletes.
//
// A snapshot a leader sends (MsgSnap, Ready.Snapshot) replaces the log:
// the snapshot is written and synced first, then every segment is deleted
// and the deletion synced, and only then is the acknowledgement sent. A
// crash in between leaves the new snapshot and the old log, which does not
// continue it; a restart recognises that (the old log's entry at the
// snapshot's index is missing or of another term) and drops the old log.
//
// A restart loads the newest intact snapshot, restores the table from it,
// then loads the log after it and hands Raft both (raft.Config.Snapshot):
// Raft applies only what follows the snapshot, so a restart costs the
// snapshot plus at most a threshold of entries, not the whole history.

const snapshotKey = "raft/snapshot"

// A Raft snapshot on disk is a header (the codec's version, index, term)
// followed by the state.

// snapshotHeader appends a snapshot's header to b.
func snapshotHeader(b []byte, s raft.Snapshot) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, s.Index)
	return binary.AppendUvarint(b, s.Term)
}

// storeSnapshot writes s into the replica's snapshot slots; the caller
// syncs.
func (r *Replica) storeSnapshot(d process.Disk, s raft.Snapshot) {
	var h [1 + 2*binary.MaxVarintLen64]byte
	r.snapshot.Store(d, snapshotHeader(h[:0], s), s.Data)
}

func decodeSnapshot(b []byte) (raft.Snapshot, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return raft.Snapshot{}, record.ErrCorrupt
	}
	r := record.Reader{B: b[1:]}
	s := raft.Snapshot{Index: r.Uvarint(), Term: r.Uvarint()}
	if r.Err != nil || s.Index == 0 || s.Term == 0 {
		return raft.Snapshot{}, record.ErrCorrupt
	}
	s.Data = append([]byte{}, r.B...)
	return s, nil
}

// stateData encodes the replica's state machine for a snapshot: the lock
// table and the index of the grant or renewal that started each lease (an
// expiry entry ends a lease only if it names that index); see
// snapshot_codec.go.
func (r *Replica) stateData() []byte {
	// Sized by the last one: the node keeps each snapshot's bytes, so
	// they cannot share a buffer, but they need not grow one either.
	return appendState(make([]byte, 0, len(r.node.SnapshotData())+64), r.table, r.started)
}

// restoreState replaces the replica's state machine by the one in a
// snapshot's data.
func (r *Replica) restoreState(s raft.Snapshot) {
	t, started, err := decodeState(s.Data)
	if err != nil {
		panic(fmt.Sprintf("lockservice: snapshot at index %d does not decode: %v", s.Index, err))
	}
	r.table, r.started = t, started
	r.table.Rules = r.cfg.Table
	r.applied = s.Index
	r.lastGrant = max(r.lastGrant, r.table.LastToken())
	r.sinceSnap, r.sinceSnapBytes = 0, 0
	// Grants this process decided and promotions it waited on, at indexes
	// the snapshot covers, will never apply here.
	for i := range r.decided { //detlint:sorted (deletes only)
		if i <= s.Index {
			delete(r.decided, i)
		}
	}
}

// snapshotDue reports whether the applied entries since the last snapshot
// passed a threshold.
func (r *Replica) snapshotDue() bool {
	return r.cfg.SnapshotEntries > 0 && r.sinceSnap >= r.cfg.SnapshotEntries ||
		r.cfg.SnapshotBytes > 0 && r.sinceSnapBytes >= r.cfg.SnapshotBytes
}

// maybeSnapshot snapshots the state machine at the applied index and
// compacts the log, if a threshold was passed (see the top of the file).
func (r *Replica) maybeSnapshot() {
	if !r.snapshotDue() {
		return
	}
	snap, err := r.node.CreateSnapshot(r.applied, r.stateData())
	if err != nil {
		panic(fmt.Sprintf("lockservice: replica %s: %v", r.env.Name(), err))
	}
	d := r.env.Disk()
	r.storeSnapshot(d, snap)
	r.sync(d)
	r.snapshotAt = r.env.Clock().Monotonic()
	r.compactTo = snap.Index
	if err := r.node.Compact(snap.Index - min(snap.Index, r.cfg.SnapshotKeep)); err != nil {
		panic(fmt.Sprintf("lockservice: replica %s: %v", r.env.Name(), err))
	}
	r.sinceSnap, r.sinceSnapBytes = 0, 0
	r.cfg.Marks.Hit(coverage.ReplicaSnapshotTaken)
}

// installSnapshot persists a leader's snapshot, which replaces the log
// (see the top of the file); the caller syncs the log's deletion with the
// rest of the Ready.
func (r *Replica) installSnapshot(d process.Disk, s raft.Snapshot) {
	r.storeSnapshot(d, s)
	r.sync(d)
	r.snapshotAt = r.env.Clock().Monotonic()
	r.log.replace(d, s.Index)
	r.compactTo = 0
}

// compactLog deletes the segments the last snapshot covers, if a snapshot
// was taken since the last Ready; the caller syncs.
func (r *Replica) compactLog(d process.Disk) {
	if r.compactTo > 0 {
		r.log.compact(d, r.compactTo)
		r.compactTo = 0
	}
}

// sync syncs d unless the planted bug says not to (UnsafeNoFsync).
func (r *Replica) sync(d process.Disk) {
	if !r.cfg.UnsafeNoFsync {
		d.Sync()
	}
}

// loadSnapshot loads the newest intact snapshot, if any, and restores the
// table from it.
func (r *Replica) loadSnapshot(d process.Disk) raft.Snapshot {
	r.snapshot = record.Slotted{Key: snapshotKey}
	b, ok := r.snapshot.Load(d)
	if r.snapshot.Torn {
		r.cfg.Marks.Hit(coverage.ReplicaSnapshotTorn)
	}
	if !ok {
		return raft.Snapshot{}
	}
	s, err := decodeSnapshot(b)
	if err != nil {
		panic(fmt.Sprintf("lockservice: sealed raft snapshot does not decode: %v", err))
	}
	r.restoreState(s)
	return s
}
