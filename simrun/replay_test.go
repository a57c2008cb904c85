package simrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/scenarios"
)

// TestMain runs the package's tests in a scratch directory: failing runs
// write replay files under ./failures. With SIMRUN_AS_MAIN=1 in its
// environment the test binary is simrun itself, for tests that need a
// process of their own (a signal).
func TestMain(m *testing.M) {
	if os.Getenv("SIMRUN_AS_MAIN") == "1" {
		Main()
	}
	dir, err := os.MkdirTemp("", "simrun-test")
	if err != nil {
		panic(err)
	}
	if err := os.Chdir(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestCanaryReplayReproduces is the acceptance check: a canary's failing
// run writes a replay file, and replaying it reproduces hash and verdict.
func TestCanaryReplayReproduces(t *testing.T) {
	code, out, _ := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "3")
	path := filepath.Join(failuresDir, "unfenced-gc-pause-seed3.json")
	if code != exitViolation || !strings.Contains(out, "replay file: "+path) {
		t.Fatalf("exit %d\n%s", code, out)
	}
	hash := field(out, "trace_hash=")
	code, out, errs := simrun("replay", path)
	if code != exitViolation || !strings.Contains(out, "reproduced: trace hash "+hash+", verdict violation S3") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
}

func TestReplayDetectsDifferencesAndBadFiles(t *testing.T) {
	simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "4")
	good, err := os.ReadFile(filepath.Join(failuresDir, "unfenced-gc-pause-seed4.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	r, _ := scenarios.ParseReplay(good)
	// An edited file is refused as modified (exit 2), naming the field: it
	// used to run and be reported as nondeterminism (exit 4).
	tampered := strings.Replace(string(good), `"trace_hash": "`+r.TraceHash+`"`, `"trace_hash": "0123456789abcdef"`, 1)
	if code, out, errs := simrun("replay", write("t.json", tampered)); code != exitUsage || !strings.Contains(errs, `modified after it was written: the field "trace_hash"`) {
		t.Errorf("an edited hash: exit %d\n%s%s", code, out, errs)
	}
	// A file as written whose run differs is nondeterminism.
	differs := r
	differs.TraceHash = "0123456789abcdef"
	if code, out, _ := simrun("replay", write("d.json", string(differs.Marshal()))); code != exitNondeterminism || !strings.Contains(out, "DIFFERS") {
		t.Errorf("a recorded hash that differs: exit %d\n%s", code, out)
	}
	old := r
	old.Program = "fencesim-0.1"
	other := string(old.Marshal())
	if code, _, errs := simrun("replay", write("v.json", other)); code != exitUsage || !strings.Contains(errs, "written by fencesim-0.1") {
		t.Errorf("other version: exit %d %q", code, errs)
	}
	if code, out, _ := simrun("replay", "-force", write("v.json", other)); code != exitViolation || !strings.Contains(out, "reproduced") {
		t.Errorf("other version with -force: exit %d\n%s", code, out)
	}
	for name, body := range map[string]string{"truncated": string(good[:len(good)/3]), "empty": "", "garbage": "\x00\x01"} {
		if code, _, errs := simrun("replay", write(name, body)); code != exitUsage || !strings.Contains(errs, "replay file") {
			t.Errorf("%s: exit %d %q", name, code, errs)
		}
	}
	if code, _, _ := simrun("replay"); code != exitUsage {
		t.Errorf("no file: exit %d", code)
	}
	if code, _, errs := simrun("replay", "/nonexistent/x.json"); code != exitUsage || errs == "" {
		t.Errorf("missing file: exit %d", code)
	}
}

func TestShrinkCommand(t *testing.T) {
	code, out, _ := simrun("shrink", "-scenario", "unfenced-gc-pause", "-seed", "2", "-o", "s.json")
	if code != exitViolation || !strings.Contains(out, "property S3 still fails") || !strings.Contains(out, "after:  1 fault operation,") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if code, out, _ := simrun("replay", "s.json"); code != exitViolation || !strings.Contains(out, "reproduced") {
		t.Fatalf("replaying the shrunk file: exit %d\n%s", code, out)
	}
	if code, _, errs := simrun("shrink", "-scenario", "kleppmann-gc-pause", "-seed", "1"); code != exitUsage || !strings.Contains(errs, "nothing to shrink") {
		t.Fatalf("a passing run: exit %d %q", code, errs)
	}
	if code, _, _ := simrun("shrink"); code != exitUsage {
		t.Fatalf("no arguments: exit %d", code)
	}
}

// field returns the value after key in out, up to the next space or newline.
func field(out, key string) string {
	_, after, _ := strings.Cut(out, key)
	v, _, _ := strings.Cut(after, " ")
	v, _, _ = strings.Cut(v, "\n")
	return v
}

// TestKeepFailureWritesReportAndReplay: what a sweep keeps of a miss — the
// report, the trace and a replay file that reproduces the run.
func TestKeepFailureWritesReportAndReplay(t *testing.T) {
	spec, _ := scenarios.Lookup("unfenced-gc-pause")
	res, err := scenarios.Run(spec, 5, scenarios.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir, _, err := keepFailure(res, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "trace.txt", "history.json", "replay.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if code, out, _ := simrun("replay", filepath.Join(dir, "replay.json")); code != exitViolation || !strings.Contains(out, "reproduced") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
}
