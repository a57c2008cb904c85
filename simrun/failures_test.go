package simrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/scenarios"
)

// TestKeepFailureCapsTheTrace: a miss whose trace is over the cap keeps its
// report, result, history and replay file, but not the trace: a note says
// its size and the command that prints it, and that command does.
func TestKeepFailureCapsTheTrace(t *testing.T) {
	spec, _ := scenarios.Lookup("unfenced-gc-pause")
	res, err := scenarios.Run(spec, 6, scenarios.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir, note, err := keepFailure(res, 10*kb, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "history.json", "result.json", "replay.json", traceNoteFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "trace.txt")); err == nil {
		t.Fatalf("trace.txt kept although it is over the cap")
	}
	cmd := "simrun replay -trace " + filepath.Join(dir, "replay.json")
	if !strings.Contains(note, "over the cap of 10KB") || !strings.Contains(note, cmd) || readFile(t, filepath.Join(dir, traceNoteFile)) != note+"\n" {
		t.Fatalf("note %q does not give the cap and %q", note, cmd)
	}
	code, _, trace := simrun("replay", "-trace", filepath.Join(dir, "replay.json"))
	if code != exitViolation || len(trace) <= 10*kb || !strings.Contains(trace, "store") {
		t.Fatalf("the note's command: exit %d, %d bytes of trace", code, len(trace))
	}

	// Under the cap the trace is kept and a stale note goes.
	if _, note, err := keepFailure(res, 0, nil); err != nil || note != "" {
		t.Fatalf("no cap: note %q, %v", note, err)
	}
	if _, err := os.Stat(filepath.Join(dir, traceNoteFile)); err == nil {
		t.Fatalf("a stale %s stays beside the kept trace", traceNoteFile)
	}
	if len(readFile(t, filepath.Join(dir, "trace.txt"))) != len(trace) {
		t.Fatalf("trace.txt differs from the note's command's trace")
	}
}

// TestRunOutCapsTheTrace: run -out keeps the trace only under -trace-cap
// too, and says how to get it.
func TestRunOutCapsTheTrace(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "1", "-out", dir, "-trace-cap", "20KB")
	if code != exitViolation || !strings.Contains(errs, "trace not kept") {
		t.Fatalf("exit %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "trace.txt")); err == nil {
		t.Fatalf("trace.txt kept over the cap")
	}
	// -trace still prints all of it to stderr.
	_, _, full := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "1", "-out", dir, "-trace-cap", "20KB", "-trace")
	if len(full) < 20*kb {
		t.Fatalf("-trace printed %d bytes", len(full))
	}
	if code, _, errs := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "1", "-out", dir, "-trace-cap", "-3MB"); code != exitUsage || !strings.Contains(errs, "want a size") {
		t.Fatalf("a negative cap: exit %d %q", code, errs)
	}
}

// TestSweepCapsFailureDirectories: a sweep whose every seed misses writes
// at most -keep report directories, lists every miss, and says how many it
// did not write.
func TestSweepCapsFailureDirectories(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, _ := simrun("sweep", "-scenario", "kleppmann-gc-pause", "-mutant", "store-no-fence", "-seeds", "1..5", "-keep", "2", "-progress", "none")
	if code != exitViolation {
		t.Fatalf("exit %d\n%s", code, out)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, failuresDir))
	if len(entries) != 2 || strings.Count(out, "MISS ") != 5 || strings.Count(out, "not written: the sweep's cap of 2 directories") != 3 ||
		!strings.Contains(out, "failures: 2 report directories") || !strings.Contains(out, "3 more misses not written") {
		t.Fatalf("%d directories written\n%s", len(entries), out)
	}
	// A cap in bytes: the directory that crosses it is the last.
	code, out, _ = simrun("sweep", "-scenario", "kleppmann-gc-pause", "-mutant", "store-no-fence", "-seeds", "11..15", "-keep-cap", "1KB", "-progress", "none")
	if code != exitViolation || !strings.Contains(out, "failures: 1 report directory ") || !strings.Contains(out, "4 more misses not written") ||
		!strings.Contains(out, "1 without their trace") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// The MISS lines are bounded too.
	code, out, _ = simrun("sweep", "-scenario", "kleppmann-gc-pause", "-mutant", "store-no-fence", "-seeds", "1..105", "-keep", "0", "-progress", "none")
	if code != exitViolation || strings.Count(out, "MISS ") != maxFailureLines || !strings.Contains(out, "and 5 more misses, not listed") {
		t.Fatalf("exit %d, %d MISS lines\n%s", code, strings.Count(out, "MISS "), out)
	}
}
