package simrun

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// cutSpec is the swarm with a step limit far below a run's length: every
// run is cut, and so ends unknown.
func cutSpec(t *testing.T) string {
	return writeSpec(t, "swarm", "cut-swarm", func(s string) string {
		return regexp.MustCompile(`"step_limit": \d+`).ReplaceAllString(s, `"step_limit": 3000`)
	})
}

// TestHuntStopsOnUnknown: a hunt of the build as it is stops at the first
// run that ends unknown and reports it as a finding — its cause, exit 5,
// and a replay file that replays — instead of sweeping on.
func TestHuntStopsOnUnknown(t *testing.T) {
	spec := cutSpec(t)
	t.Chdir(t.TempDir())
	code, out, errs := simrun("hunt", "-spec", spec, "-seeds", "1..50", "-workers", "2", "-json")
	var j huntJSON
	if code != exitUnknown || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !j.Unknown || j.Detected || j.Seed != 1 || j.SeedsTried != 1 || j.Cause != "cut: step limit" || j.Replay == "" {
		t.Fatalf("got %+v", j)
	}
	if _, err := os.Stat(j.Replay); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := simrun("replay", j.Replay); code != exitUnknown || !strings.Contains(out, "unknown") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	// The text form says why.
	if code, out, _ := simrun("hunt", "-spec", spec, "-seeds", "1..50"); code != exitUnknown || !strings.Contains(out, "unknown (cut: step limit) at seed 1") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestSweepCountsUnknownsByCause: a sweep's summary counts its unknowns by
// cause, with the first run of each to reproduce; its JSON lines carry the
// cause.
func TestSweepCountsUnknownsByCause(t *testing.T) {
	spec := cutSpec(t)
	t.Chdir(t.TempDir())
	code, out, errs := simrun("sweep", "-spec", spec, "-seeds", "1..4", "-workers", "2", "-progress", "none", "-keep", "0")
	if code != exitUnknown || !regexp.MustCompile(`unknown by cause:\n  cut: step limit +4  first cut-swarm seed 1 — reproduce: `).MatchString(out) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	_, out, _ = simrun("sweep", "-spec", spec, "-seeds", "1..1", "-json", "-progress", "none", "-keep", "0")
	if !strings.Contains(out, `"cause":"cut: step limit"`) {
		t.Fatalf("json:\n%s", out)
	}
	// A sweep without unknowns prints no such section.
	if _, out, _ := simrun("sweep", "-scenario", "swarm", "-seeds", "1..2", "-progress", "none"); strings.Contains(out, "unknown by cause") {
		t.Fatalf("%s", out)
	}
}
