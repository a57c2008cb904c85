package simrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/scenarios"
)

// TestHelp: asking for help is not a usage error. `simrun help` lists every
// command; `simrun help CMD` and `simrun CMD -h` print that command's usage
// and flags on stdout and exit 0.
func TestHelp(t *testing.T) {
	code, out, _ := simrun("help")
	if code != exitPass {
		t.Fatalf("simrun help: exit %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(out, "\n  "+c.name+" ") {
			t.Errorf("simrun help does not list %s:\n%s", c.name, out)
		}
	}
	for _, c := range commands {
		if c.run == nil {
			continue
		}
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}, {c.name, "-help"}} {
			code, out, errs := simrun(args...)
			if code != exitPass || !strings.HasPrefix(out, "usage: simrun "+c.name+" ") || !(strings.Contains(out, "flags:\n  -") || strings.Contains(out, "flags: none")) || errs != "" {
				t.Errorf("simrun %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0 and the usage with its flags on stdout", strings.Join(args, " "), code, out, errs)
			}
		}
	}
	if _, out, _ := simrun("run", "-h"); !strings.Contains(out, "-spec file.json") {
		t.Errorf("run -h does not document -spec:\n%s", out)
	}
	if code, _, errs := simrun("help", "fly"); code != exitUsage || !strings.Contains(errs, `unknown command "fly"`) {
		t.Errorf("help fly: exit %d, %s", code, errs)
	}
	// A bad flag is still a usage error, explained on stderr.
	if code, out, errs := simrun("run", "-bogus"); code != exitUsage || out != "" || !strings.Contains(errs, "usage: simrun run") {
		t.Errorf("run -bogus: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
}

// writeSpec writes a copy of a built-in spec, renamed, into a file and
// returns its path; edit changes the JSON text first.
func writeSpec(t *testing.T, builtin, name string, edit func(string) string) string {
	t.Helper()
	spec, ok := scenarios.Lookup(builtin)
	if !ok {
		t.Fatalf("no built-in %s", builtin)
	}
	spec.Name = name
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if edit != nil {
		s = edit(s)
	}
	p := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunSpec: run -spec runs a user-written spec with the built-ins'
// validation; a bad file is a usage error that names the file and what to
// fix; -spec and -scenario exclude each other.
func TestRunSpec(t *testing.T) {
	t.Chdir(t.TempDir()) // failures/ lands here
	good := writeSpec(t, "unfenced-gc-pause", "my-pause", nil)
	code, out, errs := simrun("run", "-spec", good, "-seed", "3")
	if code != exitViolation || !strings.HasPrefix(out, "scenario=my-pause seed=3\n") || !strings.Contains(out, "property=S3") {
		t.Fatalf("run -spec: exit %d, output:\n%s%s", code, out, errs)
	}
	if want := "reproduce: go run ./cmd/simrun run -spec " + good + " -seed 3\n"; !strings.Contains(out, want) {
		t.Errorf("the repro line must name the spec file: want %q in\n%s", want, out)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if code, _, errs := simrun("run", "-spec", good, "-seed", "3", "-out", dir); code != exitViolation {
		t.Fatalf("run -spec -out: exit %d: %s", code, errs)
	}
	if page, _ := os.ReadFile(filepath.Join(dir, "index.html")); !strings.Contains(string(page), "run -spec "+good+" -seed 3") {
		t.Errorf("the report's repro line does not name the spec file")
	}
	// Its replay file reproduces it; run -scenario my-pause would not.
	replay := filepath.Join(failuresDir, "my-pause-seed3.json")
	if _, out, errs := simrun("replay", replay); !strings.Contains(out, "reproduce: go run ./cmd/simrun replay "+replay+"\n") || strings.Contains(out+errs, "-scenario my-pause") {
		t.Errorf("replaying a -spec run: want its repro line to name the replay file:\n%s%s", out, errs)
	}
	b, _ := os.ReadFile(replay)
	edited := filepath.Join(t.TempDir(), "edited.json")
	os.WriteFile(edited, []byte(strings.Replace(string(b), `"seed": 3`, `"seed": 4`, 1)), 0o644)
	if code, _, errs := simrun("replay", edited); code != exitUsage || !strings.Contains(errs, `write a fresh one with: simrun run -spec FILE.json -seed 4, FILE.json being the spec of scenario "my-pause"`) {
		t.Errorf("an edited replay file of a -spec run: exit %d\n%s", code, errs)
	}

	cases := []struct {
		name string
		args []string
		in   string
	}{
		{"both", []string{"-scenario", "kleppmann-gc-pause", "-spec", good}, "-scenario and -spec exclude each other"},
		{"missing file", []string{"-spec", filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
		{"unknown field", []string{"-spec", writeSpec(t, "kleppmann-gc-pause", "typo", func(s string) string {
			return strings.Replace(s, `"duration"`, `"duraton"`, 1)
		})}, `unknown field "duraton"`},
		{"bad value", []string{"-spec", writeSpec(t, "kleppmann-gc-pause", "four", func(s string) string {
			return strings.Replace(s, `"replicas": 3`, `"replicas": 4`, 1)
		})}, `scenario "four"`},
		{"fault on no node", []string{"-spec", writeSpec(t, "kleppmann-gc-pause", "ghost", func(s string) string {
			return strings.Replace(s, `"node": "@client:a"`, `"node": "zz"`, 1)
		})}, "zz"},
		{"leader the design lacks", []string{"-spec", writeSpec(t, "partitioned-leader", "leaderless", func(s string) string {
			return strings.Replace(strings.Replace(s, `"design": "replicated"`, `"design": "single-node"`, 1), `"replicas": 5,`, "", 1)
		})}, `scenario "leaderless": design single-node: nemesis: fault 0 (isolate @leader): @leader: the design elects no leader; aim at a node by its role, such as @replica:1`},
		{"bad property", []string{"-spec", writeSpec(t, "unfenced-gc-pause", "typo-property", func(s string) string {
			return strings.Replace(s, `"property": "S3"`, `"property": "S99"`, 1)
		})}, `scenario "typo-property": expect.property "S99" is no property of verdict "violation"; use one of S1,`},
		{"not JSON", []string{"-spec", writeSpec(t, "kleppmann-gc-pause", "broken", func(s string) string { return s[:len(s)/2] })}, "-spec "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := simrun(append([]string{"run"}, c.args...)...)
			if code != exitUsage || !strings.Contains(errs, c.in) || !strings.Contains(errs, "simrun run: ") {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 2 and %q", code, out, errs, c.in)
			}
		})
	}
}

// TestHeadlineIsTheExpectedProperty: redlock-gc-pause violates S2 before
// S3 and expects S3; every headline names S3.
func TestHeadlineIsTheExpectedProperty(t *testing.T) {
	t.Chdir(t.TempDir())
	_, out, _ := simrun("run", "-scenario", "redlock-gc-pause", "-seed", "1")
	if !strings.Contains(out, "\nverdict=violation property=S3 expected=\"violation S3\" met=true\n") || !strings.Contains(out, "  S2 at") {
		t.Errorf("text headline:\n%s", out)
	}
	_, out, _ = simrun("run", "-scenario", "redlock-gc-pause", "-seed", "1", "-json")
	if !strings.Contains(out, `"property":"S3"`) {
		t.Errorf("-json headline: %s", out)
	}
	dir := filepath.Join(t.TempDir(), "out")
	simrun("run", "-scenario", "redlock-gc-pause", "-seed", "1", "-out", dir)
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if !strings.Contains(string(page), ">violation S3</span>") {
		t.Errorf("the report's verdict badge does not name S3")
	}
	// Replaying its replay file heads the verdict the same way.
	if _, out, _ = simrun("replay", filepath.Join(failuresDir, "redlock-gc-pause-seed1.json")); !strings.Contains(out, ", verdict violation S3\n") {
		t.Errorf("replay headline:\n%s", out)
	}
	// Shrinking keeps the property the scenario exists to show.
	_, out, _ = simrun("shrink", "-scenario", "redlock-gc-pause", "-seed", "1", "-o", filepath.Join(t.TempDir(), "s.json"))
	if !strings.Contains(out, "property S3 still fails") {
		t.Errorf("shrink:\n%s", out)
	}
}

// TestBeliefOverlapLine: only a fenced design is credited with making
// belief overlap harmless.
func TestBeliefOverlapLine(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		scenario string
		credit   bool
	}{{"kleppmann-gc-pause", true}, {"redlock-gc-pause", false}, {"unfenced-gc-pause", false}} {
		_, out, _ := simrun("run", "-scenario", c.scenario, "-seed", "1")
		if got := strings.Contains(out, "fencing is what makes it harmless"); got != c.credit || !strings.Contains(out, "belief overlap (") {
			t.Errorf("%s: credits fencing %v, want %v:\n%s", c.scenario, got, c.credit, out)
		}
	}
}

// TestCountsAgree: "1 operation", never "1 operations".
func TestCountsAgree(t *testing.T) {
	_, out, _ := simrun("run", "-scenario", "kleppmann-gc-pause", "-seed", "1")
	if !strings.Contains(out, "\nfaults: 1 operation\n") || !strings.Contains(out, ": 2 windows,") {
		t.Errorf("counts:\n%s", out)
	}
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "operation", "1 operation"}, {0, "operation", "0 operations"}, {2, "store apply", "2 store applies"}, {1, "store apply", "1 store apply"}, {3, "day", "3 days"}} {
		if got := scenarios.Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

// TestShrinkPrintsDurations: the shrunk schedule's times read as durations.
func TestShrinkPrintsDurations(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.json")
	code, stdout, errs := simrun("shrink", "-scenario", "unfenced-gc-pause", "-seed", "1", "-o", out)
	if code != exitViolation {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "  at 650ms: pause @client:a for 3s\n") || !strings.Contains(stdout, "1 fault operation, 2 clients, 3 replicas") {
		t.Errorf("shrink output:\n%s", stdout)
	}
}

// TestReportDrawsLeaderFaultsOnTheLeader: partitioned-leader's isolate
// @leader ops are drawn on the rows of the nodes that led.
func TestReportDrawsLeaderFaultsOnTheLeader(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if code, _, errs := simrun("run", "-scenario", "partitioned-leader", "-seed", "1", "-out", dir); code != exitPass {
		t.Fatalf("exit %d: %s", code, errs)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if n := strings.Count(string(page), "isolate @leader (@leader was n"); n < 2 {
		t.Errorf("the report names the resolved leader of %d isolate ops, want 2 (plus their bands)", n)
	}
}
