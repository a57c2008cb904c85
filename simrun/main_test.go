package simrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func simrun(args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		in   string // substring of stdout+stderr
	}{
		{"no command", nil, exitUsage, "usage: simrun"},
		{"unknown command", []string{"fly"}, exitUsage, `unknown command "fly"`},
		{"reference passes", []string{"run", "-scenario", "kleppmann-gc-pause", "-seed", "1"}, exitPass, "verdict=pass"},
		{"canary is a violation", []string{"run", "-scenario", "unfenced-gc-pause", "-seed", "1"}, exitViolation, "property=S3"},
		{"unknown scenario lists them", []string{"run", "-scenario", "nope"}, exitUsage, "built-in scenarios: clock-drift-beyond-bound, clock-jump-on-leader, kleppmann-gc-pause"},
		{"missing scenario", []string{"run"}, exitUsage, "-scenario is required"},
		{"bad seed", []string{"run", "-scenario", "kleppmann-gc-pause", "-seed", "x"}, exitUsage, "invalid value"},
		{"bad flag", []string{"run", "-bogus"}, exitUsage, "flag provided but not defined"},
		{"stray argument", []string{"run", "-scenario", "kleppmann-gc-pause", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"list", []string{"list"}, exitPass, "violation S3"},
		{"check twice", []string{"run", "-scenario", "lock-server-restart", "-seed", "4", "-check-twice"}, exitPass, "verdict=pass"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := simrun(c.args...)
			if code != c.code || !strings.Contains(out+errs, c.in) {
				t.Fatalf("got exit %d, output:\n%s%s\nwant exit %d and %q", code, out, errs, c.code, c.in)
			}
		})
	}
}

func TestRunPrintsSeedAndOptionsFirst(t *testing.T) {
	_, out, _ := simrun("run", "-scenario", "kleppmann-gc-pause", "-seed", "9")
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || lines[0] != "scenario=kleppmann-gc-pause seed=9" || !strings.HasPrefix(lines[1], "options={") {
		t.Fatalf("want the seed then the options first, got:\n%s", out)
	}
}

func TestRunJSON(t *testing.T) {
	code, out, _ := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "2", "-json")
	if code != exitViolation {
		t.Fatalf("exit %d", code)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"scenario", "seed", "verdict", "property", "trace_hash", "events", "sim_seconds", "wall_seconds"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %q in %s", k, out)
		}
	}
	if got["verdict"] != "violation" || got["property"] != "S3" || got["seed"] != float64(2) {
		t.Fatalf("got %v", got)
	}
	// The same seed prints the same hash.
	_, again, _ := simrun("run", "-scenario", "unfenced-gc-pause", "-seed", "2", "-json")
	var got2 map[string]any
	json.Unmarshal([]byte(again), &got2)
	if got2["trace_hash"] != got["trace_hash"] {
		t.Fatalf("trace hash changed between identical runs: %v vs %v", got["trace_hash"], got2["trace_hash"])
	}
}

func TestRunOutDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, errs := simrun("run", "-scenario", "kleppmann-gc-pause", "-seed", "1", "-out", dir); code != exitPass {
		t.Fatalf("exit %d: %s", code, errs)
	}
	trace, err := os.ReadFile(filepath.Join(dir, "trace.txt"))
	if err != nil || !strings.Contains(string(trace), "step=1 t=0.000000s node=n1 event=start") {
		t.Fatalf("trace.txt: %v\n%.300s", err, trace)
	}
	var h struct {
		Ops []json.RawMessage `json:"ops"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil || json.Unmarshal(b, &h) != nil || len(h.Ops) == 0 {
		t.Fatalf("history.json: %v, %d ops", err, len(h.Ops))
	}
	for _, f := range []string{"result.json", "replay.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !strings.Contains(string(page), "kleppmann-gc-pause") {
		t.Fatalf("index.html: %v", err)
	}
	if m := regexp.MustCompile(`(?i)(https?:|//cdn|src="//)`).Find(page); m != nil {
		t.Fatalf("the report references a network resource: %q", m)
	}
	// Byte-identical for a seed.
	dir2 := filepath.Join(t.TempDir(), "run")
	simrun("run", "-scenario", "kleppmann-gc-pause", "-seed", "1", "-out", dir2)
	page2, _ := os.ReadFile(filepath.Join(dir2, "index.html"))
	if string(page) != string(page2) {
		t.Fatal("two reports of the same seed differ")
	}
}
