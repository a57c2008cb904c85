package lockd

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/lockapi"
)

func TestProbeShared(t *testing.T) {
	addr := redistest.Start(t).Addr
	for _, n := range []int{8, 64} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1})
		b := New(rdb, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var cycles, waits atomic.Int64
		var waitNs, relNs, gapNs, lastRel atomic.Int64
		var wg sync.WaitGroup
		for w := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					l, err := b.Acquire(ctx, "shared"+strconv.Itoa(n), "w"+strconv.Itoa(w), 10*time.Second, 5*time.Second, strconv.Itoa(i))
					var h *lockapi.HeldError
					if errors.As(err, &h) || err != nil {
						continue
					}
					if lr := lastRel.Load(); lr != 0 && l.Waited > 0 {
						gapNs.Add(time.Now().UnixNano() - lr)
					}
					if l.Waited > 0 {
						waits.Add(1)
						waitNs.Add(int64(l.Waited))
					}
					t0 := time.Now()
					b.Release(context.Background(), "shared"+strconv.Itoa(n), "w"+strconv.Itoa(w), l.Token, "")
					relNs.Add(int64(time.Since(t0)))
					lastRel.Store(time.Now().UnixNano())
					cycles.Add(1)
				}
			}()
		}
		wg.Wait()
		cancel()
		c := max(cycles.Load(), 1)
		t.Logf("%d workers: %d cycles/s, %d waited; release %v, release-to-grant %v", n, cycles.Load()/2, waits.Load(), time.Duration(relNs.Load()/c), time.Duration(gapNs.Load()/max(waits.Load(), 1)))
		rdb.Close()
	}
}
