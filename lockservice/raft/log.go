package raft

import (
	"fmt"
	"slices"
)

// raftLog is a node's log with its three watermarks. It plays the part of
// etcd raft's MemoryStorage and unstable log together: the entries after
// offset are kept in memory, entries[i] holding index offset+i+1; the
// entries up to offset were compacted away (Node.Compact) and are covered by
// the snapshot, whose index is at or above offset. Only the term of the
// entry at offset is still known (offsetTerm), for the consistency check of
// the first entry after it.
//
// Invariants: offset <= snapshot index <= applied <= committed <=
// lastIndex(); offset+1 <= unstable <= lastIndex()+1; entries[i].Index ==
// offset+i+1; terms never decrease.
type raftLog struct {
	entries []Entry
	// offset is the index before entries[0]; offsetTerm its term.
	offset, offsetTerm uint64
	// committed is the highest index known to be committed.
	committed uint64
	// applied is the highest index whose entry the caller has applied (it
	// was in a Ready's CommittedEntries and Advance was called), or that a
	// snapshot the caller applied covers.
	applied uint64
	// unstable is the first index not yet known to be persisted: entries
	// from it on go out in the next Ready.
	unstable uint64
}

func (l *raftLog) lastIndex() uint64 { return l.offset + uint64(len(l.entries)) }

// firstIndex is the first index whose entry the log holds (lastIndex()+1
// when it holds none).
func (l *raftLog) firstIndex() uint64 { return l.offset + 1 }

func (l *raftLog) lastTerm() uint64 {
	if len(l.entries) == 0 {
		return l.offsetTerm
	}
	return l.entries[len(l.entries)-1].Term
}

// stable is the last index known to be persisted.
func (l *raftLog) stable() uint64 { return l.unstable - 1 }

// term returns the term of the entry at i; index 0 has term 0 (until it
// is compacted away), and the compacted offset its recorded term. ok is false when i is beyond the log
// or compacted away.
func (l *raftLog) term(i uint64) (t uint64, ok bool) {
	switch {
	case i == l.offset: // index 0 (term 0) when nothing was compacted
		return l.offsetTerm, true
	case i < l.offset || i > l.lastIndex():
		return 0, false
	}
	return l.entries[i-l.offset-1].Term, true
}

// mustTerm is term for indexes the caller has already checked.
func (l *raftLog) mustTerm(i uint64) uint64 {
	t, ok := l.term(i)
	if !ok {
		panic(fmt.Sprintf("raft: internal error: term of index %d asked outside the log [%d, %d]", i, l.offset, l.lastIndex()))
	}
	return t
}

func (l *raftLog) matchTerm(i, t uint64) bool {
	tt, ok := l.term(i)
	return ok && tt == t
}

// isUpToDate reports whether a log ending at (lastIndex, lastTerm) is at
// least as up to date as ours (Raft §5.4.1): a later last term wins, and on
// equal terms the longer log does.
func (l *raftLog) isUpToDate(lastIndex, lastTerm uint64) bool {
	return lastTerm > l.lastTerm() || (lastTerm == l.lastTerm() && lastIndex >= l.lastIndex())
}

// findConflict returns the index of the first entry of ents that is not in
// our log (beyond it, or with a different term), or 0 if all of ents are
// already there. ents must be contiguous and start after the offset.
func (l *raftLog) findConflict(ents []Entry) uint64 {
	for _, e := range ents {
		if !l.matchTerm(e.Index, e.Term) {
			return e.Index
		}
	}
	return 0
}

// findConflictByTerm returns the highest index <= index whose term is <=
// term, with that term; it lets a follower's rejection (and the leader's
// handling of it) skip all entries of a divergent term at once. An index
// beyond our log is returned as is, with term 0, and so is the first
// index whose term was compacted away (as etcd does).
func (l *raftLog) findConflictByTerm(index, term uint64) (uint64, uint64) {
	if index > l.lastIndex() {
		return index, 0
	}
	for ; index > 0; index-- {
		t, ok := l.term(index)
		if !ok {
			return index, 0
		}
		if t <= term {
			return index, t
		}
	}
	return 0, 0
}

// truncateAndAppend writes ents (contiguous, offset < ents[0].Index <=
// lastIndex()+1) into the log, dropping every entry from ents[0].Index on,
// and rewinds the persisted watermark to ents[0].Index, because what was
// persisted from there on is replaced.
func (l *raftLog) truncateAndAppend(ents []Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].Index
	if first <= l.offset || first > l.lastIndex()+1 {
		panic(fmt.Sprintf("raft: internal error: append at index %d outside the log (%d, %d+1]", first, l.offset, l.lastIndex()))
	}
	if first <= l.committed {
		panic(fmt.Sprintf("raft: internal error: append at index %d would overwrite committed index %d", first, l.committed))
	}
	if first <= l.lastIndex() {
		// Replacing a suffix: write into a fresh array, because slices
		// handed out earlier (messages still in flight, Ready.Entries) share
		// the old one and must keep the entries they were given.
		l.entries = append(slices.Clip(l.entries[:first-l.offset-1]), ents...)
	} else {
		l.entries = append(l.entries, ents...)
	}
	l.unstable = min(l.unstable, first)
}

// append adds e at the end of the log (the leader's path).
func (l *raftLog) append(e Entry) {
	if e.Index != l.lastIndex()+1 {
		panic(fmt.Sprintf("raft: internal error: appending index %d after last index %d", e.Index, l.lastIndex()))
	}
	if e.Term < l.lastTerm() {
		panic(fmt.Sprintf("raft: internal error: appending term %d after term %d", e.Term, l.lastTerm()))
	}
	l.entries = append(l.entries, e)
}

// slice returns the entries [lo, hi], inclusive, without copying them: the
// log never writes over an entry it has handed out (appends go past the end,
// and truncateAndAppend and compactTo move to a fresh array), and the
// result's capacity ends at hi, so a caller's append cannot reach into the
// log either.
func (l *raftLog) slice(lo, hi uint64) []Entry {
	if lo > hi {
		return nil
	}
	if lo <= l.offset || hi > l.lastIndex() {
		panic(fmt.Sprintf("raft: internal error: slice [%d, %d] out of log [%d, %d]", lo, hi, l.firstIndex(), l.lastIndex()))
	}
	return l.entries[lo-l.offset-1 : hi-l.offset : hi-l.offset]
}

// commitTo raises the commit index to i. It never lowers it: a committed
// entry stays committed.
func (l *raftLog) commitTo(i uint64) bool {
	if i <= l.committed {
		return false
	}
	if i > l.lastIndex() {
		panic(fmt.Sprintf("raft: internal error: commit index %d beyond last index %d", i, l.lastIndex()))
	}
	l.committed = i
	return true
}

// compactTo drops the entries up to index i (offset < i <= applied), keeping
// the term of i. The rest moves to a fresh array, so that the memory of the
// dropped entries is freed and slices handed out earlier stay intact.
func (l *raftLog) compactTo(i uint64) {
	if i <= l.offset || i > l.applied {
		panic(fmt.Sprintf("raft: internal error: compacting to %d outside (%d, applied %d]", i, l.offset, l.applied))
	}
	t := l.mustTerm(i)
	// A fresh array (slices handed out keep the old one), with the room
	// the log had: the entries that follow until the next compaction
	// append into it instead of growing it again from the kept few.
	kept := l.entries[i-l.offset:]
	l.entries = append(make([]Entry, 0, max(cap(l.entries)-int(i-l.offset), 2*len(kept), 16)), kept...)
	l.offset, l.offsetTerm = i, t
}

// restore replaces the whole log by snapshot s: nothing before or after it
// is kept (the follower's log did not match at s.Index), s.Index is
// committed, and the log is persisted up to it once the caller has
// persisted the snapshot.
func (l *raftLog) restore(s Snapshot) {
	l.entries = nil
	l.offset, l.offsetTerm = s.Index, s.Term
	l.committed = s.Index
	l.unstable = s.Index + 1
}
