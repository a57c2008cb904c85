package simrun

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHuntFindsAPlantedBug(t *testing.T) {
	code, out, errs := simrun("hunt", "-mutant", "store-no-fence", "-seeds", "1..20", "-json")
	var j huntJSON
	if code != exitPass || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !j.Detected || j.Property != "S3" || j.SeedsTried < 1 || j.Seed == 0 || !strings.Contains(j.Repro, "-mutant store-no-fence") {
		t.Fatalf("got %+v", j)
	}
	// The repro line reproduces the detection.
	if code, out, _ := simrun("run", "-scenario", j.Scenario, "-seed", itoa(j.Seed), "-mutant", "store-no-fence"); code != exitViolation || !strings.Contains(out, "S3") {
		t.Fatalf("repro: exit %d\n%s", code, out)
	}
}

func TestHuntBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-mutant", "nope"}, {"-all", "-mutant", "store-no-fence"}, {"-mutant", "store-no-fence", "-seeds", "9..1"},
		{"-mutant", "store-no-fence", "-scenario", "nope"}, {"-mutant", "store-no-fence", "-workers", "0"},
	} {
		if code, _, errs := simrun(append([]string{"hunt"}, args...)...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
}

func TestListMutants(t *testing.T) {
	code, out, _ := simrun("list", "-mutants")
	if code != exitPass || !strings.Contains(out, "store-no-fence") || !strings.Contains(out, "quorum-off-by-one") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the standard run")
	}
	code, out, errs := simrun("bench", "-seeds", "1", "-json")
	var j map[string]any
	if code != exitPass || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, k := range []string{"acceleration", "events_per_second", "calibration_events_per_second", "ratio",
		"seeds_per_second_1", "seeds_per_second_all", "checker_share", "peak_heap_bytes"} {
		if v, ok := j[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive figure", k, j[k])
		}
	}
	if code, _, _ := simrun("bench", "-seeds", "0"); code != exitUsage {
		t.Errorf("-seeds 0: exit %d", code)
	}
}
