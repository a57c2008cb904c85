package scenarios

import (
	"os"
	"testing"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
)

// TestGuidedFindingTornCut replays the guided search's finding, shrunk
// (testdata/guided-torn-cut.json, written by fencesim-0.12 before the fix,
// where it violated S2 and S10): replica n3 restarts on a slow disk with a
// torn log tail, cuts it, and a torn crash comes 17 ms later, while the
// cut is being synced. A replica that cut the tail by rewriting the kept
// prefix lost entries it had synced and acknowledged, committed ones among
// them; one that truncates keeps them, and the run passes. The plan is run
// as it is whatever program wrote it (its recorded hash is not compared),
// and the test checks the run still reaches the cut.
func TestGuidedFindingTornCut(t *testing.T) {
	b, err := os.ReadFile("testdata/guided-torn-cut.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseReplay(b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunPlan(r.Plan(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Marks.Get(coverage.ReplicaLogTailCut) == 0 {
		t.Fatalf("the run no longer cuts a torn log tail at a restart: it tests nothing (marks %v)", res.Marks.Map())
	}
	if res.Verdict.Kind != checker.VerdictPass {
		t.Fatalf("the torn crash during a restart's log cut: verdict %s %s, want pass", res.Verdict.Kind, res.Verdict.Property())
	}
}
