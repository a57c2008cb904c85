package lockclient_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// BenchmarkCycleMem measures the client's cost per acquire→release cycle
// against the in-memory backend on loopback (one lock per worker), where
// HTTP and the client are all there is. Each lock runs the simulator's
// state machine on its own executor and clock.
//
//	go test -run '^$' -bench CycleMem -benchtime 2s ./lockapi/lockclient
func BenchmarkCycleMem(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(strconv.Itoa(workers), func(b *testing.B) {
			_, base := lockapitest.Serve(b, lockapitest.NewMem(), lockapi.Config{})
			c, err := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			per := b.N/workers + 1
			b.ReportAllocs()
			b.ResetTimer()
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := "r" + strconv.Itoa(w)
					for range per {
						l, err := c.TryAcquire(ctx, res, 10*time.Second)
						if err != nil {
							b.Error(err)
							return
						}
						if err := l.Release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
