package simrun

import (
	"encoding/json"
	"os"
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

// TestMergeCoverage: merging shards swept with -coverage prints the
// whole sweep's coverage table, the same as one sweep's; a line naming an
// unknown mark is refused (exit 2).
func TestMergeCoverage(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, shard := range []string{"1/2", "2/2"} {
		code, out, errs := simrun("sweep", "-json", "-coverage", "-scenario", "swarm", "-seeds", "1..4", "-shard", shard, "-progress", "none", "-workers", "1")
		if code != exitPass {
			t.Fatalf("shard %s: exit %d: %s", shard, code, errs)
		}
		f := dir + "/shard" + strings.ReplaceAll(shard, "/", "of") + ".json"
		writeFile(t, f, out)
		files = append(files, f)
	}
	code, merged, errs := simrun(append([]string{"merge"}, files...)...)
	if code != exitPass {
		t.Fatalf("merge: exit %d: %s", code, errs)
	}
	_, whole, _ := simrun("sweep", "-coverage", "-scenario", "swarm", "-seeds", "1..4", "-progress", "none", "-workers", "1")
	table := func(s string) string {
		i := strings.Index(s, "coverage over")
		if i < 0 {
			t.Fatalf("no coverage table in:\n%s", s)
		}
		s = s[i:]
		if j := strings.Index(s, "\nmerged every shard"); j >= 0 {
			s = s[:j+1]
		}
		return s
	}
	if table(merged) != table(whole) {
		t.Errorf("merged coverage differs from one sweep's:\n%s\nvs\n%s", table(merged), table(whole))
	}

	bad := strings.Replace(readFile(t, files[0]), `"raft.append-gap"`, `"raft.nonsense"`, 1)
	writeFile(t, files[0], bad)
	if code, _, errs := simrun(append([]string{"merge"}, files...)...); code != exitUsage || !strings.Contains(errs, "unknown mark") {
		t.Errorf("merge of a line with an unknown mark: exit %d, %s; want exit 2 naming it", code, errs)
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
