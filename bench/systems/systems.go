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
	"net/http"
	"strconv"
	"time"

	"github.com/fencesim/fencesim/bench"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// How the node and lockd clients meet a held lock (HTTPCycle).
const (
	HeldRetry   = "retry"
	HeldBackoff = "backoff"
	HeldWait    = "wait"
)

// TTL is the lease every cycle asks for: long enough that no lease
// expires mid-cycle under load, so a cycle is always acquire + release.
const TTL = 10 * time.Second

// HTTPCycle returns a cycle through the Go client (lockapi/lockclient)
// against the lock API at endpoints: one client per worker (its own
// name, so the service sees distinct owners), an acquire then Release.
// held says how a held lock is met: HeldRetry, the acquire is TryAcquire
// and a held lock is retried at once (the anchor's best case for one
// contended lock with a polling client, every refusal counted as an
// attempt); HeldBackoff, the client's Acquire without waiting at the
// service, polling with jittered exponential backoff; HeldWait, the
// client's Acquire as an application calls it, waiting at the service
// (wait_ms) to be granted as the lock frees. Acquire counts as one
// attempt.
//
// hc is the HTTP client (nil: the Go client's default).
func HTTPCycle(endpoints []string, workers int, held string, hc *http.Client) (bench.Cycle, error) {
	wait := time.Duration(-1) // no waiting at the service
	if held == HeldWait {
		wait = 0 // the client's default
	}
	clients := make([]*lockclient.Client, workers)
	for i := range clients {
		c, err := lockclient.New(lockclient.Config{Endpoints: endpoints, Name: "bench-w" + strconv.Itoa(i), Wait: wait, HTTP: hc})
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	return func(ctx context.Context, w int, resource string) (bool, error) {
		acquire := clients[w].TryAcquire
		if held != HeldRetry {
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
