package raft

import (
	"slices"
	"testing"
)

// TestLogSlicesAreNeverOverwritten: slices of the log are handed out without
// copying (in messages still in flight, in Ready.Entries), so neither a
// truncation that replaces a suffix nor an append to a handed-out slice may
// write over the entries they hold.
func TestLogSlicesAreNeverOverwritten(t *testing.T) {
	var l raftLog
	l.unstable = 1
	for i := uint64(1); i <= 5; i++ {
		l.append(Entry{Term: 1, Index: i, Data: []byte{byte(i)}})
	}
	handed := l.slice(2, 4)
	want := slices.Clone(handed)

	// A leader of term 2 replaces everything from index 3 on.
	l.truncateAndAppend([]Entry{{Term: 2, Index: 3, Data: []byte{30}}, {Term: 2, Index: 4, Data: []byte{40}}})
	if !slices.EqualFunc(handed, want, sameEntry) {
		t.Fatalf("truncation overwrote a handed-out slice: %v, want %v", handed, want)
	}
	if got := l.mustTerm(4); got != 2 || l.lastIndex() != 4 {
		t.Fatalf("log after truncation: term(4) = %d, last %d; want 2, 4", got, l.lastIndex())
	}

	// Appending to a handed-out slice must not reach into the log.
	tail := l.slice(1, 2)
	_ = append(tail, Entry{Term: 9, Index: 3})
	if got := l.mustTerm(3); got != 2 {
		t.Fatalf("an append to a handed-out slice changed the log: term(3) = %d, want 2", got)
	}
}
