// Command fencesim-lockd serves the lock API (package lockapi) over Redis
// (package lockd): seed 000's design. Instances are stateless; run two or
// more over one Redis behind a load balancer. Configuration comes from the
// environment only (fencesim-lockd -h lists it); SIGTERM drains.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockd"
	"github.com/fencesim/fencesim/realclock"
)

func main() {
	svcmain.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], svcmain.Environ(), os.Stderr, nil)
	})
}

// run is the whole program: it returns the exit code (0 clean drain, 1
// runtime failure, 2 bad configuration). ready, if set, gets the bound
// address once the listener is open.
func run(ctx context.Context, args []string, env map[string]string, stderr io.Writer, ready func(addr string)) int {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			usage(stderr)
			return 0
		default:
			fmt.Fprintf(stderr, "fencesim-lockd takes no arguments (got %q); configure it with the environment:\n\n", a)
			usage(stderr)
			return 2
		}
	}
	cfg, err := loadConfig(env)
	if code, stop := svcmain.ConfigExit("fencesim-lockd", err, stderr); stop {
		return code
	}
	log := svcmain.Logger(stderr, cfg.LogFormat)

	addr := cfg.RedisAddr
	if addr == "" {
		mr := miniredis.NewMiniRedis()
		// miniredis freezes TTLs unless told to follow the clock: without
		// this a lease would never expire.
		mr.ClockTTL(true)
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			log.Error("embedded redis", slog.Any("err", err))
			return 1
		}
		defer mr.Close()
		addr = mr.Addr()
		log.Warn("FENCESIM_REDIS_ADDR is empty: using an embedded in-memory Redis; locks and fence tokens are lost when this process exits and no second instance can share them — set FENCESIM_REDIS_ADDR for anything but a quick start")
	}
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, Password: cfg.RedisPassword, DB: cfg.RedisDB,
		PoolSize: cfg.RedisPoolSize, PoolTimeout: cfg.RedisTimeout,
		DialTimeout: cfg.RedisTimeout, ReadTimeout: cfg.RedisTimeout, WriteTimeout: cfg.RedisTimeout,
		// No blind retries below the API: a script whose reply was lost is
		// retried by the client with its request id, where the lock
		// semantics are known.
		MaxRetries: -1,
	})
	defer rdb.Close()
	backend := lockd.New(rdb, lockd.Options{Prefix: cfg.KeyPrefix, RetryAfter: cfg.RetryAfter, Logger: log,
		RequireDurable: cfg.RequireDurable, RequireEpoch: cfg.RequireDurable && !cfg.RedisInit, TokenFloor: cfg.TokenFloor,
		Pipelines: cfg.pipelines()})
	defer backend.Close()

	if code := checkRedis(ctx, cfg, backend, log); code != 0 {
		return code
	}
	// Durability and the fence's continuity, checked all along: a Redis
	// that restarts empty, is flushed, rewinds or stops fsyncing is caught
	// between grants too (the acquire script refuses the first two itself).
	go backend.Watch(ctx, time.Second)

	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		log.Error("listen", slog.String("FENCESIM_LISTEN", cfg.Listen), slog.Any("err", err))
		return 1
	}
	api, _ := cfg.apiAuth() // validated
	if l, err = api.Listener(ctx, log, l); err != nil {
		log.Error("the API's TLS", slog.Any("err", err))
		return 1
	}
	scfg := cfg.serverConfig()
	scfg.Logger = log
	scfg.Authenticate = api.Authenticate()
	if cfg.testHooks() {
		// The instance's own clock is what the admission limiter times
		// with; the leases expire on Redis's clock, which no hook of ours
		// reaches. No timer is armed on it, so nothing needs an executor:
		// Adjust has no timer to reschedule.
		clk := realclock.New(func(func()) { panic("fencesim-lockd arms no timer on its clock") })
		scfg.Limiter.Clock = clk
		scfg.TestRoutes = testhooks.Handler(testhooks.Hooks{Clock: func(_ context.Context, offset time.Duration, ppm int64) error {
			return clk.Adjust(offset, ppm)
		}})
		log.Warn("FENCESIM_TEST_HOOKS=1: serving the test-only /test/clock; never in a deployment")
	}
	srv := lockapi.NewServer(backend, scfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	log.Info("fencesim-lockd serving", slog.String("addr", l.Addr().String()), slog.String("redis", addr))
	if ready != nil {
		ready(l.Addr().String())
	}

	return svcmain.ServeUntilDone(ctx, log, "fencesim-lockd", served, cfg.DrainTimeout, cfg.DrainTimeout, srv.Shutdown)
}

// checkRedis pings Redis and checks its durability at boot. An unreachable
// Redis is not fatal (the instance serves 503 and /readyz says why until
// Redis answers: instances and Redis may start in any order), but a Redis
// that does not fsync every write is a loud warning, or a refusal with
// FENCESIM_REQUIRE_DURABLE.
func checkRedis(ctx context.Context, cfg config, b *lockd.Backend, log *slog.Logger) int {
	pctx, cancel := context.WithTimeout(ctx, 2*cfg.RedisTimeout)
	defer cancel()
	if err := b.Ping(pctx); err != nil {
		log.Warn("Redis not reachable at boot; serving 503 until it is", slog.Any("err", err))
		if cfg.RequireDurable {
			log.Error("FENCESIM_REQUIRE_DURABLE=true: refusing to start without checking Redis's persistence", slog.Any("err", err))
			return 2
		}
		return 0
	}
	if err := b.CheckDurability(pctx); err != nil {
		if cfg.RequireDurable {
			log.Error("FENCESIM_REQUIRE_DURABLE=true: refusing to start", slog.Any("err", err))
			return 2
		}
		log.Warn("FENCE TOKENS ARE NOT DURABLE", slog.Any("err", err))
	}
	if err := b.CheckFence(pctx); err != nil {
		if cfg.RequireDurable {
			log.Error("FENCESIM_REQUIRE_DURABLE=true: refusing to start", slog.Any("err", err))
			return 2
		}
		log.Error("not granting", slog.Any("err", err))
	}
	return 0
}
