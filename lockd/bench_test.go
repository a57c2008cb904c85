package lockd

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/lockd/scripts"
)

// BenchmarkCycles measures acquire→release cycles/s on loopback, the
// anchor's measure (docs: /work/shared/anchors/lock-services.md): raw =
// the lockd Lua scripts called directly on Redis by go-redis; lockd = the
// same through the HTTP API (lockclient → lockapi server → Backend), so
// lockd/raw is what the HTTP service costs. Per-worker: one lock per
// worker; shared: every worker contends for one lock and retries at once
// when it is held (the anchor's best case for one contended lock). Cycles
// counts completed cycles; p50/p99 are per cycle, failed attempts
// included.
//
//	go test -run '^$' -bench Cycles -benchtime 2s ./lockd
func BenchmarkCycles(b *testing.B) {
	backends := []struct {
		name string
		addr func(b *testing.B) string
	}{
		{"miniredis", func(b *testing.B) string { return miniredis.RunT(b).Addr() }},
		{"redis-fsync-always", func(b *testing.B) string { return redistest.Start(b).Addr }},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			addr := be.addr(b)
			for _, mode := range []string{"per-worker", "shared"} {
				for _, workers := range []int{1, 8, 64} {
					for _, sys := range []string{"raw", "lockd"} {
						b.Run(sys+"/"+mode+"/"+strconv.Itoa(workers), func(b *testing.B) {
							runCycles(b, addr, sys, mode == "shared", workers)
						})
					}
				}
			}
		})
	}
}

// The raw cycle's scripts: the plain ones, without the wait queue.
var (
	acquireScript = redis.NewScript(scripts.Acquire)
	releaseScript = redis.NewScript(scripts.Release)
)

func runCycles(b *testing.B, addr, sys string, shared bool, workers int) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2 * workers, MaxRetries: -1})
	b.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	rdb.FlushAll(ctx)
	var cycle lockapitest.Cycle
	switch sys {
	case "raw":
		cycle = func(ctx context.Context, w, n int, res string) (bool, error) {
			client, id := "w"+strconv.Itoa(w), strconv.Itoa(n)
			be := New(rdb, Options{})
			r, err := be.run(ctx, acquireScript, scripts.AcquireCall(be.opts.Prefix, res, client, id, 10*time.Second, be.opts.RequestMemory)).Slice()
			if err != nil {
				return false, err
			}
			if g, _ := r[0].(int64); g == 0 {
				return false, nil
			}
			tok, _ := r[1].(string)
			t, _ := strconv.ParseUint(tok, 10, 64)
			// With a request id, as the Go client releases.
			ok, err := be.run(ctx, releaseScript, scripts.ReleaseCall(be.opts.Prefix, res, client, t, "r"+id)).Int()
			if err == nil && ok != 1 {
				err = errors.New("release refused")
			}
			return true, err
		}
	case "lockd":
		_, base := lockapitest.Serve(b, New(rdb, Options{}), lockapi.Config{Limiter: lockapi.LimiterConfig{Min: 1024, Max: 1024}})
		clients := make([]*lockclient.Client, workers)
		for i := range clients {
			c, err := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "w" + strconv.Itoa(i)})
			if err != nil {
				b.Fatal(err)
			}
			clients[i] = c
		}
		cycle = func(ctx context.Context, w, n int, res string) (bool, error) {
			l, err := clients[w].TryAcquire(ctx, res, 10*time.Second)
			if errors.Is(err, lockclient.ErrHeld) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			return true, l.Release(ctx)
		}
	}
	lockapitest.RunCycles(b, ctx, workers, shared, cycle)
}
