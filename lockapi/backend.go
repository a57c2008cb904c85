package lockapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Backend is what the server needs from a lock store: Redis (lockd) or a
// Raft replica. Every method fails closed: an error other than the typed
// ones below is "unavailable" (503) and never a grant.
type Backend interface {
	// Acquire grants resource to client for ttl with a fresh token, or
	// returns *HeldError. The same client retrying the same requestID while
	// it holds the lease must get the same token back (idempotent retry).
	Acquire(ctx context.Context, resource, client string, ttl time.Duration, requestID string) (Lease, error)
	// Renew extends the lease to ttl if client holds it with token,
	// otherwise ErrNotHolder.
	Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (Lease, error)
	// Release frees the lease if client holds it with token, otherwise
	// ErrNotHolder — unless requestID is not empty and a release by client
	// of token with that requestID already took effect: then it answers
	// nil again (a retry whose first answer was lost).
	Release(ctx context.Context, resource, client string, token uint64, requestID string) error
	// Get describes the resource's lease, if any.
	Get(ctx context.Context, resource string) (LockState, error)
	// Ready reports whether the backend can serve now (readyz).
	Ready(ctx context.Context) error
}

// MetricsBackend is a Backend with gauges of its own (Raft term and commit
// index, Redis durability); the server registers them on its registry.
type MetricsBackend interface {
	Collectors() []prometheus.Collector
}

// WarningBackend is a Backend with standing operational warnings (Redis
// without fsync'd persistence); /readyz lists them.
type WarningBackend interface {
	Warnings() []string
}

// Lease is a granted or renewed lease.
type Lease struct {
	Token uint64
	TTL   time.Duration
}

// LockState is a resource's lease as the backend sees it.
type LockState struct {
	Held      bool
	Holder    string
	Token     uint64
	TTL       time.Duration // remaining
	LastToken uint64
}

// HeldError: another lease holds the resource.
type HeldError struct {
	Holder     string        // may be empty if the backend does not know
	RetryAfter time.Duration // the lease's remaining time, a hint
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("held by %q for up to %v", e.Holder, e.RetryAfter)
}

// OverloadedError: the backend refuses work now; retry after the hint.
type OverloadedError struct{ RetryAfter time.Duration }

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("overloaded, retry after %v", e.RetryAfter)
}

// NotLeaderError: this node is not the leader. Leader is the leader's base
// URL ("http://host:port") when known; the server answers 307 to it, or
// 503 when it is unknown (an election is under way).
type NotLeaderError struct{ Leader string }

func (e *NotLeaderError) Error() string { return "not the leader; leader " + e.Leader }

// ErrNotHolder: renew or release by a client that does not hold the lease
// with that token (it expired, was released, or another holds it).
var ErrNotHolder = errors.New("not the holder of this lease")
