package lockservice

import (
	"time"

	"github.com/fencesim/fencesim/process"
)

// ClientConfig configures a lock client and the workload it runs: cycles of
// acquire → fenced writes → read → release.
type ClientConfig struct {
	Name string
	// Servers are the lock service's nodes: one for the single-node design,
	// every replica for the replicated one. The client starts with the
	// first, follows NotLeader redirects, and moves to the next on a
	// timeout.
	Servers  []process.NodeID
	Store    process.NodeID // the fenced store
	Resource string
	TTL      time.Duration
	// DriftBoundPPM is ρ, the assumed bound on clock rate error between
	// client and server, in parts per million. The watchdog gives up the
	// lock at request start + TTL·(1−ρ) − Margin on the client's clock.
	DriftBoundPPM int64
	Margin        time.Duration
	// RequestTimeout: an unanswered request is retried (lock service, same
	// request id) or given up as unknown (store).
	RequestTimeout time.Duration
	// BackoffMin/BackoffMax bound the jittered wait after Busy or Overloaded.
	BackoffMin, BackoffMax time.Duration
	StartDelay             time.Duration // before the first acquire
	Cycles                 int           // acquire/work/release cycles to run; 0: until the run ends
	WritesPerHold          int
	// WorkDuration is the time between the watchdog check that starts a unit
	// of work and the write that ends it: a pause inside it is exactly
	// Kleppmann's stale-holder case.
	WorkDuration time.Duration
	ThinkTime    time.Duration // between cycles
	Observer     Observer
	// Watchdog returns the watchdog's deadline for a lease of ttl whose
	// request was sent at sent and answered at replied (client monotonic
	// time). nil: sent + ttl·(1−ρ) − margin (see extend).
	Watchdog func(sent, replied, ttl time.Duration) time.Duration
}

// DefaultClientConfig returns a workload of one cycle, two writes per hold,
// with a 1 s lease.
func DefaultClientConfig(name string, servers []process.NodeID, store process.NodeID, resource string) ClientConfig {
	return ClientConfig{
		Name: name, Servers: servers, Store: store, Resource: resource,
		TTL: time.Second, DriftBoundPPM: 1000, Margin: 10 * time.Millisecond,
		RequestTimeout: 50 * time.Millisecond, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Cycles: 1, WritesPerHold: 2, WorkDuration: 20 * time.Millisecond, ThinkTime: 50 * time.Millisecond,
	}
}
