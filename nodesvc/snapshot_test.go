package nodesvc_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
	"github.com/fencesim/fencesim/process"
)

// dirBytes is the size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDataBoundedBySnapshots: a cluster that snapshots every 200 entries
// commits about 12,000 entries; every node's data directory stays bounded
// by the thresholds (the snapshot, the log after it and the file disk's
// own compaction), not by the history: it does not grow from the first
// half of the history to the whole. A follower restarted at the end loads
// the snapshot and replays at most a threshold of entries, not the
// history, and the group still grants.
func TestDataBoundedBySnapshots(t *testing.T) {
	const snapEntries, segEntries = 200, 64
	c := nodesvctest.New(t, 0, func(cfg *nodesvc.Config) {
		cfg.Snapshot = nodesvc.Snapshot{Entries: snapEntries, Keep: 20}
		cfg.Disk = filedisk.Options{CompactBytes: 64 << 10}
		cfg.Replica = func(rc *reference.ReplicaConfig) { rc.SegmentEntries = segEntries }
	})
	cycles := func(n int) {
		t.Helper()
		lead := c.Nodes[c.Leader()]
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, client := fmt.Sprintf("r%d", w), fmt.Sprintf("c%d", w)
				for i := range n / 8 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					l, err := lead.Acquire(ctx, res, client, time.Minute, 0, fmt.Sprintf("%s-%d", client, i))
					if err == nil {
						err = lead.Release(ctx, res, client, l.Token, "")
					}
					cancel()
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	cycles(3000) // about 6,000 entries
	var half []int64
	for _, d := range c.Dirs {
		half = append(half, dirBytes(t, d))
	}
	cycles(3000)
	for i, d := range c.Dirs {
		// Live: a snapshot of 8 clients' table and up to a threshold and a
		// segment of entries (~100 bytes each); the file disk compacts at
		// 64 KiB or twice the live data. History: ~12,000 entries, over a
		// megabyte.
		got := dirBytes(t, d)
		if got > 512<<10 || got > 2*half[i]+(64<<10) {
			t.Errorf("node %d's data directory holds %d bytes after ~12,000 entries (%d after ~6,000): it grows with the history", i, got, half[i])
		}
	}
	f := (c.Leader() + 1) % 3
	c.Stop(f)
	c.Start(f)
	// The replica starts on the node's executor: wait until it has.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Nodes[f].Node().Do(ctx, func(process.Env) {}); err != nil {
		t.Fatal(err)
	}
	snap, replayed := c.Nodes[f].Loaded()
	if snap < 10_000 || replayed > 2*snapEntries {
		t.Errorf("restarted node %d loaded a snapshot at %d and replayed %d entries; want a snapshot near the ~12,000th entry and at most %d entries", f, snap, replayed, 2*snapEntries)
	}
	cycles(80) // the group, with the restarted node, still grants
}
