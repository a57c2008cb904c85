package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/fencesim/fencesim/bench"
	"github.com/fencesim/fencesim/bench/systems"
)

// The soak (-soak D) runs fencesim-node, three real processes built from
// this checkout, under steady load for D and, every -soak-interval,
// reports what a long-running service must keep flat: each replica's data
// directory and resident memory, and the time a replica killed with
// SIGKILL takes to be ready again (its restart loads a snapshot and
// replays the log after it, so the time does not grow with the history).
// The load runs in the interval; the kill and restart come between
// intervals, on a follower (in turn), the leader untouched.

// soakRow is one interval's figures.
type soakRow struct {
	Elapsed      time.Duration
	CyclesPerSec float64
	Applied      float64 // the leader's applied index: the history so far
	Disk, RSS    [3]int64
	Killed       int
	Restart      time.Duration // SIGKILL to /readyz 200
	Snapshot     float64       // the restarted replica's snapshot index
	Replayed     float64       // and the entries after it it replayed
}

func soak(ctx context.Context, o options, dir string, stdout, stderr io.Writer) int {
	root, err := systems.ModuleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "fencesim-bench: building fencesim-node (%s)\n", root)
	bin, err := systems.BuildNode(root, dir)
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 1
	}
	sub, err := mkdirTemp(dir, "soak-")
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 1
	}
	var env []string
	if o.syncWrites {
		env = append(env, "FENCESIM_NODE_SYNC_WRITES=true")
	}
	c, err := systems.StartNodeProcs(bin, sub, env)
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 1
	}
	defer c.Close()
	workers := o.workers[0]
	cycle, err := systems.HTTPCycle(c.HTTP, workers, o.held, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fencesim-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "soak: fencesim-node, 3 processes, %d workers per-worker for %v, figures every %v; load average before %s\n\n",
		workers, o.soak, o.soakInterval, loadavg())
	fmt.Fprintln(stdout, "| elapsed | cycles/s | applied index | disk (max of 3) | RSS (max of 3) | killed | restart to ready | its snapshot | replayed entries |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|")
	began := time.Now()
	killed := 0
	for k := 0; time.Since(began) < o.soak && ctx.Err() == nil; k++ {
		cell := bench.Cell{Mode: bench.PerWorker, Workers: workers, Duration: o.soakInterval, Prefix: "soak-" + strconv.Itoa(k) + "-"}
		r := bench.Run(ctx, "node", cell, cycle)
		if r.Err != "" {
			fmt.Fprintf(stderr, "fencesim-bench: soak interval %d: %s\n", k, r.Err)
			return 1
		}
		row := soakRow{Elapsed: time.Since(began).Round(time.Second), CyclesPerSec: r.CyclesPerSec}
		lead := -1
		for i := range 3 {
			if v, err := c.Metric(i, "fencesim_node_raft_leader"); err == nil && v == 1 {
				lead = i
			}
			row.Disk[i], _ = c.DiskBytes(i)
			row.RSS[i], _ = c.RSS(i)
		}
		if lead < 0 {
			fmt.Fprintln(stderr, "fencesim-bench: soak: no leader")
			return 1
		}
		row.Applied, _ = c.Metric(lead, "fencesim_node_raft_applied_index")
		// Kill a follower, in turn, and time it back to ready.
		f := (lead + 1 + killed%2) % 3
		killed++
		start := time.Now()
		c.Kill(f)
		if err := c.Start(f); err != nil {
			fmt.Fprintf(stderr, "fencesim-bench: soak: %v\n", err)
			return 1
		}
		if err := c.WaitReady(f, 60*time.Second); err != nil {
			fmt.Fprintf(stderr, "fencesim-bench: soak: %v\n", err)
			return 1
		}
		row.Restart, row.Killed = time.Since(start), f
		row.Snapshot, _ = c.Metric(f, "fencesim_node_raft_start_snapshot_index")
		row.Replayed, _ = c.Metric(f, "fencesim_node_raft_start_replayed_entries")
		fmt.Fprintf(stdout, "| %v | %.0f | %.0f | %s | %s | %d | %v | %.0f | %.0f |\n", row.Elapsed, row.CyclesPerSec, row.Applied,
			mib(max(row.Disk[0], row.Disk[1], row.Disk[2])), mib(max(row.RSS[0], row.RSS[1], row.RSS[2])), row.Killed,
			row.Restart.Round(time.Millisecond), row.Snapshot, row.Replayed)
		if f, ok := stdout.(*os.File); ok {
			f.Sync()
		}
	}
	fmt.Fprintf(stdout, "\nload average after %s; ran %v\n", loadavg(), time.Since(began).Round(time.Second))
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
