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
// conflicting suffix is cut off by rewriting the one segment it starts in
// and deleting the later ones.

const (
	logKeyPrefix   = "raft/log/"
	segmentEntries = 4096
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
	// cut it there (a coverage mark).
	cut bool
}

// append writes ents, which continue the log or replace a suffix of it.
func (l *diskLog) append(d process.Disk, ents []raft.Entry) {
	if len(ents) == 0 {
		return
	}
	if first := ents[0].Index; first <= l.last {
		l.truncate(d, first)
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
	rest := raw
	for i := f; i < from; i++ {
		var ok bool
		if _, rest, ok = nextRecord(rest); !ok {
			panic("lockservice: internal error: a log segment holds fewer entries than the log it was written from")
		}
	}
	if keep := len(raw) - len(rest); keep > 0 {
		d.Write(key, raw[:keep])
	} else {
		d.Delete(key)
	}
	l.last = from - 1
}

// loadLog reads the persisted log: entries 1, 2, … up to the first one
// missing, torn or out of place. What lies beyond was never synced (only
// the last unsynced write can be torn, and a follower acknowledges only
// synced entries), so it is cut off, durably.
func loadLog(d process.Disk, per uint64) ([]raft.Entry, diskLog) {
	keys := d.Keys(logKeyPrefix)
	// Every segment but the last is full.
	entries := make([]raft.Entry, 0, uint64(max(len(keys)-1, 0))*per)
	for i, k := range keys {
		first := uint64(len(entries)) + 1
		raw, _ := d.Read(k)
		keep := 0
		if first == segmentFirst(first, per) && k == logKey(first) {
			// The entries' data alias one private copy of the segment.
			rest := slices.Clone(raw)
			for len(rest) > 0 {
				v, after, ok := nextRecord(rest)
				if !ok {
					break
				}
				e, err := decodeEntryShared(v)
				if err != nil || e.Index != uint64(len(entries))+1 || segmentFirst(e.Index, per) != first {
					break
				}
				entries = append(entries, e)
				rest = after
			}
			if keep = len(raw) - len(rest); keep == len(raw) {
				continue // the whole segment is intact
			}
		}
		// Cut the log where it stops being intact.
		if keep > 0 {
			d.Write(k, raw[:keep])
			keys = keys[i+1:]
		} else {
			keys = keys[i:]
		}
		for _, stale := range keys {
			d.Delete(stale)
		}
		d.Sync()
		return entries, diskLog{per: per, last: uint64(len(entries)), cut: true}
	}
	return entries, diskLog{per: per, last: uint64(len(entries))}
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
	l.last = uint64(len(entries))
	l.truncate(d, uint64(keep)+1)
	d.Sync()
	return entries[:keep]
}
