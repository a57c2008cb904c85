package lockservice

import (
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/process"
)

// ClientConfig configures a lock client: one client's lock on one resource
// (the harness's lock client, lockclient; a design's Protocol reads it
// through ProtocolHost.Config). What the client does with the lock is the
// workload's (scenarios/workload).
type ClientConfig struct {
	Name string
	// Servers are the lock service's nodes: one for the single-node design,
	// every replica for the replicated one. The client starts with the
	// first, follows NotLeader redirects, and moves to the next on a
	// timeout.
	Servers  []process.NodeID
	Resource string
	TTL      time.Duration
	// DriftBoundPPM is ρ, the assumed bound on clock rate error between
	// client and server, in parts per million. The watchdog gives up the
	// lock at request start + TTL·(1−ρ) − Margin on the client's clock.
	DriftBoundPPM int64
	Margin        time.Duration
	// RequestTimeout: an unanswered lock request is retried (same request
	// id, next server); the workload gives a store request up as unknown
	// after as long.
	RequestTimeout time.Duration
	// BackoffMin/BackoffMax bound the jittered wait after Busy or Overloaded.
	BackoffMin, BackoffMax time.Duration
	Observer               Observer
	// Watchdog returns the watchdog's deadline for a lease of ttl whose
	// request was sent at sent and answered at replied (client monotonic
	// time). nil: sent + ttl·(1−ρ) − margin (see extend).
	Watchdog func(sent, replied, ttl time.Duration) time.Duration
	// Marks counts the protocol corners the client reaches (package
	// coverage); nil counts nothing.
	Marks *coverage.Counts
}

// DefaultClientConfig returns a client of a 1 s lease, ρ = 1000 ppm, a
// 10 ms margin and a 50 ms request timeout.
func DefaultClientConfig(name string, servers []process.NodeID, resource string) ClientConfig {
	return ClientConfig{
		Name: name, Servers: servers, Resource: resource,
		TTL: time.Second, DriftBoundPPM: 1000, Margin: 10 * time.Millisecond,
		RequestTimeout: 50 * time.Millisecond, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
}
