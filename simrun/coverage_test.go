package simrun

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/coverage"
)

// TestSweepCoverage: -coverage prints every mark with its hits and the
// fraction of seeds hitting it, the JSON lines carry each run's marks
// (only with -coverage), and `run` shows a run's marks.
func TestSweepCoverage(t *testing.T) {
	code, out, errs := simrun("sweep", "-scenario", "swarm", "-seeds", "1..4", "-coverage", "-progress", "none", "-workers", "1")
	if code != exitPass {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "coverage over 4 runs:") {
		t.Fatalf("no coverage table:\n%s", out)
	}
	for _, m := range coverage.All() {
		if !strings.Contains(out, "  "+m.String()+" ") {
			t.Errorf("coverage table lacks mark %s", m)
		}
	}
	// raft.append-gap: every swarm run has a follower catch up.
	if !strings.Contains(out, "raft.append-gap") || strings.Contains(out, "never hit") && strings.Contains(strings.SplitN(out, "never hit", 2)[1], "raft.append-gap") {
		t.Errorf("raft.append-gap reported as never hit:\n%s", out)
	}

	for _, withCov := range []bool{true, false} {
		args := []string{"sweep", "-json", "-scenario", "swarm", "-seeds", "1..2", "-progress", "none", "-workers", "1"}
		if withCov {
			args = append(args, "-coverage")
		}
		code, out, errs := simrun(args...)
		if code != exitPass {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var j struct {
				Seed  uint64            `json:"seed"`
				Marks map[string]uint64 `json:"marks"`
				Sweep any               `json:"sweep"`
			}
			if err := json.Unmarshal([]byte(l), &j); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			if j.Sweep != nil {
				continue
			}
			if withCov && j.Marks["raft.append-gap"] == 0 {
				t.Errorf("-coverage: seed %d's line carries no raft.append-gap: %v", j.Seed, j.Marks)
			}
			if !withCov && j.Marks != nil {
				t.Errorf("without -coverage, seed %d's line carries marks %v", j.Seed, j.Marks)
			}
		}
	}

	code, out, errs = simrun("run", "-scenario", "swarm", "-seed", "1")
	if code != exitPass || !strings.Contains(out, "marks: ") || !strings.Contains(out, "raft.append-gap=") {
		t.Fatalf("run: exit %d, no marks line:\n%s%s", code, out, errs)
	}
}
