// Package lockd is seed 000's lock service design as a lockapi.Backend:
// stateless instances over one shared Redis. Every operation is one Lua
// script, so Redis's single-threaded execution makes it atomic and the
// instances keep no state of their own: any number of them can serve the
// same resources, and a restarted instance loses nothing.
//
// The scripts, and the keys they keep per resource, are lockd/scripts'.
//
// Fence counters never go backwards only as long as Redis does not lose
// writes: with appendonly yes + appendfsync always a counter survives a
// Redis crash or restart; with no persistence (or everysec) a restart can
// hand out a token again, and a fenced resource could then accept a stale
// writer. Backend.CheckDurability reports which case it is.
package lockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockd/scripts"
)

// The scripts are lockd/scripts': the one definition of each atomic
// operation, which the simulator's Redis-like process runs too.
var (
	acquireScript = redis.NewScript(scripts.Acquire)
	renewScript   = redis.NewScript(scripts.Renew)
	releaseScript = redis.NewScript(scripts.Release)
	getScript     = redis.NewScript(scripts.Get)
	heldScript    = redis.NewScript(scripts.Held)
)

// run runs one script call.
func (b *Backend) run(ctx context.Context, s *redis.Script, c scripts.Call) *redis.Cmd {
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		args[i] = a
	}
	return s.Run(ctx, b.rdb, c.Keys, args...)
}

// Options configure a Backend.
type Options struct {
	// Prefix starts every key; it lets several services share a Redis.
	Prefix string
	// RetryAfter is the hint given with overload (a full connection pool).
	RetryAfter time.Duration
	Logger     *slog.Logger
	// RequestMemory is how long an acquire's request id is remembered past
	// its lease (0: scripts.Memory), so that a copy of the request run
	// late — queued in a paused instance while its client retried
	// elsewhere — cannot be granted a second time.
	RequestMemory time.Duration
	// UnsafeForgetRequests remembers no request id past its lease (lockd
	// before the fix): a late copy of a request that was granted and
	// released elsewhere is granted again. For the planted bug
	// lockd-forgets-request only.
	UnsafeForgetRequests bool
}

// Backend is the Redis lock backend; safe for concurrent use.
type Backend struct {
	rdb  redis.UniversalClient
	opts Options

	mu       sync.Mutex
	warnings []string
	durable  prometheus.Gauge
}

// New returns a backend over rdb (a *redis.Client or a cluster client).
func New(rdb redis.UniversalClient, opts Options) *Backend {
	if opts.Prefix == "" {
		opts.Prefix = "fencesim:"
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RequestMemory == 0 {
		opts.RequestMemory = scripts.Memory
	}
	if opts.UnsafeForgetRequests {
		opts.RequestMemory = -1
	}
	return &Backend{rdb: rdb, opts: opts, durable: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencesim_lockd_redis_durable",
		Help: "1 if Redis persists every write before replying (appendonly yes, appendfsync always), so fence tokens survive a Redis restart; 0 if not or unknown.",
	})}
}

// Acquire implements lockapi.Backend. With wait > 0 a held resource is
// asked for again inside the instance, after a jittered backoff from 1 ms
// doubling to 32 ms (never past the lease's reported end or the wait's),
// until it is granted or wait has passed: each attempt is the same atomic
// script with the same request id, so a grant is never doubled, and a
// waiter spares its client the round trips. It is not fair (Redis has no
// queue here): whichever attempt comes first after the release wins.
//
// A held answer is settled before it is given (scripts.Held): the request
// is remembered as answered held, so that a late copy of it cannot be
// granted a lock nobody waits for; if a copy was granted meanwhile, that
// grant is the answer (with no time left).
func (b *Backend) Acquire(ctx context.Context, resource, client string, ttl, wait time.Duration, requestID string) (lockapi.Lease, error) {
	l, err := b.acquireWait(ctx, resource, client, ttl, wait, requestID)
	var held *lockapi.HeldError
	if !errors.As(err, &held) {
		return l, err
	}
	c, ok := scripts.HeldCall(b.opts.Prefix, resource, client, requestID, b.opts.RequestMemory)
	if !ok {
		return l, err
	}
	res, rerr := b.run(ctx, heldScript, c).Result()
	if rerr != nil {
		return lockapi.Lease{}, b.redisError("acquire", rerr)
	}
	tok, perr := scripts.ParseHeld(res)
	if perr != nil {
		return lockapi.Lease{}, perr
	}
	if tok != 0 {
		return lockapi.Lease{Token: tok}, nil
	}
	return l, err
}

func (b *Backend) acquireWait(ctx context.Context, resource, client string, ttl, wait time.Duration, requestID string) (lockapi.Lease, error) {
	l, err := b.acquireOnce(ctx, resource, client, ttl, requestID)
	var held *lockapi.HeldError
	if wait <= 0 || !errors.As(err, &held) {
		return l, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	backoff := time.Millisecond
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return l, err
		}
		d := min(backoff/2+rand.N(backoff/2+1), held.RetryAfter+time.Millisecond, left)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return lockapi.Lease{}, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 32*time.Millisecond)
		// The attempt that grants reaches Redis no sooner than now.
		waited := time.Since(start)
		if l, err = b.acquireOnce(ctx, resource, client, ttl, requestID); !errors.As(err, &held) {
			l.Waited = waited
			return l, err
		}
	}
}

func (b *Backend) acquireOnce(ctx context.Context, resource, client string, ttl time.Duration, requestID string) (lockapi.Lease, error) {
	c := scripts.AcquireCall(b.opts.Prefix, resource, client, requestID, ttl, b.opts.RequestMemory)
	res, err := b.run(ctx, acquireScript, c).Slice()
	if err != nil {
		return lockapi.Lease{}, b.redisError("acquire", err)
	}
	a, err := scripts.ParseAcquire(res)
	if err != nil {
		return lockapi.Lease{}, err
	}
	if !a.Granted {
		return lockapi.Lease{}, &lockapi.HeldError{Holder: a.Holder, RetryAfter: a.Left}
	}
	return lockapi.Lease{Token: a.Token, TTL: a.TTL}, nil
}

// Renew implements lockapi.Backend.
func (b *Backend) Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (lockapi.Lease, error) {
	ok, err := b.run(ctx, renewScript, scripts.RenewCall(b.opts.Prefix, resource, client, token, ttl, b.opts.RequestMemory)).Int()
	if err != nil {
		return lockapi.Lease{}, b.redisError("renew", err)
	}
	if ok != 1 {
		return lockapi.Lease{}, lockapi.ErrNotHolder
	}
	return lockapi.Lease{Token: token, TTL: ttl}, nil
}

// Release implements lockapi.Backend.
func (b *Backend) Release(ctx context.Context, resource, client string, token uint64, requestID string) error {
	ok, err := b.run(ctx, releaseScript, scripts.ReleaseCall(b.opts.Prefix, resource, client, token, requestID)).Int()
	if err != nil {
		return b.redisError("release", err)
	}
	if ok != 1 {
		return lockapi.ErrNotHolder
	}
	return nil
}

// Get implements lockapi.Backend.
func (b *Backend) Get(ctx context.Context, resource string) (lockapi.LockState, error) {
	res, err := b.run(ctx, getScript, scripts.GetCall(b.opts.Prefix, resource)).Slice()
	if err != nil {
		return lockapi.LockState{}, b.redisError("get", err)
	}
	st, err := scripts.ParseGet(res)
	return lockapi.LockState{Held: st.Held, Holder: st.Holder, Token: st.Token, TTL: st.TTL, LastToken: st.LastToken}, err
}

// Ready implements lockapi.Backend: Redis answers PING.
func (b *Backend) Ready(ctx context.Context) error {
	return b.rdb.Ping(ctx).Err()
}

// redisError maps a Redis failure: a full connection pool is overload
// (429, the caller retries later); anything else fails closed (503).
func (b *Backend) redisError(op string, err error) error {
	if errors.Is(err, redis.ErrPoolTimeout) {
		return &lockapi.OverloadedError{RetryAfter: b.opts.RetryAfter}
	}
	return fmt.Errorf("lockd %s: redis: %w", op, err)
}

// CheckDurability asks Redis (CONFIG GET) whether it fsyncs every write
// before replying. It returns nil when it does; otherwise an error that
// says what a restart would do to fence tokens, which also becomes a
// standing warning on /readyz and the fencesim_lockd_redis_durable gauge.
func (b *Backend) CheckDurability(ctx context.Context) error {
	err := b.durability(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.warnings = nil
	if err != nil {
		b.warnings = []string{err.Error()}
		b.durable.Set(0)
		return err
	}
	b.durable.Set(1)
	return nil
}

func (b *Backend) durability(ctx context.Context) error {
	cfg, err := b.rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return fmt.Errorf("cannot read Redis persistence settings (%v): assume fence tokens do NOT survive a Redis restart", err)
	}
	if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
		return fmt.Errorf("Redis has appendonly=%q appendfsync=%q: acknowledged fence tokens are NOT durable, a Redis crash or restart can issue a token again and let a stale holder through a fenced resource; run Redis with --appendonly yes --appendfsync always", cfg["appendonly"], cfg["appendfsync"])
	}
	return nil
}

// Warnings implements lockapi.WarningBackend.
func (b *Backend) Warnings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.warnings
}

// Collectors implements lockapi.MetricsBackend: durability and the
// connection pool.
func (b *Backend) Collectors() []prometheus.Collector {
	stat := func(name, help string, f func(*redis.PoolStats) uint32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fencesim_lockd_redis_pool_" + name, Help: help},
			func() float64 { return float64(f(b.rdb.PoolStats())) })
	}
	return []prometheus.Collector{
		b.durable,
		stat("total_conns", "Connections in the Redis pool.", func(s *redis.PoolStats) uint32 { return s.TotalConns }),
		stat("idle_conns", "Idle connections in the Redis pool.", func(s *redis.PoolStats) uint32 { return s.IdleConns }),
		stat("timeouts", "Times a request waited for a pool connection in vain (shed as overload).", func(s *redis.PoolStats) uint32 { return s.Timeouts }),
	}
}
