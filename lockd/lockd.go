// Package lockd is seed 000's lock service design as a lockapi.Backend:
// stateless instances over one shared Redis. Every operation is one Lua
// script, so Redis's single-threaded execution makes it atomic and the
// instances keep no state of their own: any number of them can serve the
// same resources, and a restarted instance loses nothing.
//
// Keys, per resource R (the braces are a Redis Cluster hash tag, so both
// keys of a resource live in one slot and one script may touch both):
//
//	<prefix>{R}:lock   "client requestID token", with PX = the lease
//	<prefix>{R}:fence  the last token issued, a decimal string, never expires
//	<prefix>{R}:released  "client token requestID" of the last release made
//	                   with a request id, for a minute: its retry answers released
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/lockapi"
)

// acquireScript grants the lease with SET NX PX and issues the next fence
// token in the same atomic step. The counter is incremented as a decimal
// string rather than with INCR: Redis hands integers to Lua as doubles, so
// INCR's reply would round above 2^53, and INCR stops at 2^63−1 while
// tokens are uint64. A retry with the same client and request id while the
// lease is held returns the same token and re-arms the lease (it is the
// same request arriving again, not a second holder).
//
// Reply: {1, token, ttl_ms} granted · {0, holder, pttl} held · error on a
// corrupt counter or an exhausted one (2^64−1 issued).
var acquireScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
  if c == ARGV[1] and r == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, t, tonumber(ARGV[3])}
  end
  return {0, c or '', redis.call('PTTL', KEYS[1])}
end
local f = redis.call('GET', KEYS[2])
if not f then f = '0' end
if not string.match(f, '^%d+$') then
  return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not a decimal string')
end
local i = #f
local t = nil
while i > 0 do
  local d = string.byte(f, i) - 48
  if d < 9 then
    t = string.sub(f, 1, i - 1) .. string.char(d + 49) .. string.rep('0', #f - i)
    break
  end
  i = i - 1
end
if not t then t = '1' .. string.rep('0', #f) end
if #t > 20 or (#t == 20 and t > '18446744073709551615') then
  return redis.error_reply('fence counter ' .. KEYS[2] .. ' exhausted (2^64-1 tokens issued)')
end
redis.call('SET', KEYS[2], t)
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t, 'NX', 'PX', ARGV[3])
return {1, t, tonumber(ARGV[3])}
`)

// renewScript re-arms the lease if client holds it with token. 1 or 0.
var renewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$')
if c ~= ARGV[1] or t ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// releaseScript deletes the lease if client holds it with token. 1 or 0.
// A release with a request id (ARGV[3]) leaves "client token requestID"
// in KEYS[2] for releasedFor, so that a retry of it — its reply lost —
// answers 1 again instead of 0.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local c, r, t
if v then c, r, t = string.match(v, '^(%S+) (%S+) (%d+)$') end
if not v or c ~= ARGV[1] or t ~= ARGV[2] then
  if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) == ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] then
    return 1
  end
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[4])
end
return 1
`)

// releasedFor is how long a release's request id is kept for its retries.
const releasedFor = time.Minute

// getScript reads a resource's lease and counter at one instant:
// {lease value or ”, pttl, last token or '0'}.
var getScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local f = redis.call('GET', KEYS[2])
return {v or '', redis.call('PTTL', KEYS[1]), f or '0'}
`)

// Options configure a Backend.
type Options struct {
	// Prefix starts every key; it lets several services share a Redis.
	Prefix string
	// RetryAfter is the hint given with overload (a full connection pool).
	RetryAfter time.Duration
	Logger     *slog.Logger
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
	return &Backend{rdb: rdb, opts: opts, durable: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencesim_lockd_redis_durable",
		Help: "1 if Redis persists every write before replying (appendonly yes, appendfsync always), so fence tokens survive a Redis restart; 0 if not or unknown.",
	})}
}

// keys are a resource's keys: its lease, its fence counter and its last
// release made with a request id.
func (b *Backend) keys(resource string) []string {
	k := b.opts.Prefix + "{" + resource + "}:"
	return []string{k + "lock", k + "fence", k + "released"}
}

// Acquire implements lockapi.Backend.
func (b *Backend) Acquire(ctx context.Context, resource, client string, ttl time.Duration, requestID string) (lockapi.Lease, error) {
	res, err := acquireScript.Run(ctx, b.rdb, b.keys(resource)[:2], client, requestID, ttl.Milliseconds()).Slice()
	if err != nil {
		return lockapi.Lease{}, b.redisError("acquire", err)
	}
	if len(res) != 3 {
		return lockapi.Lease{}, fmt.Errorf("lockd: acquire script replied %v", res)
	}
	ms, _ := res[2].(int64)
	if granted, _ := res[0].(int64); granted == 0 {
		holder, _ := res[1].(string)
		return lockapi.Lease{}, &lockapi.HeldError{Holder: holder, RetryAfter: time.Duration(max(ms, 0)) * time.Millisecond}
	}
	ts, _ := res[1].(string)
	tok, err := strconv.ParseUint(ts, 10, 64)
	if err != nil || tok == 0 {
		return lockapi.Lease{}, fmt.Errorf("lockd: acquire script returned token %q", ts)
	}
	return lockapi.Lease{Token: tok, TTL: time.Duration(ms) * time.Millisecond}, nil
}

// Renew implements lockapi.Backend.
func (b *Backend) Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (lockapi.Lease, error) {
	ok, err := renewScript.Run(ctx, b.rdb, b.keys(resource)[:1], client, strconv.FormatUint(token, 10), ttl.Milliseconds()).Int()
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
	k := b.keys(resource)
	ok, err := releaseScript.Run(ctx, b.rdb, []string{k[0], k[2]}, client, strconv.FormatUint(token, 10), requestID, releasedFor.Milliseconds()).Int()
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
	res, err := getScript.Run(ctx, b.rdb, b.keys(resource)[:2]).Slice()
	if err != nil {
		return lockapi.LockState{}, b.redisError("get", err)
	}
	if len(res) != 3 {
		return lockapi.LockState{}, fmt.Errorf("lockd: get script replied %v", res)
	}
	var st lockapi.LockState
	fs, _ := res[2].(string)
	st.LastToken, _ = strconv.ParseUint(fs, 10, 64)
	v, _ := res[0].(string)
	if v == "" {
		return st, nil
	}
	f := strings.Split(v, " ")
	if len(f) != 3 {
		return st, fmt.Errorf("lockd: corrupt lease value %q", v)
	}
	st.Held, st.Holder = true, f[0]
	st.Token, _ = strconv.ParseUint(f[2], 10, 64)
	ms, _ := res[1].(int64)
	st.TTL = time.Duration(max(ms, 0)) * time.Millisecond
	return st, nil
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
