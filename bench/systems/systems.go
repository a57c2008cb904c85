// Package systems starts the lock services fencesim-bench compares, each
// on this machine on free loopback ports with its data in a temporary
// directory, and gives the harness (package bench) a Cycle for each:
// fencesim-node's three replicas in process, fencesim-lockd in process
// over a redis-server child, and a three-member etcd-server cluster of
// child processes timed by the etcd driver (bench/etcd, its own module).
// Everything it starts, Close stops; nothing is left behind.
package systems

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/fencesim/fencesim/bench"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// TTL is the lease every cycle asks for: long enough that no lease
// expires mid-cycle under load, so a cycle is always acquire + release.
const TTL = 10 * time.Second

// HTTPCycle returns a cycle through the Go client (lockapi/lockclient)
// against the lock API at endpoints: one client per worker (its own
// name, so the service sees distinct owners), an acquire then Release.
// With wait false the acquire is TryAcquire and a held lock is retried at
// once (the anchor's best case for one contended lock with a polling
// client, every refusal counted as an attempt); with wait true it is the
// client's Acquire, which polls with jittered exponential backoff (what
// an application calls), counted as one attempt.
func HTTPCycle(endpoints []string, workers int, wait bool) (bench.Cycle, error) {
	clients := make([]*lockclient.Client, workers)
	for i := range clients {
		c, err := lockclient.New(lockclient.Config{Endpoints: endpoints, Name: "bench-w" + strconv.Itoa(i)})
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	return func(ctx context.Context, w int, resource string) (bool, error) {
		acquire := clients[w].TryAcquire
		if wait {
			acquire = clients[w].Acquire
		}
		l, err := acquire(ctx, resource, TTL)
		if errors.Is(err, lockclient.ErrHeld) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, l.Release(ctx)
	}, nil
}
