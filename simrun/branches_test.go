package simrun

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// coverBuild is how a user builds simrun with the counters that
// -branches reads (docs/guided-search.md says the same).
var coverBuild = []string{"build", "-cover", "-covermode=atomic",
	"-coverpkg=github.com/fencesim/fencesim/lockservice/...,github.com/fencesim/fencesim/cmd/simrun"}

// TestGuidedBranches builds simrun with coverage, as docs/guided-search.md
// says, and runs sweep -guided -branches: runs join the corpus for new
// blocks of the protocol code (not only for marks), the search is the
// same run after run and on one or two workers (the counters are the
// process's; the runs that read them go one at a time), and the build
// without counters refuses -branches with the command to build one.
func TestGuidedBranches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds simrun with coverage (about half a minute)")
	}
	if code, _, errs := simrun("sweep", "-guided", "-branches", "-seeds", "1..2"); code != exitUsage || !strings.Contains(errs, "-covermode=atomic") {
		t.Fatalf("-branches in a binary without counters: exit %d %q, want 2 and how to build one", code, errs)
	}
	bin := filepath.Join(t.TempDir(), "simrun-cov")
	_, here, _, _ := runtime.Caller(0) // TestMain runs the tests elsewhere
	build := exec.Command("go", append(coverBuild, "-o", bin, "./cmd/simrun")...)
	build.Dir = filepath.Dir(filepath.Dir(here)) // the module's root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	search := func(workers string) (whys []string, summary string) {
		t.Helper()
		cmd := exec.Command(bin, "sweep", "-guided", "-branches", "-seeds", "1..40", "-workers", workers, "-json", "-progress", "none")
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOCOVERDIR="+t.TempDir())
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", cmd.Args, err, out, errb.String())
		}
		summary = errb.String()
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var j guidedJSON
			if json.Unmarshal(sc.Bytes(), &j) == nil && j.Run > 0 {
				whys = append(whys, j.Origin+" → "+j.Corpus)
			} else {
				summary += sc.Text() + "\n"
			}
		}
		return whys, summary
	}
	one, summary := search("1")
	again, _ := search("1")
	two, _ := search("2")
	if len(one) != 40 {
		t.Fatalf("%d runs reported, want 40\n%s", len(one), summary)
	}
	branch := 0
	for _, w := range one {
		if strings.Contains(w, "new branch") {
			branch++
			if !strings.Contains(w, ".go:") { // e.g. "new branch raft.*Node.handleVote raft.go:429 ×2"
				t.Errorf("a branch admission does not say where the block is: %q", w)
			}
		}
	}
	if branch == 0 {
		t.Errorf("no run joined the corpus for a new branch:\n%s", strings.Join(one, "\n"))
	}
	if !strings.Contains(summary, "blocks of ") || !strings.Contains(summary, "of the covered code reached") {
		t.Errorf("the summary does not say how many blocks of how many were reached:\n%s", summary)
	}
	if strings.Join(one, "\n") != strings.Join(again, "\n") || strings.Join(one, "\n") != strings.Join(two, "\n") {
		t.Errorf("the search differs between runs or worker counts:\n1 worker:\n%s\nagain:\n%s\n2 workers:\n%s",
			strings.Join(one, "\n"), strings.Join(again, "\n"), strings.Join(two, "\n"))
	}
}
