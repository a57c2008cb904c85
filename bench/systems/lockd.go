package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/bench"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockd"
)

// Redis is a redis-server child started the way lockd documents for
// durability: AOF with appendfsync always, no RDB snapshots.
type Redis struct {
	Addr  string
	child *child
}

// StartRedis starts redis-server (found on PATH) with its data in dir.
func StartRedis(dir string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not installed (apt-get install redis-server), or pass a running one's address: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	c, err := startChild("redis-server", filepath.Join(dir, "redis.log"), bin,
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--dir", dir, "--daemonize", "no")
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	if err := c.waitUp(5*time.Second, func() error { return rdb.Ping(context.Background()).Err() }); err != nil {
		c.stop()
		return nil, err
	}
	return &Redis{Addr: addr, child: c}, nil
}

// Close kills redis-server.
func (r *Redis) Close() { r.child.stop() }

// Lockd is one fencesim-lockd instance in this process over the Redis at
// an address, configured as the command's defaults configure it (a pool
// of 64 connections, the adaptive limit between the pool's size and 256).
type Lockd struct {
	rdb     *redis.Client
	backend *lockd.Backend
	server  *lockapi.Server
	// Endpoint is the instance's HTTP base URL.
	Endpoint string
}

// StartLockd serves lockd over the Redis at addr on a free port;
// pipelines is lockd.Options.Pipelines (0: lockd's default).
func StartLockd(addr string, log *slog.Logger, pipelines int) (*Lockd, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, PoolTimeout: 500 * time.Millisecond,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		MaxRetries: -1})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rdb.Close()
		return nil, err
	}
	b := lockd.New(rdb, lockd.Options{Logger: log, Pipelines: pipelines})
	s := lockapi.NewServer(b, lockapi.Config{
		Limiter:        lockapi.LimiterConfig{Min: 64, Max: 256, Target: 50 * time.Millisecond},
		RequestTimeout: 2 * time.Second, Logger: log,
	})
	go s.Serve(l)
	return &Lockd{rdb: rdb, backend: b, server: s, Endpoint: "http://" + l.Addr().String()}, nil
}

// Close drains the instance and closes its Redis pool.
func (d *Lockd) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.server.Shutdown(ctx)
	d.backend.Close()
	d.rdb.Close()
}

// RawRedis is lockd's lock without HTTP: the Lua scripts lockd runs
// (acquire with its fence, release), called through lockd's Backend in
// this process over a pool of its own — the anchors' "raw Redis" row
// (../shared/anchors/lock-services.md), so that lockd's share of it (what
// HTTP, the API and the Go client cost) is measured in the same run.
type RawRedis struct {
	rdb     *redis.Client
	backend *lockd.Backend
}

// StartRawRedis connects to the Redis at addr with the pool lockd's
// instance uses; pipelines is lockd.Options.Pipelines (-1: each call on a
// connection of its own, as the anchor's plain client makes it).
func StartRawRedis(addr string, log *slog.Logger, pipelines int) (*RawRedis, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, PoolTimeout: 500 * time.Millisecond,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		MaxRetries: -1})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	return &RawRedis{rdb: rdb, backend: lockd.New(rdb, lockd.Options{Logger: log, Pipelines: pipelines})}, nil
}

// Cycle is an acquire and a release by the scripts, each worker a client
// of its own with a fresh request id per attempt. held says how a held
// lock is met: HeldWait, the backend waits for it (lockd's own waiting,
// as an HTTP acquire with wait_ms does); otherwise a refusal is retried
// at once (the anchor's way), every refusal counted as an attempt.
func (r *RawRedis) Cycle(workers int, held string) bench.Cycle {
	var wait time.Duration
	if held == HeldWait {
		wait = TTL
	}
	names := make([]string, workers)
	seq := make([]uint64, workers) // each worker's own: no sharing between goroutines
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range names {
		// Unique to the cell: lockd remembers a client's request ids.
		names[i] = "raw-" + run + "-w" + strconv.Itoa(i)
	}
	return func(ctx context.Context, w int, resource string) (bool, error) {
		seq[w]++
		l, err := r.backend.Acquire(ctx, resource, names[w], TTL, wait, strconv.FormatUint(seq[w], 10))
		var h *lockapi.HeldError
		if errors.As(err, &h) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, r.backend.Release(ctx, resource, names[w], l.Token, "")
	}
}

// Close closes the pool.
func (r *RawRedis) Close() {
	r.backend.Close()
	r.rdb.Close()
}
