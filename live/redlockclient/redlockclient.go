// Package redlockclient is the live harness's Locker for Redlock as people
// run it: github.com/go-redsync/redsync/v4 over independent redis-server
// processes (go-redis v9 clients), used the way its README shows — one
// Mutex per hold with an expiry, TryLock, Extend, Unlock. Redlock issues no
// fencing token: Acquire returns 0, the harness numbers the grants itself
// and the store runs unfenced, which is what lets the checker see a paused
// holder's write land after its successor's (Kleppmann, "How to do
// distributed locking", 2016).
//
// cmd/fencesim-live-redlock is its client binary (liveclient.Main(Open)).
package redlockclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/live/liveclient"
)

// Locker holds this client's mutexes, one per resource it holds. The
// harness runs commands concurrently, hence the lock around held.
type Locker struct {
	rs      *redsync.Redsync
	clients []*goredislib.Client
	prefix  string

	mu   sync.Mutex
	held map[string]*redsync.Mutex
}

// Open connects to the Redis nodes at cfg.Endpoints (host:port, or
// redis://host:port). Option "prefix" is put before every resource to
// form the Redis key (default "fencesim:").
func Open(cfg liveclient.Config) (liveclient.Locker, error) {
	return open(cfg)
}

func open(cfg liveclient.Config) (*Locker, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("redlock: no Redis endpoints (-endpoints host:port,…)")
	}
	l := &Locker{held: map[string]*redsync.Mutex{}}
	var pools []redis.Pool
	for _, e := range cfg.Endpoints {
		addr := strings.TrimPrefix(e, "redis://")
		if addr == "" || strings.Contains(addr, "/") {
			return nil, fmt.Errorf("redlock: endpoint %q must be host:port", e)
		}
		// No retries inside go-redis: one command is one attempt, so an
		// error is a node that did not answer, as Redlock counts it.
		c := goredislib.NewClient(&goredislib.Options{Addr: addr, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		l.clients = append(l.clients, c)
		pools = append(pools, goredis.NewPool(c))
	}
	l.rs = redsync.New(pools...)
	// Dial every node now, as a running application's pools would have:
	// the first acquire then costs one round trip, not five connection
	// set-ups (a node that does not answer yet is no error here).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range l.clients {
		wg.Go(func() { c.Ping(ctx) })
	}
	wg.Wait()
	prefix, ok := cfg.Options["prefix"]
	if !ok {
		prefix = "fencesim:"
	}
	l.prefix = prefix
	return l, nil
}

// Acquire is one TryLock of a new Mutex with expiry ttl: a majority of
// SET NX PX, then redsync's validity check (the time the majority took
// and its drift allowance must leave some of the ttl). A majority that
// answered "taken" is ErrBusy; any node error or a lost validity is an
// unknown outcome, since a minority of nodes may keep the key until it
// expires.
func (l *Locker) Acquire(ctx context.Context, resource string, ttl time.Duration) (uint64, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("redlock: ttl %v must be positive", ttl)
	}
	m := l.rs.NewMutex(l.prefix+resource, redsync.WithExpiry(ttl), redsync.WithTries(1))
	err := m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case err == nil:
		l.mu.Lock()
		l.held[resource] = m
		l.mu.Unlock()
		return 0, nil
	case errors.As(err, &taken):
		return 0, fmt.Errorf("%w (%v)", liveclient.ErrBusy, err)
	}
	return 0, err
}

// Renew extends the hold to ttl from now on a majority (redsync's Extend:
// PEXPIRE where the key still holds this client's value). Fewer than a
// majority still holding the value is ErrNotHolder; node errors are an
// unknown outcome. A ttl other than the acquire's is honoured by a Mutex
// of the same value and the new expiry.
func (l *Locker) Renew(ctx context.Context, resource string, _ uint64, ttl time.Duration) error {
	l.mu.Lock()
	m := l.held[resource]
	l.mu.Unlock()
	if m == nil {
		return fmt.Errorf("%w: this client holds no %q", liveclient.ErrNotHolder, resource)
	}
	if ttl > 0 {
		m = l.rs.NewMutex(m.Name(), redsync.WithExpiry(ttl), redsync.WithTries(1), redsync.WithValue(m.Value()))
	}
	ok, err := m.ExtendContext(ctx)
	if ok {
		l.mu.Lock()
		if l.held[resource] != nil {
			l.held[resource] = m
		}
		l.mu.Unlock()
		return nil
	}
	if definite(err) {
		return fmt.Errorf("%w (%v)", liveclient.ErrNotHolder, err)
	}
	return err
}

// Release deletes the key where it still holds this client's value, on
// every node. Fewer than a majority deleted and no node error means the
// hold had already expired: ErrNotHolder.
func (l *Locker) Release(ctx context.Context, resource string, _ uint64) error {
	l.mu.Lock()
	m := l.held[resource]
	delete(l.held, resource)
	l.mu.Unlock()
	if m == nil {
		return fmt.Errorf("%w: this client holds no %q", liveclient.ErrNotHolder, resource)
	}
	ok, err := m.UnlockContext(ctx)
	if ok {
		return nil
	}
	if definite(err) {
		return fmt.Errorf("%w (%v)", liveclient.ErrNotHolder, err)
	}
	return err
}

// definite reports whether a failed Extend or Unlock heard from every node
// it needed: no node error (a RedisError) and not a lost validity, so a
// majority definitely does not hold this client's value.
func definite(err error) bool {
	var re *redsync.RedisError
	return !errors.As(err, &re) && !errors.Is(err, redsync.ErrExtendFailed)
}

// Close closes the Redis connections.
func (l *Locker) Close() error {
	var errs []error
	for _, c := range l.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
