package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestSmoke runs the whole harness briefly against fencesim-node (three
// replicas in process), fencesim-lockd and its scripts without HTTP (raw
// Redis) over miniredis — etcd and a real
// redis-server only run by hand — and checks that every cell was measured
// with sane figures and that the table lists every cell.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	mr := miniredis.RunT(t)
	args := []string{"-only", "node,lockd,redis", "-workers", "1,8", "-duration", "1s", "-warmup", "50ms",
		"-redis-addr", mr.Addr(), "-data", t.TempDir()}
	rep := runJSON(t, args)
	seen := map[string]bool{}
	for _, r := range rep.Results {
		cell := fmt.Sprintf("%s/%s/%d", r.System, r.Mode, r.Workers)
		seen[cell] = true
		switch {
		case r.Err != "":
			t.Errorf("%s failed: %s", cell, r.Err)
		case r.Cycles < 1 || r.CyclesPerSec <= 0 || r.Attempts < r.Cycles:
			t.Errorf("%s: %d cycles (%v/s) in %d attempts", cell, r.Cycles, r.CyclesPerSec, r.Attempts)
		case r.P50us <= 0 || r.P99us < r.P50us || r.P99us > 5e6:
			t.Errorf("%s: p50 %vµs p99 %vµs", cell, r.P50us, r.P99us)
		case r.Mode == "per-worker" && r.Attempts != r.Cycles:
			t.Errorf("%s: %d attempts for %d cycles on locks of its own: none can be held", cell, r.Attempts, r.Cycles)
		case r.Attempts != r.Cycles:
			// -held wait (the default): a contender waits at the service,
			// one acquire per cycle, instead of being refused and asking again.
			t.Errorf("%s: %d attempts for %d cycles: the contenders did not wait", cell, r.Attempts, r.Cycles)
		}
	}
	for _, sys := range []string{"fencesim-node", "fencesim-lockd", names["redis"]} {
		for _, cell := range []string{"per-worker/1", "per-worker/8", "shared/1", "shared/8"} {
			if !seen[sys+"/"+cell] {
				t.Errorf("no result for %s/%s", sys, cell)
			}
		}
	}
	if len(rep.Results) != 12 || rep.Machine.CPUs < 1 || rep.Machine.LoadBefore == "" {
		t.Errorf("%d results, machine %+v", len(rep.Results), rep.Machine)
	}

	// The table: a header and a row per cell, in cell order.
	var out, errb bytes.Buffer
	tableArgs := append(args, "-workers", "1", "-modes", "shared", "-held", "backoff")
	// -cpuprofile too, unless go test profiles already (one profile at a
	// time per process).
	prof := ""
	if f := flag.Lookup("test.cpuprofile"); f == nil || f.Value.String() == "" {
		prof = filepath.Join(t.TempDir(), "cpu.pprof")
		tableArgs = append(tableArgs, "-cpuprofile", prof)
	}
	if code := run(context.Background(), tableArgs, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	if st, err := os.Stat(prof); prof != "" && (err != nil || st.Size() == 0) {
		t.Errorf("-cpuprofile %s: %v, %v", prof, st, err)
	}
	var rows []string
	table, goals, _ := strings.Cut(out.String(), "\nGoals")
	if !strings.Contains(goals, "| fencesim-lockd ≥ 50 % of raw Redis's cycles/s | shared 1 |") {
		t.Errorf("no goal checked after the table:\n%s", out.String())
	}
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| fencesim-") || strings.HasPrefix(l, "| raw Redis") {
			rows = append(rows, strings.Join(strings.Fields(l)[:7], " "))
		}
	}
	want := []string{"| fencesim-node | shared | 1 |", "| fencesim-lockd | shared | 1 |", "| raw Redis (lockd's Lua) | shared"}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("table rows\n%s\nwant\n%s\nin:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"), out.String())
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"-only", "node,zookeeper"},
		{"-workers", "0"},
		{"-modes", "exclusive"},
		{"-duration", "1ms"},
		{"-held", "poll"},
		{"-soak", "100ms"},
		{"-soak-interval", "0s"},
		{"-cpuprofile", "cpu.out", "-soak", "1m"},
		{"-rounds", "0"},
		{"-rounds", "21"},
		{"-lockd-pipelines", "-2"},
		{"-raw-pipelines", "0"},
		{"-rounds", "2", "-soak", "1m"},
		{"-cpuprofile", "/nonexistent-dir/cpu.out", "-only", "node", "-workers", "1", "-modes", "shared", "-duration", "10ms"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", args, code, errb.String(), args[0])
		}
	}
}

// TestSoakSmoke: a two-interval soak builds fencesim-node, runs it as three
// processes under load, kills a follower with SIGKILL each interval and
// reports its restart, the snapshot it started from and what it replayed.
func TestSoakSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fencesim-node and runs three processes")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-soak", "2s", "-soak-interval", "1s", "-workers", "4", "-data", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	var rows []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| elapsed") {
			rows = append(rows, line)
		}
	}
	if len(rows) < 2 {
		t.Fatalf("%d interval rows, want 2:\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		f := strings.Split(r, "|")
		// | elapsed | cycles/s | applied | disk | RSS | killed | restart | snapshot | replayed |
		if len(f) != 11 || strings.TrimSpace(f[2]) == "0" || !strings.HasSuffix(strings.TrimSpace(f[4]), "MiB") || !strings.HasSuffix(strings.TrimSpace(f[7]), "s") {
			t.Errorf("row %q: want cycles, a disk size and a restart time", r)
		}
	}
}

// runJSON runs the bench with args and -json, and decodes its report.
func runJSON(t *testing.T, args []string) Report {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), append(slices.Clone(args), "-json"), &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-json printed %q: %v", out.String(), err)
	}
	return rep
}
