package raft

import (
	"fmt"
	"slices"
)

// raftLog is a node's log with its three watermarks. The whole log is kept
// in memory (no compaction; see the package doc), entries[i] holding index
// i+1, so that index arithmetic stays trivial.
//
// Invariants: applied <= committed <= lastIndex(); 1 <= unstable <=
// lastIndex()+1; entries[i].Index == i+1; terms never decrease.
type raftLog struct {
	entries []Entry
	// committed is the highest index known to be committed.
	committed uint64
	// applied is the highest index whose entry the caller has applied (it
	// was in a Ready's CommittedEntries and Advance was called).
	applied uint64
	// unstable is the first index not yet known to be persisted: entries
	// from it on go out in the next Ready.
	unstable uint64
}

func (l *raftLog) lastIndex() uint64 { return uint64(len(l.entries)) }

func (l *raftLog) lastTerm() uint64 {
	if len(l.entries) == 0 {
		return 0
	}
	return l.entries[len(l.entries)-1].Term
}

// stable is the last index known to be persisted.
func (l *raftLog) stable() uint64 { return l.unstable - 1 }

// term returns the term of the entry at i; index 0 has term 0. ok is false
// when i is beyond the log.
func (l *raftLog) term(i uint64) (t uint64, ok bool) {
	if i == 0 {
		return 0, true
	}
	if i > l.lastIndex() {
		return 0, false
	}
	return l.entries[i-1].Term, true
}

// mustTerm is term for indexes the caller has already checked.
func (l *raftLog) mustTerm(i uint64) uint64 {
	t, ok := l.term(i)
	if !ok {
		panic(fmt.Sprintf("raft: internal error: term of index %d asked beyond last index %d", i, l.lastIndex()))
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
// already there. ents must be contiguous.
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
// beyond our log is returned as is, with term 0.
func (l *raftLog) findConflictByTerm(index, term uint64) (uint64, uint64) {
	if index > l.lastIndex() {
		return index, 0
	}
	for ; index > 0; index-- {
		if t := l.entries[index-1].Term; t <= term {
			return index, t
		}
	}
	return 0, 0
}

// truncateAndAppend writes ents (contiguous, ents[0].Index <=
// lastIndex()+1) into the log, dropping every entry from ents[0].Index on,
// and rewinds the persisted watermark to ents[0].Index, because what was
// persisted from there on is replaced.
func (l *raftLog) truncateAndAppend(ents []Entry) {
	if len(ents) == 0 {
		return
	}
	first := ents[0].Index
	if first == 0 || first > l.lastIndex()+1 {
		panic(fmt.Sprintf("raft: internal error: append at index %d leaves a gap after last index %d", first, l.lastIndex()))
	}
	if first <= l.committed {
		panic(fmt.Sprintf("raft: internal error: append at index %d would overwrite committed index %d", first, l.committed))
	}
	if first <= l.lastIndex() {
		// Replacing a suffix: write into a fresh array, because slices
		// handed out earlier (messages still in flight, Ready.Entries) share
		// the old one and must keep the entries they were given.
		l.entries = append(slices.Clip(l.entries[:first-1]), ents...)
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
// and truncateAndAppend moves to a fresh array), and the result's capacity
// ends at hi, so a caller's append cannot reach into the log either.
func (l *raftLog) slice(lo, hi uint64) []Entry {
	if lo > hi {
		return nil
	}
	if lo == 0 || hi > l.lastIndex() {
		panic(fmt.Sprintf("raft: internal error: slice [%d, %d] out of log [1, %d]", lo, hi, l.lastIndex()))
	}
	return l.entries[lo-1 : hi : hi]
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
