// Package lockd is seed 000's lock service design as a lockapi.Backend:
// stateless instances over one shared Redis. Every operation is one Lua
// script, so Redis's single-threaded execution makes it atomic and the
// instances keep no state of their own: any number of them can serve the
// same resources, and a restarted instance loses nothing.
//
// The scripts, and the keys they keep per resource, are lockd/scripts'.
// Waiting is fair across instances: a waiting acquire queues in Redis, and
// a release hands the lock to the queue's head in the same script
// (scripts.Queue); an instance keeps only the routing of those hand-overs
// to its waiting requests.
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
	"strconv"
	"strings"
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
	queuedAcquireScript = redis.NewScript(scripts.QueuedAcquire)
	renewScript         = redis.NewScript(scripts.Renew)
	queuedReleaseScript = redis.NewScript(scripts.QueuedRelease)
	leaveScript         = redis.NewScript(scripts.Leave)
	getScript           = redis.NewScript(scripts.Get)
	heldScript          = redis.NewScript(scripts.Held)
)

// run runs one script call: in a pipeline with the calls made at the same
// time (pipeline.go), or alone with Options.Pipelines < 0.
func (b *Backend) run(ctx context.Context, s *redis.Script, c scripts.Call) *redis.Cmd {
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		args[i] = a
	}
	if b.pipe != nil {
		return b.pipe.run(ctx, s, c.Keys, args)
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
	// RequireEpoch refuses to create the namespace's epoch: an instance
	// grants only over a namespace initialised before (by an instance
	// without it, e.g. `FENCESIM_REDIS_INIT=true`), so that an instance
	// started after Redis lost its data finds no epoch and refuses,
	// instead of starting the fence counters again at 1. Without it, an
	// instance creates the epoch of an empty namespace.
	RequireEpoch bool
	// TokenFloor is where a new epoch's counters start (the epoch keeps
	// it): 0 for a new deployment; after a loss, above every token ever
	// issued, so that tokens stay monotonic.
	TokenFloor uint64
	// RequireDurable refuses grants (and /readyz) while Redis does not
	// fsync every write (CheckDurability, checked again by Watch).
	RequireDurable bool
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
	// QueueLease is how long a waiter's queue entry outlives its last
	// refresh (0: scripts.QueueLease): how long an instance that died with
	// waiters queued can hold up the lock's next grant. Its waiters refresh
	// every quarter of it.
	QueueLease time.Duration
	// Pipelines is how many pipelines of script calls may be out at once
	// (0: 4): the calls requests make at the same time share them, a
	// write and a read for many calls (pipeline.go). Negative: each call
	// on a connection of its own, as a plain Redis client makes it.
	Pipelines int
}

// ErrFenceLost: Redis lost or rewound the data the fence counters live in,
// or the instance cannot tell that it did not; the instance grants nothing
// until an operator restores Redis (and restarts the instance) or
// re-initialises the namespace above every token issued (see the README).
var ErrFenceLost = errors.New("lockd: the fence counters are not trustworthy")

// Backend is the Redis lock backend; safe for concurrent use.
type Backend struct {
	rdb   redis.UniversalClient
	opts  Options
	queue scripts.Queue
	waker *waker
	pipe  *pipeliner // nil: every call alone

	mu       sync.Mutex
	warnings []string
	durable  prometheus.Gauge
	// The fence's continuity, under mu: the namespace's epoch as this
	// instance first found (or made) it, the highest grant sequence it
	// saw, and why it stopped granting ("" while it grants; sticky).
	epoch      string
	seqSeen    uint64
	lost       string
	notDurable error // with RequireDurable: the last durability check's failure
	lostGauge  prometheus.Gauge
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
	if opts.QueueLease <= 0 {
		opts.QueueLease = scripts.QueueLease
	}
	if opts.Pipelines == 0 {
		opts.Pipelines = defaultPipelines
	}
	var pipe *pipeliner
	if opts.Pipelines > 0 {
		pipe = newPipeliner(rdb, opts.Pipelines)
	}
	q := scripts.Queue{Prefix: opts.Prefix}
	return &Backend{rdb: rdb, opts: opts, queue: q, pipe: pipe, waker: newWaker(rdb, q.Channel(), opts.Logger), durable: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencesim_lockd_redis_durable",
		Help: "1 if Redis persists every write before replying (appendonly yes, appendfsync always), so fence tokens survive a Redis restart; 0 if not or unknown.",
	}), lostGauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencesim_lockd_fence_lost",
		Help: "1 once this instance found Redis lost or rewound the fence counters (it grants nothing since), else 0.",
	})}
}

// epochKey holds the namespace's epoch, "<random id> <token floor>";
// seqKey counts the grants ever made in it.
func (b *Backend) epochKey() string { return b.opts.Prefix + "epoch" }
func (b *Backend) seqKey() string   { return b.opts.Prefix + "grants" }

// fence returns the epoch and the highest grant sequence this instance
// knows, finding (or, unless RequireEpoch, creating) the epoch on first
// use; ErrFenceLost once the fence was lost, and with RequireDurable while
// Redis is not durable.
func (b *Backend) fence(ctx context.Context) (string, uint64, error) {
	b.mu.Lock()
	epoch, seq, lost, nd := b.epoch, b.seqSeen, b.lost, b.notDurable
	b.mu.Unlock()
	switch {
	case lost != "":
		return "", 0, fmt.Errorf("%w: %s", ErrFenceLost, lost)
	case nd != nil:
		return "", 0, fmt.Errorf("lockd: FENCESIM_REQUIRE_DURABLE: not granting: %w", nd)
	case epoch != "":
		return epoch, seq, nil
	}
	e, err := b.rdb.Get(ctx, b.epochKey()).Result()
	if errors.Is(err, redis.Nil) {
		if b.opts.RequireEpoch {
			b.lose("Redis holds no fence epoch (" + b.epochKey() + "): it lost its data, or the namespace was never initialised (start one instance with FENCESIM_REDIS_INIT=true)")
			return b.fence(ctx)
		}
		var id [8]byte
		for i := range id {
			id[i] = byte(rand.Uint32())
		}
		fresh := fmt.Sprintf("%x %d", id, b.opts.TokenFloor)
		if err := b.rdb.SetNX(ctx, b.epochKey(), fresh, 0).Err(); err != nil {
			return "", 0, b.redisError("epoch", err)
		}
		e, err = b.rdb.Get(ctx, b.epochKey()).Result()
	}
	if err != nil {
		return "", 0, b.redisError("epoch", err)
	}
	s, err := b.rdb.Get(ctx, b.seqKey()).Uint64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, b.redisError("epoch", err)
	}
	b.mu.Lock()
	if b.epoch == "" {
		b.epoch, b.seqSeen = e, s
		b.opts.Logger.Info("lockd fence epoch", slog.String("epoch", e), slog.Uint64("grants", s))
	}
	b.mu.Unlock()
	return b.fence(ctx)
}

// lose stops granting for good (ErrFenceLost), logging why once.
func (b *Backend) lose(why string) {
	b.mu.Lock()
	first := b.lost == ""
	if first {
		b.lost = why
	}
	b.mu.Unlock()
	if first {
		b.lostGauge.Set(1)
		b.opts.Logger.Error("FENCE LOST: this instance grants nothing until Redis is restored or the namespace re-initialised above every token issued", slog.String("why", why))
	}
}

// saw records a grant sequence the script returned.
func (b *Backend) saw(seq uint64) {
	b.mu.Lock()
	b.seqSeen = max(b.seqSeen, seq)
	b.mu.Unlock()
}

// CheckFence compares the namespace's epoch and grant sequence with what
// this instance knows; a missing or different epoch, or a sequence below
// one it saw, loses the fence (ErrFenceLost from then on).
func (b *Backend) CheckFence(ctx context.Context) error {
	b.mu.Lock()
	epoch, seq := b.epoch, b.seqSeen
	b.mu.Unlock()
	if epoch == "" {
		_, _, err := b.fence(ctx)
		return err
	}
	vals, err := b.rdb.MGet(ctx, b.epochKey(), b.seqKey()).Result()
	if err != nil {
		return b.redisError("fence check", err)
	}
	e, _ := vals[0].(string)
	s, _ := vals[1].(string)
	n, _ := strconv.ParseUint(s, 10, 64)
	switch {
	case e != epoch:
		b.lose(fmt.Sprintf("Redis's fence epoch is %q, this instance's %q: Redis lost its data (a restart without AOF, a flush) or is another Redis", e, epoch))
	case n < seq:
		b.lose(fmt.Sprintf("Redis's grant sequence went back from %d to %d: Redis rewound (a failover to a stale replica, an old AOF)", seq, n))
	}
	_, _, err = b.fence(ctx)
	return err
}

// Watch checks Redis's durability settings and the fence's continuity
// every interval until ctx ends, so that a Redis restarted empty, flushed,
// rewound or reconfigured without fsync is caught between grants too (the
// acquire script itself refuses a lost epoch or a rewound sequence).
func (b *Backend) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, interval)
		if err := b.rdb.Ping(cctx).Err(); err == nil {
			b.CheckDurability(cctx)
			b.CheckFence(cctx)
		}
		cancel()
	}
}

// Acquire implements lockapi.Backend. With wait > 0 a held resource is
// waited for in its wait queue (scripts.Queue), which lives in Redis and
// so orders the waiters of every instance sharing it: the request takes
// the queue's tail, and a free lock goes to the queue's head only, woken
// by the release (pub/sub) and granted by its own next acquire script.
// Waiters are granted in arrival order, one script run per hand-over, and
// none is starved by a luckier retry. Each attempt is the same atomic
// script with the same request id, so a grant is never doubled, and two
// copies of one request share one place in line. A waiter refreshes its
// entry every quarter queue lease (Options.QueueLease) and leaves the
// queue when its wait passes or its request is cancelled; an instance
// that dies leaves entries that lapse a lease later. An acquire without
// wait does not queue, but does not jump the queue either: a free lock it
// finds with waiters in line is handed to the head there and then, as a
// release hands it, and the answer is held by the head, which then holds
// the lease (a held answer about a lock nobody holds is not one a mutex
// gives).
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
	if wait <= 0 {
		l, _, err := b.acquireOnce(ctx, resource, client, ttl, requestID, 0, 0)
		return l, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	member := scripts.Member(scripts.AcquireCall(b.opts.Prefix, resource, client, requestID, ttl, b.opts.RequestMemory))
	woken, stop := b.waker.listen(ctx, scripts.Wake(resource, member))
	defer stop()
	for first := true; ; first = false {
		left := time.Until(deadline)
		// The attempt that grants reaches Redis no sooner than now.
		sent := time.Since(start)
		l, a, err := b.acquireOnce(ctx, resource, client, ttl, requestID, b.opts.QueueLease, max(left, time.Millisecond))
		var held *lockapi.HeldError
		if !errors.As(err, &held) {
			if err != nil {
				b.leave(ctx, resource, member)
			} else if !first {
				l.Waited = sent
			}
			return l, err
		}
		if left <= 0 {
			b.leave(ctx, resource, member)
			return l, err
		}
		// The head also asks again when the lease's time is up: a lease
		// that expires publishes nothing.
		next := min(b.opts.QueueLease/4, left)
		if a.Place == 1 && held.RetryAfter > 0 {
			next = min(next, held.RetryAfter+time.Millisecond)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			b.leave(ctx, resource, member)
			return lockapi.Lease{}, ctx.Err()
		case msg := <-woken:
			t.Stop()
			if h, ok := scripts.ParseHandOver(msg); ok {
				return lockapi.Lease{Token: h.Token, TTL: h.TTL, Waited: handedAt(sent, time.Since(start), h.At-a.Now)}, nil
			}
		case <-t.C:
		}
	}
}

// handedAt is when, after a waiter's start, a lease handed over to it
// began, no sooner than it began: its last attempt, sent at sent and
// answered held at the Redis clock's ms a.Now, was followed after
// redisMs ms by the grant, which came before it was heard of (heard). The
// Redis clock is trusted over that span as the lease's own expiry trusts
// it; a millisecond is taken off for its rounding.
func handedAt(sent, heard time.Duration, redisMs int64) time.Duration {
	d := time.Duration(redisMs-1) * time.Millisecond
	return sent + max(0, min(d, heard-sent))
}

// leave takes member out of resource's queue, even when ctx has ended
// (the request was cancelled); if Redis does not answer, the entry lapses
// by its deadline.
func (b *Backend) leave(ctx context.Context, resource, member string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := b.run(cctx, leaveScript, b.queue.Leave(resource, member)).Err(); err != nil {
		b.opts.Logger.Debug("lockd: leaving the wait queue", slog.String("resource", resource), slog.Any("err", err))
	}
}

// acquireOnce runs the queued acquire once; lease > 0 queues the request
// if it is held (left: the wait's time left), and a held answer's
// scripts.Acquired says its place in line.
func (b *Backend) acquireOnce(ctx context.Context, resource, client string, ttl time.Duration, requestID string, lease, left time.Duration) (lockapi.Lease, scripts.Acquired, error) {
	epoch, seq, err := b.fence(ctx)
	if err != nil {
		return lockapi.Lease{}, scripts.Acquired{}, err
	}
	c := scripts.AcquireCall(b.opts.Prefix, resource, client, requestID, ttl, b.opts.RequestMemory).WithFence(b.epochKey(), b.seqKey(), epoch, seq)
	res, err := b.run(ctx, queuedAcquireScript, b.queue.Acquire(c, resource, lease, left)).Slice()
	if err != nil && strings.Contains(err.Error(), "FENCE_LOST") {
		b.lose(err.Error())
		_, _, err = b.fence(ctx)
		return lockapi.Lease{}, scripts.Acquired{}, err
	}
	if err != nil {
		return lockapi.Lease{}, scripts.Acquired{}, b.redisError("acquire", err)
	}
	a, err := scripts.ParseAcquire(res)
	if err != nil {
		return lockapi.Lease{}, scripts.Acquired{}, err
	}
	if a.Seq > 0 {
		b.saw(a.Seq)
	}
	if !a.Granted {
		return lockapi.Lease{}, a, &lockapi.HeldError{Holder: a.Holder, RetryAfter: a.Left}
	}
	return lockapi.Lease{Token: a.Token, TTL: a.TTL}, a, nil
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

// Release implements lockapi.Backend. A release that leaves the lock free
// with waiters in line grants it to the first (scripts.QueuedRelease).
func (b *Backend) Release(ctx context.Context, resource, client string, token uint64, requestID string) error {
	// Without a whole fence the release only wakes the queue's head,
	// whose own acquire then refuses.
	epoch, seq, ferr := b.fence(ctx)
	if ferr != nil {
		epoch, seq = "", 0
	}
	c := b.queue.Release(scripts.ReleaseCall(b.opts.Prefix, resource, client, token, requestID), resource, b.epochKey(), b.seqKey(), epoch, seq)
	ok, err := b.run(ctx, queuedReleaseScript, c).Int()
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

// Close ends the wait queue's subscription and the pipelines' lanes (calls
// made after it go each on a connection of its own); the Redis client is
// the caller's to close.
func (b *Backend) Close() error {
	if b.pipe != nil {
		b.pipe.close()
	}
	return b.waker.close()
}

// Ping reports whether Redis answers.
func (b *Backend) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }

// Ready implements lockapi.Backend: Redis answers PING and the fence is
// whole (and durable, with RequireDurable).
func (b *Backend) Ready(ctx context.Context) error {
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	_, _, err := b.fence(ctx)
	return err
}

// redisError maps a Redis failure: a full connection pool is overload
// (429, the caller retries later); anything else fails closed (503).
func (b *Backend) redisError(op string, err error) error {
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, errPipelineFull) {
		return &lockapi.OverloadedError{RetryAfter: b.opts.RetryAfter}
	}
	var reply redis.Error
	if !errors.As(err, &reply) && (op == "acquire" || op == "renew" || op == "release") {
		// No reply: the script may have run, or may yet run (a Redis
		// paused mid-call runs it on resume).
		return fmt.Errorf("lockd %s: outcome unknown, the operation may have taken effect (retry with the same request_id): redis: %w", op, err)
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
	b.notDurable = nil
	if err != nil && b.opts.RequireDurable {
		b.notDurable = err
	}
	if b.lost != "" {
		b.warnings = append(b.warnings, "FENCE LOST: "+b.lost)
	}
	if err != nil {
		b.warnings = append(b.warnings, err.Error())
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

// Collectors implements lockapi.MetricsBackend: durability, the
// connection pool and the pipelines.
func (b *Backend) Collectors() []prometheus.Collector {
	stat := func(name, help string, f func(*redis.PoolStats) uint32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fencesim_lockd_redis_pool_" + name, Help: help},
			func() float64 { return float64(f(b.rdb.PoolStats())) })
	}
	cs := []prometheus.Collector{
		b.durable, b.lostGauge,
		stat("total_conns", "Connections in the Redis pool.", func(s *redis.PoolStats) uint32 { return s.TotalConns }),
		stat("idle_conns", "Idle connections in the Redis pool.", func(s *redis.PoolStats) uint32 { return s.IdleConns }),
		stat("timeouts", "Times a request waited for a pool connection in vain (shed as overload).", func(s *redis.PoolStats) uint32 { return s.Timeouts }),
	}
	if b.pipe != nil {
		cs = append(cs, b.pipe.collectors()...)
	}
	return cs
}
