package systems

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
// of 64 connections, the API's default adaptive limit).
type Lockd struct {
	rdb    *redis.Client
	server *lockapi.Server
	// Endpoint is the instance's HTTP base URL.
	Endpoint string
}

// StartLockd serves lockd over the Redis at addr on a free port.
func StartLockd(addr string, log *slog.Logger) (*Lockd, error) {
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
	s := lockapi.NewServer(lockd.New(rdb, lockd.Options{Logger: log}), lockapi.Config{
		Limiter:        lockapi.LimiterConfig{Min: 16, Max: 256, Target: 50 * time.Millisecond},
		RequestTimeout: 2 * time.Second, Logger: log,
	})
	go s.Serve(l)
	return &Lockd{rdb: rdb, server: s, Endpoint: "http://" + l.Addr().String()}, nil
}

// Close drains the instance and closes its Redis pool.
func (d *Lockd) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.server.Shutdown(ctx)
	d.rdb.Close()
}
