package nodesvc_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// BenchmarkCycles measures acquire→release cycles/s against a three-replica
// cluster on loopback, fsync on (every Raft append synced by a majority
// before the leader answers), through the HTTP API with the Go client —
// the anchor's measure (/work/shared/anchors/lock-services.md) and the
// same shape as lockd's BenchmarkCycles. Per-worker: one lock per worker;
// shared: every worker contends for one lock and retries at once when it
// is held. The node's default configuration (the API's adaptive limit,
// the replica's 64 proposals in flight): shed requests are retried by the
// client after Retry-After, and count in the cycle's latency. p50/p99 are
// per completed cycle, failed attempts included.
//
//	go test -run '^$' -bench Cycles -benchtime 2s ./nodesvc
func BenchmarkCycles(b *testing.B) {
	for _, mode := range []string{"per-worker", "shared"} {
		for _, workers := range []int{1, 8, 64} {
			b.Run(mode+"/"+strconv.Itoa(workers), func(b *testing.B) {
				runCycles(b, mode == "shared", workers)
			})
		}
	}
}

func runCycles(b *testing.B, shared bool, workers int) {
	c := newCluster(b)
	lead := c.Leader()
	var urls []string
	for i := range c.Peers {
		urls = append(urls, c.Peers[(lead+i)%3].HTTP) // the leader first
	}
	clients := make([]*lockclient.Client, workers)
	for i := range clients {
		cl, err := lockclient.New(lockclient.Config{Endpoints: urls, Name: "w" + strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lockapitest.RunCycles(b, ctx, workers, shared, func(ctx context.Context, w, _ int, res string) (bool, error) {
		l, err := clients[w].TryAcquire(ctx, res, 10*time.Second)
		if errors.Is(err, lockclient.ErrHeld) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, l.Release(ctx)
	})
}
