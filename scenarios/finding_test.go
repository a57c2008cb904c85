package scenarios

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/nemesis"
)

// tornCutShift moves the finding's crash, restart and crash of n3 to
// where fencesim-0.15 leaves a torn tail on n3 (TestGuidedFindingTornCut).
const tornCutShift = 67 * time.Millisecond

// TestGuidedFindingTornCut replays the guided search's finding, shrunk
// (testdata/guided-torn-cut.json, written by fencesim-0.12 before the fix,
// where it violated S2 and S10): replica n3 restarts on a slow disk with a
// torn log tail, cuts it, and a torn crash comes 17 ms later, while the
// cut is being synced. A replica that cut the tail by rewriting the kept
// prefix lost entries it had synced and acknowledged, committed ones among
// them; one that truncates keeps them, and the run passes. The plan is run
// whatever program wrote it (its recorded hash is not compared), and the
// test checks the run still reaches the cut.
//
// Since fencesim-0.15 (a contended lock's hand-over is one log entry) n3's
// writes fall at other instants, and at 2.13 s its crash no longer leaves
// a torn tail: the crash, the restart and the second torn crash are run
// tornCutShift later (any shift of 50..84 ms reaches the cut), keeping
// the story: the restart cuts a torn tail on n3's slow disk (35 ms a
// sync, from 1.66 s) and the second torn crash comes 17 ms later, while
// the cut is being synced.
func TestGuidedFindingTornCut(t *testing.T) {
	b, err := os.ReadFile("testdata/guided-torn-cut.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseReplay(b)
	if err != nil {
		t.Fatal(err)
	}
	plan := r.Plan()
	plan.Schedule = slices.Clone(plan.Schedule)
	shifted := 0
	for i := range plan.Schedule {
		op := &plan.Schedule[i]
		if at := time.Duration(op.At); op.Node == "n3" && (op.Kind == nemesis.Crash || op.Kind == nemesis.Restart) && at >= 2*time.Second && at < 3*time.Second {
			op.At = nemesis.Duration(at + tornCutShift)
			shifted++
		}
	}
	if shifted != 3 {
		t.Fatalf("shifted %d of n3's crash, restart and crash, want 3: the replay changed", shifted)
	}
	res, err := RunPlan(plan, RunOptions{})
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
