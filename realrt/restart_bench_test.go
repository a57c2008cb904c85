package realrt_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
	"github.com/fencesim/fencesim/wire"
)

// Restart time against history length. A one-replica group of the
// reference (realrt, a file disk, reference.Replica: what fencesim-node
// runs) commits a history of acquire/release cycles; the node is then
// closed and restarted on its data directory, again and again, and each
// restart is timed. With snapshots (the defaults) a restart loads the
// newest snapshot and replays at most a threshold of entries, so its time
// and the directory's size do not grow with the history; with snapshots
// off it replays every entry ever committed.
//
// The histories are built once per process, in a temporary directory,
// before the timer starts. The 10,000,000-entry history takes a few
// minutes to build (and, without snapshots, about a gigabyte of disk), so
// it runs only when asked for:
//
//	go test ./realrt -run '^$' -bench Restart -benchtime 5x                                   # 100 k and 1 M entries
//	FENCESIM_RESTART_ENTRIES=10000000 go test ./realrt -run '^$' -bench 'Restart/snapshots' -benchtime 5x -timeout 60m
//
// Each restart reports load-ms (realrt.Start until the replica's Start has
// run: the disk opened, the snapshot restored, the log after it loaded and
// the committed tail applied), ready-ms (until it leads again: a group of
// one elects itself after one election timeout, 10–20 ms here), replayed
// (the log entries it loaded after its snapshot) and data-MB (the data
// directory).

// restartClient is the node id the benchmark's requests come from: a
// client outside the group, answered through Config.Local.
const restartClient process.NodeID = 99

// restartHistory is a data directory holding a committed history.
type restartHistory struct {
	dir     string
	entries uint64 // the last committed index
}

var restartHistories = map[string]restartHistory{}

// restartConfig is the benchmark's replica: fencesim-node's defaults
// (a snapshot every 20,000 entries or 8 MiB of commands; the file disk
// compacts past 8 MiB), snapshots off if replay, fast ticks so that a
// group of one elects itself soon after a restart, and room for a
// thousand requests in flight so that the history builds in large batches.
func restartConfig(replay bool) reference.ReplicaConfig {
	rc := reference.DefaultReplicaConfig([]process.NodeID{0})
	rc.TickInterval = time.Millisecond
	rc.IngressDepth = 4096
	rc.GroupCommit = true
	if replay {
		rc.SnapshotEntries, rc.SnapshotBytes = 0, 0
	}
	return rc
}

// restartNode starts the one-replica node on dir; replies to
// restartClient go to replies.
func restartNode(tb testing.TB, dir string, rc reference.ReplicaConfig, replies chan<- lockservice.LockReply) (*realrt.Node, *reference.Replica) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	rep := reference.NewReplica(rc)
	n, err := realrt.Start(realrt.Config{
		ID: 0, DataDir: dir, Disk: filedisk.Options{CompactBytes: nodesvc.DefaultDiskCompactBytes}, Listener: ln, Codec: wire.Codec{}, Seed: 1, Logger: slog.New(slog.DiscardHandler),
		Local: func(to process.NodeID, m process.Message) bool {
			if r, ok := m.(lockservice.LockReply); ok && to == restartClient && replies != nil {
				replies <- r
			}
			return to == restartClient
		},
	}, rep)
	if err != nil {
		tb.Fatal(err)
	}
	return n, rep
}

// awaitLeader waits until the replica leads.
func awaitLeader(tb testing.TB, n *realrt.Node, rep *reference.Replica) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lead bool
		if err := n.Do(context.Background(), func(process.Env) { lead, _ = rep.IsLeader() }); err != nil {
			tb.Fatal(err)
		}
		if lead {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("the replica did not lead within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// buildHistory commits at least entries entries in dir: rounds of 1,024
// clients each acquiring a resource of its own and releasing it, every
// round's requests submitted in one batch. Every answer is checked.
func buildHistory(tb testing.TB, dir string, entries uint64, replay bool) uint64 {
	tb.Helper()
	const clients = 1024
	replies := make(chan lockservice.LockReply, 2*clients)
	n, rep := restartNode(tb, dir, restartConfig(replay), replies)
	defer n.Close()
	awaitLeader(tb, n, rep)
	names := make([]string, clients)
	for i := range names {
		names[i] = "c" + strconv.Itoa(i)
	}
	tokens := make(map[uint64]uint64, clients) // request → token
	var request, last uint64
	collect := func(want lockservice.Status) {
		for range clients {
			select {
			case r := <-replies:
				if r.Status != want {
					tb.Fatalf("request %d: %v, want %v", r.Request, r.Status, want)
				}
				tokens[r.Request] = r.Token
				last = max(last, r.Token)
			case <-time.After(30 * time.Second):
				tb.Fatal("no answer within 30 s")
			}
		}
	}
	for last < entries {
		first := request + 1
		if err := n.Do(context.Background(), func(env process.Env) {
			for i := range clients {
				request++
				rep.Receive(env, restartClient, lockservice.AcquireRequest{Resource: names[i], Client: names[i], TTL: time.Minute, Request: request})
			}
		}); err != nil {
			tb.Fatal(err)
		}
		collect(lockservice.Granted)
		if err := n.Do(context.Background(), func(env process.Env) {
			for i := range clients {
				request++
				rep.Receive(env, restartClient, lockservice.ReleaseRequest{Resource: names[i], Client: names[i], Token: tokens[first+uint64(i)], Request: request})
			}
		}); err != nil {
			tb.Fatal(err)
		}
		clear(tokens)
		collect(lockservice.Released)
	}
	return last
}

// history returns the data directory of a history of at least entries
// entries, building it the first time.
func history(b *testing.B, entries uint64, replay bool) restartHistory {
	key := fmt.Sprintf("%d/%v", entries, replay)
	if h, ok := restartHistories[key]; ok {
		return h
	}
	dir, err := os.MkdirTemp("", "fencesim-restart-")
	if err != nil {
		b.Fatal(err)
	}
	built := false
	defer func() {
		if !built { // a failed build leaves nothing behind
			os.RemoveAll(dir)
		}
	}()
	start := time.Now()
	last := buildHistory(b, dir, entries, replay)
	built = true
	b.Logf("built %d entries (replay=%v) in %v: %.0f entries/s, %.1f MB on disk", last, replay, time.Since(start).Round(time.Second),
		float64(last)/time.Since(start).Seconds(), float64(dataBytes(b, dir))/1e6)
	h := restartHistory{dir: dir, entries: last}
	restartHistories[key] = h
	return h
}

// dataBytes is the size of the files under dir.
func dataBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
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
		tb.Fatal(err)
	}
	return n
}

func BenchmarkRestart(b *testing.B) {
	sizes := []uint64{100_000, 1_000_000}
	if s := os.Getenv("FENCESIM_RESTART_ENTRIES"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			b.Fatalf("FENCESIM_RESTART_ENTRIES=%q: want a positive number of entries", s)
		}
		sizes = []uint64{n}
	}
	b.Cleanup(func() {
		for _, h := range restartHistories {
			os.RemoveAll(h.dir)
		}
		clear(restartHistories)
	})
	for _, replay := range []bool{false, true} {
		mode := "snapshots"
		if replay {
			mode = "replay"
		}
		for _, size := range sizes {
			b.Run(fmt.Sprintf("%s/entries=%d", mode, size), func(b *testing.B) {
				h := history(b, size, replay)
				rc := restartConfig(replay)
				var load, ready time.Duration
				var replayed int
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					n, rep := restartNode(b, h.dir, rc, nil)
					if err := n.Do(context.Background(), func(process.Env) { _, replayed = rep.Loaded() }); err != nil {
						b.Fatal(err)
					}
					load += time.Since(start)
					awaitLeader(b, n, rep)
					ready += time.Since(start)
					b.StopTimer()
					if err := n.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(load.Microseconds())/1e3/float64(b.N), "load-ms")
				b.ReportMetric(float64(ready.Microseconds())/1e3/float64(b.N), "ready-ms")
				b.ReportMetric(float64(replayed), "replayed")
				b.ReportMetric(float64(dataBytes(b, h.dir))/1e6, "data-MB")
				b.ReportMetric(float64(h.entries), "history")
			})
		}
	}
}

// TestRestartBoundedByThresholds is the benchmark's claim at a small
// scale: after 150,000 committed entries a restarted node replays at most
// a snapshot threshold of entries, and its data directory is bounded by
// the file disk's compaction threshold, not by the history.
func TestRestartBoundedByThresholds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 150,000-entry history")
	}
	dir := t.TempDir()
	last := buildHistory(t, dir, 150_000, false)
	rc := restartConfig(false)
	n, rep := restartNode(t, dir, rc, nil)
	defer n.Close()
	var snap uint64
	var replayed int
	if err := n.Do(context.Background(), func(process.Env) { snap, replayed = rep.Loaded() }); err != nil {
		t.Fatal(err)
	}
	if snap == 0 || uint64(replayed) > rc.SnapshotEntries+rc.SnapshotKeep || snap+uint64(replayed) < last {
		t.Fatalf("restart after %d entries loaded a snapshot at %d and %d entries after it; want a snapshot and at most %d entries reaching %d",
			last, snap, replayed, rc.SnapshotEntries+rc.SnapshotKeep, last)
	}
	// The file disk compacts once its log passes CompactBytes and twice
	// the live data: at most about twice the threshold plus the live data.
	if got, bound := dataBytes(t, dir), int64(3*nodesvc.DefaultDiskCompactBytes); got > bound {
		t.Fatalf("data directory %d bytes after %d entries, want at most %d", got, last, bound)
	}
	awaitLeader(t, n, rep)
}
