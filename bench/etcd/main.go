// Command fencesim-bench-etcd is fencesim-bench's etcd driver: it times
// etcd's concurrency.Mutex (a session lease per worker, Lock then Unlock)
// against the cluster at -endpoints, with the same harness (package
// bench) as the other systems, and prints one JSON result per line.
//
// It is its own module so that the etcd client (gRPC, protobuf, zap…)
// stays out of fencesim's module graph: `go mod tidy` of the main module
// never sees it, and nothing but this binary builds it. A build tag would
// not do that — tidy considers every tag. fencesim-bench builds and runs
// it; by hand:
//
//	go -C bench/etcd run . -endpoints http://127.0.0.1:2379 -workers 1,8
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/fencesim/fencesim/bench"
)

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated etcd client URLs")
	workersFlag := flag.String("workers", "1,8,64", "concurrent clients per cell")
	modesFlag := flag.String("modes", "per-worker,shared", "lock layouts")
	duration := flag.Duration("duration", 3*time.Second, "measured time per cell")
	warmup := flag.Duration("warmup", 500*time.Millisecond, "warm-up per cell")
	prefix := flag.String("prefix", fmt.Sprintf("/fencesim-bench/%d/", time.Now().UnixNano()), "key prefix of the locks")
	flag.Parse()
	workers, err := bench.ParseWorkers(*workersFlag)
	if err == nil && *endpoints == "" {
		err = fmt.Errorf("-endpoints is required")
	}
	modes, merr := bench.ParseModes(*modesFlag)
	if err == nil {
		err = merr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencesim-bench-etcd:", err)
		os.Exit(2)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencesim-bench-etcd:", err)
		os.Exit(1)
	}
	defer cli.Close()
	enc := json.NewEncoder(os.Stdout)
	for _, mode := range modes {
		for _, n := range workers {
			enc.Encode(runCell(cli, bench.Cell{Mode: mode, Workers: n, Warmup: *warmup, Duration: *duration, Prefix: *prefix}))
		}
	}
}

// runCell opens one session (one lease, kept alive by the client) per
// worker, as an application holding one etcd lock per process would, and
// times Lock+Unlock of a concurrency.Mutex on the worker's key. Lock
// waits its turn (it watches the key ahead of it), so a cycle is never
// refused; the mutex's fencing token would be its key's create revision.
func runCell(cli *clientv3.Client, c bench.Cell) bench.Result {
	ctx, cancel := context.WithTimeout(context.Background(), c.Warmup+c.Duration+30*time.Second)
	defer cancel()
	sessions := make([]*concurrency.Session, c.Workers)
	for i := range sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
		if err != nil {
			return bench.Result{System: "etcd", Mode: c.Mode, Workers: c.Workers, Err: "session: " + err.Error()}
		}
		defer s.Close()
		sessions[i] = s
	}
	return bench.Run(ctx, "etcd", c, func(ctx context.Context, w int, resource string) (bool, error) {
		m := concurrency.NewMutex(sessions[w], resource)
		if err := m.Lock(ctx); err != nil {
			return false, err
		}
		return true, m.Unlock(ctx)
	})
}
