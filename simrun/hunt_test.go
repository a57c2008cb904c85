package simrun

import (
	"encoding/json"
	"os"
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

// TestHuntTableHasBothColumns: -table renders a hunt's JSON lines as the
// README's table, the best scenario and the swarm alone side by side, with
// the swarm's median and maximum; a file that is not hunt output is a
// usage error naming the line.
func TestHuntTableHasBothColumns(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/hunt.jsonl"
	lines := `{"mutant":"store-no-fence","scenario":"kleppmann-gc-pause","detected":true,"property":"S3","seeds_tried":1,"wall_seconds":0.01,"seed":1}
{"mutant":"store-no-fence","scenario":"swarm","detected":true,"property":"S3","seeds_tried":9,"wall_seconds":0.07,"seed":9}
{"mutant":"ack-before-commit","scenario":"swarm","detected":true,"property":"S4","seeds_tried":1,"wall_seconds":0.02,"seed":1}
{"mutant":"token-unsynced","scenario":"swarm","detected":false,"seeds_tried":300,"wall_seconds":2.5}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := simrun("hunt", "-table", path)
	if code != exitPass {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"best scenario", "swarm alone", "kleppmann-gc-pause", "| S3 ", "| 9 ", "**not detected**", "> 300", "1 of 3 mutants not detected"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if err := os.WriteFile(path, []byte("{\"mutant\":\"x\",\"scenario\":\"swarm\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := simrun("hunt", "-table", path); code != exitUsage || !strings.Contains(errs, "line 2") {
		t.Errorf("a bad line: exit %d %q", code, errs)
	}
}
