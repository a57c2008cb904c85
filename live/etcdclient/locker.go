package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/fencesim/fencesim/live/liveclient"
)

// locker is etcd's concurrency.Mutex as an application uses it: one
// session (a lease, kept alive in the background by the client) per
// hold, TryLock on the resource's prefix, the key deleted on release.
type locker struct {
	cli    *clientv3.Client
	fenced bool
	prefix string
	// bg outlives every command: a session's keep-alives run under it,
	// not under the acquire's context (which ends with the command).
	bg     context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	held map[string]*hold
}

type hold struct {
	s     *concurrency.Session
	m     *concurrency.Mutex
	token uint64
}

// open connects to the members at cfg.Endpoints. Options: "fenced"
// ("true": Acquire returns the lock key's create revision as the fencing
// token; default "false": 0, the harness numbers grants), "prefix" (the
// key prefix of the locks, default "/fencesim/lock/").
func open(cfg liveclient.Config) (*locker, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints (-endpoints http://host:port,…)")
	}
	fenced := false
	if v, ok := cfg.Options["fenced"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("etcd: option fenced=%q must be true or false", v)
		}
		fenced = b
	}
	prefix, ok := cfg.Options["prefix"]
	if !ok {
		prefix = "/fencesim/lock/"
	}
	// No AutoSyncInterval: the client must keep to the endpoints it is
	// given (the fault proxies), not discover the members' own URLs.
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	bg, cancel := context.WithCancel(context.Background())
	return &locker{cli: cli, fenced: fenced, prefix: prefix, bg: bg, cancel: cancel, held: map[string]*hold{}}, nil
}

// LeaseSeconds maps a scenario's TTL to an etcd lease TTL, which is whole
// seconds: rounded up, so the lease never ends before the TTL the
// scenario asked for (1500ms holds 2s). etcd may grant more still: its
// shortest lease is 1.5 election timeouts rounded up to a second (the
// live targets run an election timeout of 500ms so that 1s stays 1s), and
// it expires leases on the leader's clock, checked every 500ms.
func LeaseSeconds(ttl time.Duration) int64 {
	s := int64((ttl + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Acquire grants a lease of the TTL (LeaseSeconds), opens a session on it
// and TryLocks the mutex of resource: another session's older key is
// ErrBusy. Fenced, the token is the create revision of this session's
// key, which etcd's mutex makes the order of grants: the holder is the
// oldest key, and a key created later has a higher revision.
func (l *locker) Acquire(ctx context.Context, resource string, ttl time.Duration) (uint64, error) {
	secs := LeaseSeconds(ttl)
	g, err := l.cli.Grant(ctx, secs)
	if err != nil {
		return 0, fmt.Errorf("etcd: lease grant: %w", err)
	}
	if g.TTL != secs {
		fmt.Fprintf(os.Stderr, "etcd: asked a lease of %ds for a TTL of %v, granted %ds\n", secs, ttl, g.TTL)
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(g.ID), concurrency.WithContext(l.bg))
	if err != nil {
		l.drop(ctx, s, g.ID)
		return 0, fmt.Errorf("etcd: session: %w", err)
	}
	m := concurrency.NewMutex(s, l.prefix+resource)
	switch err := m.TryLock(ctx); {
	case errors.Is(err, concurrency.ErrLocked):
		l.drop(ctx, s, g.ID)
		return 0, fmt.Errorf("%w (%v)", liveclient.ErrBusy, err)
	case err != nil:
		// Unknown: the key may exist. Without keep-alives the lease, and
		// the key on it, end within the TTL.
		l.drop(ctx, s, g.ID)
		return 0, fmt.Errorf("etcd: trylock: %w", err)
	}
	h := &hold{s: s, m: m}
	if l.fenced {
		// The session is new, so TryLock created the key: its response's
		// revision is the key's create revision.
		h.token = uint64(m.Header().Revision)
	}
	l.mu.Lock()
	old := l.held[resource]
	l.held[resource] = h
	l.mu.Unlock()
	if old != nil {
		l.drop(ctx, old.s, old.s.Lease())
	}
	return h.token, nil
}

// Renew refreshes the hold's lease once (KeepAliveOnce; the session also
// keeps it alive by itself while the process runs). A lease etcd no
// longer has, or a session that saw its lease end, is ErrNotHolder. The
// lease keeps the TTL it was granted: etcd cannot change a lease's TTL.
func (l *locker) Renew(ctx context.Context, resource string, _ uint64, _ time.Duration) error {
	l.mu.Lock()
	h := l.held[resource]
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: this client holds no %q", liveclient.ErrNotHolder, resource)
	}
	select {
	case <-h.s.Done():
		return fmt.Errorf("%w: the session's lease ended", liveclient.ErrNotHolder)
	default:
	}
	resp, err := l.cli.KeepAliveOnce(ctx, h.s.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0) {
		return fmt.Errorf("%w: lease %x expired", liveclient.ErrNotHolder, int64(h.s.Lease()))
	}
	if err != nil {
		return fmt.Errorf("etcd: keepalive: %w", err)
	}
	return nil
}

// Release deletes the key if it is still this session's (a transaction
// on the key's create revision, the mutex's IsOwner): a key already gone
// with its lease is ErrNotHolder. The lease is then revoked.
func (l *locker) Release(ctx context.Context, resource string, _ uint64) error {
	l.mu.Lock()
	h := l.held[resource]
	delete(l.held, resource)
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: this client holds no %q", liveclient.ErrNotHolder, resource)
	}
	defer l.drop(ctx, h.s, h.s.Lease())
	resp, err := l.cli.Txn(ctx).If(h.m.IsOwner()).Then(clientv3.OpDelete(h.m.Key())).Commit()
	if err != nil {
		return fmt.Errorf("etcd: unlock: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %s is gone (its lease expired)", liveclient.ErrNotHolder, h.m.Key())
	}
	return nil
}

// drop stops a session's keep-alives and revokes its lease, best effort:
// a lease not revoked ends by itself within its TTL.
func (l *locker) drop(ctx context.Context, s *concurrency.Session, lease clientv3.LeaseID) {
	if s != nil {
		s.Orphan()
	}
	l.cli.Revoke(ctx, lease)
}

// Close stops every session's keep-alives and closes the client.
func (l *locker) Close() error {
	l.mu.Lock()
	for _, h := range l.held {
		h.s.Orphan()
	}
	l.mu.Unlock()
	l.cancel()
	return l.cli.Close()
}
