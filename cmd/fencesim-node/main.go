// Command fencesim-node runs one replica of the reference lock service —
// the simulator's reference.Replica (Raft + lock table) on the real
// runtime (realrt), fsyncing its log before it answers — with the HTTP
// lock API in front (package nodesvc). Configuration comes from flags or
// the environment (fencesim-node -h lists them), validated at boot;
// SIGTERM drains. `fencesim-node -dev-cluster 3` runs a whole local
// cluster in one process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
)

func main() {
	svcmain.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], svcmain.Environ(), os.Stdout, os.Stderr, nil)
	})
}

// member is one replica this process runs, with its API.
type member struct {
	id      process.NodeID
	backend *nodesvc.Backend
	server  *lockapi.Server
	served  chan error
	http    string
}

// run is the whole program: it returns the exit code (0 clean drain, 1
// runtime failure, 2 bad configuration). ready, if set, gets the HTTP
// base URLs once every listener is open.
func run(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer, ready func(urls []string)) int {
	cfg, err := loadConfig(args, env, stderr)
	if code, stop := svcmain.ConfigExit("fencesim-node", err, stderr); stop {
		return code
	}
	log := svcmain.Logger(stderr, cfg.LogFormat)

	var members []*member
	defer func() {
		for _, m := range members {
			if err := m.backend.Close(); err != nil {
				log.Error("closing the replica", slog.Int("id", int(m.id)), slog.Any("err", err))
			}
		}
	}()
	if cfg.DevCluster > 0 {
		var cleanup func()
		members, cleanup, err = startDevCluster(ctx, cfg, log)
		if cleanup != nil {
			defer cleanup()
		}
	} else {
		var m *member
		m, err = startNode(ctx, cfg, log)
		if m != nil {
			members = append(members, m)
		}
	}
	if errors.Is(err, nodesvc.ErrTokenOffset) {
		// A configuration error, found only once the data is read.
		fmt.Fprintf(stderr, "fencesim-node: %s (-token-offset): %v\n", tokenOffsetVar, err)
		return 2
	}
	if err != nil {
		log.Error("start", slog.Any("err", err))
		return 1
	}
	var urls []string
	for _, m := range members {
		urls = append(urls, m.http)
	}
	if cfg.DevCluster > 0 {
		fmt.Fprintf(stdout, "fencesim-node: a local cluster of %d replicas; their lock APIs:\n", len(members))
		for _, m := range members {
			fmt.Fprintf(stdout, "  node %d  %s\n", m.id, m.http)
		}
		fmt.Fprintf(stdout, "try:  curl -s -XPOST %s/v1/locks/demo/acquire -d '{\"client\":\"me\",\"ttl_ms\":10000,\"request_id\":\"1\"}' -L\nCtrl-C stops the cluster.\n", urls[0])
	}
	if ready != nil {
		ready(urls)
	}

	failed := make(chan error, len(members))
	for _, m := range members {
		go func() {
			err := <-m.served
			m.served <- err
			failed <- err
		}()
	}
	select {
	case err := <-failed:
		log.Error("serve", slog.Any("err", err))
		return 1
	case <-ctx.Done():
	}
	// A leader first hands the lead to its most up-to-date follower, so
	// that the group goes on without waiting out an election timeout: the
	// requests it proposed are answered as they commit, later ones are
	// redirected to the new leader. Bounded: a leader that cannot hand over
	// drains anyway and the others elect one.
	if cfg.HandoverTimeout > 0 && cfg.DevCluster == 0 { // a dev cluster stops whole
		hctx, cancel := context.WithTimeout(context.Background(), cfg.HandoverTimeout)
		for _, m := range members {
			if to, err := m.backend.Handover(hctx); err != nil {
				log.Warn("leadership hand-over failed; draining anyway", slog.Int("id", int(m.id)), slog.Any("err", err))
			} else if to != lockservice.NoLeader {
				log.Info("fencesim-node handed the lead over", slog.Int("id", int(m.id)), slog.Int("leader", int(to)))
			}
		}
		cancel()
	}
	log.Info("fencesim-node draining", slog.Duration("timeout", cfg.DrainTimeout))
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainDelay+cfg.DrainTimeout)
	defer cancel()
	code := 0
	// The HTTP fronts drain first, every replica still running (a
	// cluster keeps its quorum for the requests in flight); the replicas
	// stop afterwards (the deferred Close).
	for _, m := range members {
		if err := m.server.Shutdown(dctx); err != nil {
			log.Error("drain cut short: in-flight requests were aborted", slog.Int("id", int(m.id)), slog.Any("err", err))
			code = 1
		}
		if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", slog.Any("err", err))
			code = 1
		}
	}
	if code == 0 {
		log.Info("fencesim-node drained")
	}
	return code
}

func apiConfig(cfg config, log *slog.Logger) lockapi.Config {
	return lockapi.Config{RequestTimeout: cfg.RequestTimeout, DrainDelay: cfg.DrainDelay, Logger: log,
		Limiter: nodesvc.APILimiter(cfg.Admission), TokenKey: cfg.TokenKey, Authenticate: cfg.API.Authenticate()}
}

// peerTLS loads files into realrt's mutual TLS, read again on SIGHUP and
// when they change, until ctx ends; nil without files (the insecure
// setting, checked by loadConfig).
func peerTLS(ctx context.Context, log *slog.Logger, files peertls.Files) (*realrt.PeerTLS, error) {
	if files.CA == "" {
		return nil, nil
	}
	r, err := peertls.Load(files)
	if err != nil {
		return nil, err
	}
	svcmain.OnSIGHUP(ctx, log, "peer TLS files", r.Reload)
	go r.Watch(ctx, time.Second, log)
	return r.PeerTLS(), nil
}

// startNode starts the one replica the configuration names.
func startNode(ctx context.Context, cfg config, log *slog.Logger) (*member, error) {
	pt, err := peerTLS(ctx, log, cfg.PeerFiles)
	if err != nil {
		return nil, err
	}
	if pt == nil {
		log.Warn("FENCESIM_NODE_PEER_INSECURE=true: the replicas do not authenticate each other; whoever reaches a Raft port can disrupt the group (loopback only)")
	}
	hl, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("HTTP listen (FENCESIM_NODE_LISTEN / -listen) %s: %w", cfg.Listen, err)
	}
	b, err := nodesvc.Open(nodesvc.Config{ID: cfg.ID, DataDir: cfg.DataDir, Listen: cfg.PeerListen, Peers: cfg.Peers, TokenOffset: cfg.TokenOffset,
		Snapshot: cfg.Snapshot, Logger: log, PeerTLS: pt, ElectionTimeout: cfg.ElectionTimeout, SyncWrites: cfg.SyncWrites})
	if err != nil {
		hl.Close()
		return nil, fmt.Errorf("starting the replica (data %s, Raft listen %s): %w", cfg.DataDir, cfg.PeerListen, err)
	}
	m, err := serve(ctx, cfg, log, cfg.ID, b, hl)
	if err != nil {
		b.Close()
		return nil, err
	}
	log.Info("fencesim-node serving", slog.Int("id", int(cfg.ID)), slog.String("http", hl.Addr().String()),
		slog.String("raft", b.Node().Addr().String()), slog.String("data", cfg.DataDir))
	return m, nil
}

func serve(ctx context.Context, cfg config, log *slog.Logger, id process.NodeID, b *nodesvc.Backend, hl net.Listener) (*member, error) {
	addr := hl.Addr().String()
	hl, err := cfg.API.Listener(ctx, log, hl)
	if err != nil {
		return nil, fmt.Errorf("the API's TLS (FENCESIM_NODE_API_*_FILE): %w", err)
	}
	acfg := apiConfig(cfg, log.With("id", int(id)))
	if cfg.TestHooks {
		// The replica's own clock (its lease and election timers) and disk.
		acfg.TestRoutes = testhooks.Handler(testhooks.Hooks{Clock: b.Node().AdjustClock, Disk: b.Node().SetSyncDelay})
		log.Warn("FENCESIM_TEST_HOOKS=1: serving the test-only /test/clock and /test/disk; never in a deployment", slog.Int("id", int(id)))
	}
	s := lockapi.NewServer(b, acfg)
	m := &member{id: id, backend: b, server: s, served: make(chan error, 1), http: cfg.apiScheme() + addr}
	go func() { m.served <- s.Serve(hl) }()
	return m, nil
}

// startDevCluster starts cfg.DevCluster replicas in this process on free
// loopback ports, with data under cfg.DataDir/node-<id> when given (kept),
// else under a temporary directory (removed by cleanup).
func startDevCluster(ctx context.Context, cfg config, log *slog.Logger) (members []*member, cleanup func(), err error) {
	root := cfg.DataDir
	if root == "" {
		if root, err = os.MkdirTemp("", "fencesim-node-dev-"); err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(root) }
	}
	n := cfg.DevCluster
	var hls, rls []net.Listener
	closeAll := func() {
		for _, l := range append(hls, rls...) {
			l.Close()
		}
	}
	peers := make([]nodesvc.Peer, n)
	for i := range n {
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, cleanup, err
		}
		hls = append(hls, hl)
		rl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, cleanup, err
		}
		rls = append(rls, rl)
		peers[i] = nodesvc.Peer{ID: process.NodeID(i), Raft: rl.Addr().String(), HTTP: cfg.apiScheme() + hl.Addr().String()}
	}
	// A throwaway CA and a certificate per replica, unless told insecure
	// or given files (then every replica presents the same certificate,
	// which must name them all).
	files := map[process.NodeID]peertls.Files{}
	if !cfg.PeerInsecure && cfg.PeerFiles.CA == "" {
		ids := make([]process.NodeID, n)
		for i := range ids {
			ids[i] = process.NodeID(i)
		}
		tdir := filepath.Join(root, "tls")
		if err = os.MkdirAll(tdir, 0o700); err == nil {
			files, err = peertls.DevFiles(tdir, ids)
		}
		if err != nil {
			closeAll()
			return nil, cleanup, fmt.Errorf("the dev cluster's certificates: %w", err)
		}
	}
	for i := range n {
		f, ok := files[process.NodeID(i)]
		if !ok {
			f = cfg.PeerFiles
		}
		pt, err := peerTLS(ctx, log, f)
		var b *nodesvc.Backend
		if err != nil {
			rls[i].Close() // Open closes its listener; nothing opened this one
		} else {
			b, err = nodesvc.Open(nodesvc.Config{ID: process.NodeID(i), DataDir: filepath.Join(root, fmt.Sprintf("node-%d", i)),
				Listener: rls[i], Peers: peers, TokenOffset: cfg.TokenOffset, Snapshot: cfg.Snapshot, Logger: log.With("node", i), PeerTLS: pt, ElectionTimeout: cfg.ElectionTimeout, SyncWrites: cfg.SyncWrites})
		}
		if err != nil {
			for _, l := range hls[i:] {
				l.Close()
			}
			for _, l := range rls[i+1:] {
				l.Close()
			}
			for _, m := range members {
				m.server.Shutdown(context.Background())
			}
			return members, cleanup, fmt.Errorf("starting replica %d: %w", i, err)
		}
		m, err := serve(ctx, cfg, log, process.NodeID(i), b, hls[i])
		if err != nil {
			b.Close()
			return members, cleanup, err
		}
		members = append(members, m)
	}
	log.Info("fencesim-node dev cluster serving", slog.Int("replicas", n), slog.String("data", root), slog.Bool("peer_tls", !cfg.PeerInsecure))
	return members, cleanup, nil
}
