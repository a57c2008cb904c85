package reference

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/process"
)

// The Raft log on disk is a run of append-only segments, as a write-ahead
// log is a run of files: segment "raft/log/<first index>" holds entries
// first … first+segmentEntries−1, each sealed, one after another. Appending
// an entry costs one Disk.Append (a copy of the entry, not a key and a map
// slot per entry), and a restart reads a few segments front to back. A
// conflicting suffix is cut off by truncating the one segment it starts in
// and deleting the later ones. A snapshot (snapshot.go) lets the segments
// it covers go; the first segment after a leader's snapshot replaced the
// log starts in its middle, and a segment may keep entries before the
// snapshot until the segment goes as a whole.

const (
	logKeyPrefix   = "raft/log/"
	segmentEntries = 4096 // the default of ReplicaConfig.SegmentEntries
)

// logKey is the disk key of the segment starting at index first,
// zero-padded so that sorted keys are in log order. (Not fmt: it is on
// the path of every new segment.)
func logKey(first uint64) string {
	var b [len(logKeyPrefix) + 20]byte
	n := copy(b[:], logKeyPrefix)
	digits := strconv.AppendUint(b[n:n], first, 10)
	pad := 20 - len(digits)
	copy(b[n+pad:], digits)
	for i := n; i < n+pad; i++ {
		b[i] = '0'
	}
	return string(b[:])
}

// segmentFirst is the first index of the segment of per entries that
// holds index.
func segmentFirst(index, per uint64) uint64 {
	return (index-1)/per*per + 1
}

// keyFirst parses the first index out of a segment's key; false if the
// key is not one logKey makes.
func keyFirst(k string) (uint64, bool) {
	f, err := strconv.ParseUint(k[len(logKeyPrefix):], 10, 64)
	return f, err == nil && f > 0 && k == logKey(f)
}

// nextRecord splits the first sealed record off b: its value, the rest,
// and false if b starts with a torn or corrupt record (or is empty).
func nextRecord(b []byte) (value, rest []byte, ok bool) {
	if len(b) < record.SealHeader {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint32(b[0:4]))
	if n > len(b)-record.SealHeader {
		return nil, nil, false
	}
	value, ok = record.Unseal(b[:record.SealHeader+n])
	return value, b[record.SealHeader+n:], ok
}

// diskLog appends a replica's entries to its segments.
type diskLog struct {
	per      uint64 // entries per segment
	last     uint64 // the last index written (synced or not)
	segFirst uint64 // the segment appends go to, and its key
	segKey   string
	scratch  []byte // the sealed entry (the disk keeps its own copy)
	// cut says loadLog found the log torn or incomplete at its tail and
	// cut it there; segmentsLeft that it deleted segments the snapshot
	// covers; mismatch that it dropped a log that does not continue the
	// snapshot (coverage marks).
	cut, segmentsLeft, mismatch bool
}

// append writes ents, which continue the log or replace a suffix of it.
func (l *diskLog) append(d process.Disk, ents []raft.Entry) {
	if len(ents) == 0 {
		return
	}
	if first := ents[0].Index; first <= l.last {
		l.truncate(d, first)
		// The cut is made durable before any entry that replaces the
		// cut ones is written: the log spans segments, and a crash may
		// keep the unsynced changes of one and lose another's — a new
		// entry in a later segment durable while the old entries of the
		// cut segment stay before it, a log that breaks Raft's log
		// matching (swarm seed 69767: S10, two replicas applied
		// different entries at one index). Synced, the old entries are
		// gone; a crash can then only lose new ones, and loadLog cuts a
		// gap that leaves.
		d.Sync()
	}
	for _, e := range ents {
		if f := segmentFirst(e.Index, l.per); f != l.segFirst || l.segKey == "" {
			l.segFirst, l.segKey = f, logKey(f)
		}
		l.scratch = record.EndSeal(appendEntry(record.BeginSeal(l.scratch), e))
		d.Append(l.segKey, l.scratch)
	}
	l.last = ents[len(ents)-1].Index
}

// truncate drops every entry from index from on.
func (l *diskLog) truncate(d process.Disk, from uint64) {
	f := segmentFirst(from, l.per)
	for _, k := range d.Keys(logKeyPrefix) {
		if k > logKey(f) {
			d.Delete(k)
		}
	}
	key := logKey(f)
	raw, _ := d.Read(key)
	// Keep the records before from (the segment may start after f, past a
	// snapshot that replaced the log).
	rest := raw
	for len(rest) > 0 {
		v, after, ok := nextRecord(rest)
		if !ok {
			panic("lockservice: internal error: a log segment written in this process does not read back")
		}
		if e, err := decodeEntryShared(v); err != nil || e.Index >= from {
			break
		}
		rest = after
	}
	if keep := len(raw) - len(rest); keep > 0 {
		d.Truncate(key, keep) // not a rewrite: see loadLog
	} else {
		d.Delete(key)
	}
	l.last = from - 1
	l.segKey = "" // appends reopen the segment they go to
}

// compact deletes the segments whose entries a snapshot at index covers
// entirely. The caller syncs.
func (l *diskLog) compact(d process.Disk, index uint64) {
	for _, k := range d.Keys(logKeyPrefix) {
		f, ok := keyFirst(k)
		if !ok || f+l.per-1 > index {
			break // sorted: the later segments reach past index too
		}
		d.Delete(k)
	}
}

// replace drops the whole log for a leader's snapshot at index, after
// which the log continues at index+1. The caller syncs.
func (l *diskLog) replace(d process.Disk, index uint64) {
	for _, k := range d.Keys(logKeyPrefix) {
		d.Delete(k)
	}
	l.last = index
	l.segKey = ""
}

// termAt returns the term of the entry at index in segment k, if the
// segment holds it intact.
func termAt(d process.Disk, k string, index uint64) (uint64, bool) {
	raw, _ := d.Read(k)
	for len(raw) > 0 {
		v, rest, ok := nextRecord(raw)
		if !ok {
			return 0, false
		}
		if e, err := decodeEntryShared(v); err == nil && e.Index == index {
			return e.Term, true
		}
		raw = rest
	}
	return 0, false
}

// loadLog reads the persisted log after the snapshot snap (zero: none):
// entries snap.Index+1, +2, … up to the first one missing, torn or out of
// place. What lies beyond was never synced (only the last unsynced write
// can be torn, and a follower acknowledges only synced entries), so it is
// cut off, durably. Segments the snapshot covers entirely are deleted (a
// crash came between writing the snapshot and deleting them), and so is a
// log whose entry at the snapshot's index has another term (a crash came
// between installing a leader's snapshot and dropping the old log, which
// the snapshot replaced).
func loadLog(d process.Disk, per uint64, snap raft.Snapshot) ([]raft.Entry, diskLog) {
	keys := d.Keys(logKeyPrefix)
	l := diskLog{per: per, last: snap.Index}
	// Every segment but the last is full.
	entries := make([]raft.Entry, 0, uint64(max(len(keys)-1, 0))*per)
	dropped := false
	for i, k := range keys {
		next := snap.Index + uint64(len(entries)) + 1
		if f, ok := keyFirst(k); ok && f+per-1 < next {
			if f+per-1 == snap.Index {
				if t, found := termAt(d, k, snap.Index); found && t != snap.Term {
					l.mismatch = true // as below, at a segment's last entry
					for _, stale := range keys[i:] {
						d.Delete(stale)
					}
					d.Sync()
					return nil, l
				}
			}
			d.Delete(k) // covered by the snapshot
			l.segmentsLeft, dropped = true, true
			continue
		}
		raw, _ := d.Read(k)
		keep := 0
		if k == logKey(segmentFirst(next, per)) {
			// The entries' data alias one private copy of the segment.
			rest := slices.Clone(raw)
			for len(rest) > 0 {
				v, after, ok := nextRecord(rest)
				if !ok {
					break
				}
				e, err := decodeEntryShared(v)
				if err != nil || segmentFirst(e.Index, per) != segmentFirst(next, per) {
					break
				}
				if e.Index == snap.Index && e.Term != snap.Term && len(entries) == 0 {
					// The old log of a follower that installed the snapshot:
					// none of it continues the snapshot.
					l.mismatch = true
					for _, stale := range keys[i:] {
						d.Delete(stale)
					}
					d.Sync()
					return nil, l
				}
				if e.Index < next && len(entries) == 0 {
					rest = after // before the snapshot: kept until the segment goes
					continue
				}
				if e.Index != next {
					break
				}
				entries = append(entries, e)
				next++
				rest = after
			}
			if keep = len(raw) - len(rest); keep == len(raw) {
				continue // the whole segment is intact
			}
		}
		// Cut the log where it stops being intact: truncate the segment,
		// never rewrite its intact prefix — a torn crash during that
		// rewrite's sync would keep only part of the prefix, entries that
		// were synced and acknowledged, committed ones among them (a
		// finding of guided search, docs/guided-search.md).
		if keep > 0 {
			d.Truncate(k, keep)
			keys = keys[i+1:]
		} else {
			keys = keys[i:]
		}
		for _, stale := range keys {
			d.Delete(stale)
		}
		d.Sync()
		l.last, l.cut = snap.Index+uint64(len(entries)), true
		return entries, l
	}
	if dropped {
		d.Sync()
	}
	l.last = snap.Index + uint64(len(entries))
	return entries, l
}

// keepTerms cuts, durably, the entries of a term later than term (the
// persisted hard state's) from a loaded log and returns the rest. The log
// and the hard state are separate records, so a crash can keep unsynced
// appends while losing the unsynced hard state written before them; those
// entries were never acknowledged (a replica syncs before it answers), and
// Raft must not start with a log newer than its term.
func (l *diskLog) keepTerms(d process.Disk, entries []raft.Entry, term uint64) []raft.Entry {
	keep := len(entries)
	for keep > 0 && entries[keep-1].Term > term {
		keep--
	}
	if keep == len(entries) {
		return entries
	}
	l.truncate(d, entries[keep].Index)
	d.Sync()
	return entries[:keep]
}
