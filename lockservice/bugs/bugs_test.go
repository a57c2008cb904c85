package bugs

import (
	"slices"
	"strings"
	"testing"
)

// TestCatalogueSorted: the catalogue is written sorted by name (Mutants
// sorts a copy, but a reader of the file looks for a bug by name).
func TestCatalogueSorted(t *testing.T) {
	if !slices.IsSortedFunc(mutants, func(a, b MutantInfo) int { return strings.Compare(string(a.Name), string(b.Name)) }) {
		t.Error("the catalogue in bugs.go is not sorted by name")
	}
}

// TestParseMutantUnknown: an unknown name is an error that lists the known
// ones; "" is the reference.
func TestParseMutantUnknown(t *testing.T) {
	if m, err := ParseMutant(""); err != nil || m != "" {
		t.Errorf(`ParseMutant("") = %q, %v; want the reference`, m, err)
	}
	_, err := ParseMutant("no-such-bug")
	if err == nil || !strings.Contains(err.Error(), string(MutAckBeforeCommit)) {
		t.Errorf("ParseMutant(no-such-bug) = %v; want an error listing the known bugs", err)
	}
	if Design(MutLockdForgetsRequest) != "lockd" || Design(MutAckBeforeCommit) != "" {
		t.Error("Design: lockd's bugs live in lockd, the reference's in none")
	}
}
