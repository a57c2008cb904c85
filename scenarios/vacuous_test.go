package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
)

// TestNoGrantIsNotAPass: a run in which no lock was granted tested
// nothing (here its only client starts after the run's end) and is
// unknown, never a pass; the same spec with the client in time passes.
func TestNoGrantIsNotAPass(t *testing.T) {
	s, ok := Lookup("kleppmann-gc-pause")
	if !ok {
		t.Fatal("no kleppmann-gc-pause")
	}
	s.Faults = nil
	s.Clients = s.Clients[:1]
	s.Clients[0].StartDelay = Duration(2 * s.Duration)
	res, err := Run(s, 1, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Kind != checker.VerdictUnknown || !strings.Contains(res.Verdict.Unknown, "no lock was granted") {
		t.Fatalf("verdict %v (%s), want unknown: no lock was granted", res.Verdict.Kind, res.Verdict.Unknown)
	}
	s.Clients[0].StartDelay = Duration(100 * time.Millisecond)
	if res, err = Run(s, 1, RunOptions{}); err != nil || res.Verdict.Kind != checker.VerdictPass {
		t.Fatalf("with the client in time: verdict %v, %v", res.Verdict.Kind, err)
	}
}
