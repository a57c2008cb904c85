package simrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepGuided: sweep -guided runs a guided search of the swarm, says
// what its corpus holds and how far the marks got, and writes the corpus
// as replay files that replay.
func TestSweepGuided(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errs := simrun("sweep", "-guided", "-seeds", "1..16", "-workers", "2", "-progress", "none", "-corpus", "corpus")
	if code != exitPass || !strings.Contains(out, "swarm     pass    16") || !strings.Contains(out, "corpus: ") || !strings.Contains(out, "marks reached: ") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	files, _ := filepath.Glob(filepath.Join("corpus", "swarm-run*.json"))
	if len(files) == 0 {
		t.Fatalf("no corpus files\n%s", out)
	}
	if code, out, errs := simrun("replay", files[len(files)-1]); code != exitPass {
		t.Fatalf("replay %s: exit %d\n%s%s", files[len(files)-1], code, out, errs)
	}
}

func TestGuidedBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sweep", "-guided", "-all"}, {"sweep", "-guided", "-shard", "1/2"}, {"sweep", "-corpus", "x"},
		{"sweep", "-guided", "-scenario", "kleppmann-gc-pause"}, {"hunt", "-guided", "-mutant", "store-no-fence", "-scenario", "kleppmann-gc-pause"},
	} {
		if code, _, errs := simrun(args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
}

// TestHuntGuided: hunt -guided catches a planted bug and leaves the
// finding's replay file, which replays the violation.
func TestHuntGuided(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errs := simrun("hunt", "-guided", "-mutant", "store-no-fence", "-seeds", "1..50", "-json")
	var j huntJSON
	if code != exitPass || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !j.Detected || !j.Guided || j.Property != "S3" || j.Replay == "" || !strings.HasPrefix(j.Repro, "simrun replay ") {
		t.Fatalf("got %+v", j)
	}
	if _, err := os.Stat(j.Replay); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := simrun("replay", j.Replay); code != exitViolation || !strings.Contains(out, "S3") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
}
