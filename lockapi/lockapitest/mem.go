// Package lockapitest holds what every lockapi.Backend is tested with: an
// in-memory backend (the reference semantics, with hooks to block or fail
// operations) and Suite, the contract every backend must pass over HTTP
// (lockd over miniredis and over a real Redis, and later the Raft node).
package lockapitest

import (
	"context"
	"sync"
	"time"

	"github.com/fencesim/fencesim/lockapi"
)

// Mem is an in-memory lockapi.Backend: one process, no durability. Several
// servers may share one Mem, like stateless instances over one Redis.
type Mem struct {
	mu       sync.Mutex
	now      time.Duration // advanced by Advance; the lease clock
	locks    map[string]*memLease
	fence    map[string]uint64
	released map[string]memRelease // by resource: its last release with a request id
	hookMu   sync.Mutex
	hook     func(ctx context.Context, op string) error
}

// SetHook installs f (nil: none) to run before every operation, outside
// the backend's lock; it may block, or return an error that the operation
// then returns ("acquire", "renew", "release", "get", "ready").
func (m *Mem) SetHook(f func(ctx context.Context, op string) error) {
	m.hookMu.Lock()
	m.hook = f
	m.hookMu.Unlock()
}

type memLease struct {
	client, requestID string
	token             uint64
	expires           time.Duration
}

// NewMem returns an empty backend.
func NewMem() *Mem {
	return &Mem{locks: map[string]*memLease{}, fence: map[string]uint64{}, released: map[string]memRelease{}}
}

// Advance moves Mem's lease clock forward: leases expire by it alone, so
// tests need no sleeps.
func (m *Mem) Advance(d time.Duration) {
	m.mu.Lock()
	m.now += d
	m.mu.Unlock()
}

// SetFence sets resource's last issued token (to test the top of the
// uint64 range).
func (m *Mem) SetFence(resource string, t uint64) {
	m.mu.Lock()
	m.fence[resource] = t
	m.mu.Unlock()
}

func (m *Mem) runHook(ctx context.Context, op string) error {
	m.hookMu.Lock()
	f := m.hook
	m.hookMu.Unlock()
	if f == nil {
		return nil
	}
	return f(ctx, op)
}

// live returns resource's unexpired lease; caller holds mu.
func (m *Mem) live(resource string) *memLease {
	l := m.locks[resource]
	if l != nil && l.expires <= m.now {
		delete(m.locks, resource)
		return nil
	}
	return l
}

// Acquire implements lockapi.Backend.
func (m *Mem) Acquire(ctx context.Context, resource, client string, ttl time.Duration, requestID string) (lockapi.Lease, error) {
	if err := m.runHook(ctx, "acquire"); err != nil {
		return lockapi.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.live(resource); l != nil {
		if l.client == client && l.requestID == requestID {
			l.expires = m.now + ttl
			return lockapi.Lease{Token: l.token, TTL: ttl}, nil
		}
		return lockapi.Lease{}, &lockapi.HeldError{Holder: l.client, RetryAfter: l.expires - m.now}
	}
	if m.fence[resource] == ^uint64(0) {
		return lockapi.Lease{}, errExhausted
	}
	m.fence[resource]++
	t := m.fence[resource]
	m.locks[resource] = &memLease{client: client, requestID: requestID, token: t, expires: m.now + ttl}
	return lockapi.Lease{Token: t, TTL: ttl}, nil
}

type exhausted struct{}

func (exhausted) Error() string { return "fence counter exhausted" }

var errExhausted error = exhausted{}

// Renew implements lockapi.Backend.
func (m *Mem) Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (lockapi.Lease, error) {
	if err := m.runHook(ctx, "renew"); err != nil {
		return lockapi.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.live(resource)
	if l == nil || l.client != client || l.token != token {
		return lockapi.Lease{}, lockapi.ErrNotHolder
	}
	l.expires = m.now + ttl
	return lockapi.Lease{Token: token, TTL: ttl}, nil
}

// Release implements lockapi.Backend. It remembers each resource's last
// release made with a request id, so that a retry of it is answered
// released again.
func (m *Mem) Release(ctx context.Context, resource, client string, token uint64, requestID string) error {
	if err := m.runHook(ctx, "release"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.live(resource)
	if l == nil || l.client != client || l.token != token {
		if r, ok := m.released[resource]; ok && requestID != "" && r == (memRelease{client, token, requestID}) {
			return nil
		}
		return lockapi.ErrNotHolder
	}
	delete(m.locks, resource)
	if requestID != "" {
		m.released[resource] = memRelease{client, token, requestID}
	}
	return nil
}

// memRelease is a release made with a request id.
type memRelease struct {
	client    string
	token     uint64
	requestID string
}

// Get implements lockapi.Backend.
func (m *Mem) Get(ctx context.Context, resource string) (lockapi.LockState, error) {
	if err := m.runHook(ctx, "get"); err != nil {
		return lockapi.LockState{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := lockapi.LockState{LastToken: m.fence[resource]}
	if l := m.live(resource); l != nil {
		st.Held, st.Holder, st.Token, st.TTL = true, l.client, l.token, l.expires-m.now
	}
	return st, nil
}

// Ready implements lockapi.Backend.
func (m *Mem) Ready(ctx context.Context) error { return m.runHook(ctx, "ready") }
