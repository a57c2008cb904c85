package storesvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/internal/httpx"
	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
	"github.com/fencesim/fencesim/wire"
)

// Config is the service's policy. DataDir is required; zero fields take
// DefaultConfig's values.
type Config struct {
	// DataDir is the store's data directory; a restart on the same one
	// finds every acknowledged write. One process at a time holds it.
	DataDir string
	Disk    filedisk.Options
	// MaxKeys bounds the keys the store holds: a write to a new key past
	// it gets 507 (the durable record is rewritten whole on every write).
	MaxKeys int
	// MaxInFlight bounds the object requests being served; more get 429.
	MaxInFlight int
	// MaxBodyBytes bounds a PUT's body (a decimal int64 needs 20 bytes);
	// a larger one gets 413 without being buffered.
	MaxBodyBytes int64
	// RequestTimeout bounds the wait for the store's executor; past it the
	// request gets 503 and was not submitted.
	RequestTimeout time.Duration
	// RetryAfter is the hint sent with 429 and 503.
	RetryAfter time.Duration
	// DrainDelay is how long Shutdown answers 503 (and /readyz false)
	// before it stops accepting connections, so that a load balancer sees
	// the instance leave before its connections are refused.
	DrainDelay                                                time.Duration
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	Logger                                                    *slog.Logger

	// TestHooks mounts the test-only endpoints (package testhooks): POST
	// /test/clock, POST /test/disk, GET /test/applies, and keeps the apply
	// log they page. For live fault-injection runs only
	// (FENCESIM_TEST_HOOKS=1); never in a deployment.
	TestHooks bool
	// Unfenced makes the store accept every write and record its token
	// (the simulator's lease-only store), so that a live run of a lock
	// service without fencing tokens shows a stale write in the apply log
	// instead of having it refused. Test-only: Open refuses it without
	// TestHooks.
	Unfenced bool
	// TokenKey, if set, is the fencing key shared with the lock service:
	// a write is accepted only with the lock service's MAC of its token
	// (headers Fencing-Holder and Fencing-Token-Mac, package fencemac);
	// without one, or with a wrong one, it gets 403 and changes nothing.
	TokenKey []byte
	// Authenticate, if set, identifies a request's client (package
	// internal/clientauth: a bearer token from a file); an object
	// request without an identity gets 401. With TokenKey too, a write's
	// Fencing-Holder must be its identity (403 otherwise): only the lease's
	// holder writes with its token.
	Authenticate func(r *http.Request) (identity string, ok bool)
}

// DefaultConfig is a production-shaped policy (DataDir left empty).
func DefaultConfig() Config {
	return Config{
		MaxKeys: 10000, MaxInFlight: 256, MaxBodyBytes: 64,
		RequestTimeout: 2 * time.Second, RetryAfter: time.Second,
		ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	defInt := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	defDur := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 {
			*v = dv
		}
	}
	defInt(&c.MaxKeys, d.MaxKeys)
	defInt(&c.MaxInFlight, d.MaxInFlight)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	defDur(&c.RequestTimeout, d.RequestTimeout)
	defDur(&c.RetryAfter, d.RetryAfter)
	defDur(&c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	defDur(&c.ReadTimeout, d.ReadTimeout)
	defDur(&c.WriteTimeout, d.WriteTimeout)
	defDur(&c.IdleTimeout, d.IdleTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// The store is node storeID; the HTTP front end is node frontEndID, a
// client of it that is not on the network: its requests enter through
// Node.Do and the store's replies to it leave through Config.Local.
const (
	storeID    process.NodeID = 1
	frontEndID process.NodeID = 2
	// clientName is the front end's name as the store's client. The store
	// deduplicates a client's writes by request id, which must grow; the
	// front end numbers its writes on the executor, in the order the store
	// sees them, and resumes after the last one on disk at boot.
	clientName = "http"
)

// Service is the fenced store behind its HTTP API.
type Service struct {
	cfg   Config
	store *fencedstore.FencedStore
	node  *realrt.Node
	http  *httpx.Server
	reg   *prometheus.Registry
	m     *metrics

	draining atomic.Bool
	inFlight atomic.Int64
	keyCount atomic.Int64        // a copy of keys for /metrics, read off the executor
	applies  *testhooks.ApplyLog // with TestHooks: every decided write

	// Owned by the executor (touched only in Do and in Local):
	reply   process.Message // the store's reply to the request being run
	nextReq uint64          // the last write request id used
	keys    int             // keys in the table
}

// Open starts the store on cfg.DataDir: it opens the disk (recovering
// what the last process synced) and runs the store's Start.
func Open(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("storesvc: Config.DataDir is empty; give the store's data directory")
	}
	if cfg.Unfenced && !cfg.TestHooks {
		return nil, errors.New("storesvc: Config.Unfenced without TestHooks; an unfenced store exists only for live test runs")
	}
	s := &Service{cfg: cfg, reg: prometheus.NewRegistry()}
	scfg := fencedstore.StoreConfig{Limits: lockservice.DefaultLimits(), IgnoreTokens: cfg.Unfenced}
	if cfg.TestHooks {
		s.applies = testhooks.NewApplyLog()
		scfg.Observer = applyObserver{s.applies}
	}
	s.store = fencedstore.NewFencedStore(scfg)
	node, err := realrt.Start(realrt.Config{
		ID: storeID, Name: "store", DataDir: cfg.DataDir, Disk: cfg.Disk,
		// realrt listens for peers; the store has none, so it gets a
		// loopback port nothing dials.
		Listen: "127.0.0.1:0",
		Codec:  wire.Codec{},
		Local:  s.local,
		Logger: cfg.Logger,
	}, s.store)
	if err != nil {
		return nil, fmt.Errorf("storesvc: opening the store in %s: %w", cfg.DataDir, err)
	}
	s.node = node
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := node.Do(ctx, s.resume); err != nil {
		node.Close()
		return nil, fmt.Errorf("storesvc: starting the store: %w", err)
	}
	s.m = newMetrics(s)
	s.http = s.newHTTPServer()
	return s, nil
}

// resume runs on the executor after the store's Start: it picks up the
// request numbering and the key count from the restored table.
func (s *Service) resume(process.Env) {
	t := s.store.Table()
	s.nextReq = t.Snapshot().Last[clientName].Request
	s.keys = len(t.Resources())
	s.keyCount.Store(int64(s.keys))
}

// applyObserver records the store's applies in the test hooks' log. The
// store reports an apply on its executor right after the fsync that made
// it durable, so the stamp follows the apply's durability.
type applyObserver struct{ log *testhooks.ApplyLog }

func (o applyObserver) Observe(e lockservice.Event) {
	if e.Kind == lockservice.EvApplied {
		o.log.Record(e.Resource, e.Value, e.Token, e.Accepted)
	}
}

// testHooks are the service's test-only endpoints: its node's clock and
// disk, and the apply log.
func (s *Service) testHooks() testhooks.Hooks {
	return testhooks.Hooks{Clock: s.node.AdjustClock, Disk: s.node.SetSyncDelay, Applies: s.applies}
}

// local takes the store's replies to the front end (on the executor).
func (s *Service) local(to process.NodeID, m process.Message) bool {
	if to != frontEndID {
		return false
	}
	s.reply = m
	return true
}

// errFull is a write to a new key when MaxKeys keys exist.
var errFull = errors.New("storesvc: the store holds its maximum number of keys")

// write submits one write and returns the store's reply, sent after the
// store synced its decision.
func (s *Service) write(ctx context.Context, key string, token uint64, value int64) (lockservice.WriteReply, error) {
	var rep lockservice.WriteReply
	var err error
	derr := s.node.Do(ctx, func(env process.Env) {
		isNew := s.store.Table().Read(key).ValueToken == 0
		if isNew && s.keys >= s.cfg.MaxKeys {
			err = errFull
			return
		}
		s.nextReq++
		req := lockservice.WriteRequest{Resource: key, Client: clientName, Token: token, Value: value, Request: s.nextReq}
		s.reply = nil
		s.store.Receive(env, frontEndID, req)
		raw := s.reply
		s.reply = nil
		r, ok := raw.(lockservice.WriteReply)
		if !ok || r.Request != req.Request {
			err = fmt.Errorf("storesvc: the store answered write %d with %#v", req.Request, raw)
			return
		}
		if r.Accepted && isNew {
			s.keys++
			s.keyCount.Store(int64(s.keys))
		}
		rep = r
	})
	if derr != nil {
		return rep, derr
	}
	return rep, err
}

// object is a key's state as a GET returns it.
type object struct {
	value       int64
	token, tmax uint64
}

// read asks the store for key's value and the token that wrote it, and
// reads T_max from its table in the same executor turn.
func (s *Service) read(ctx context.Context, key string) (object, error) {
	var o object
	var err error
	derr := s.node.Do(ctx, func(env process.Env) {
		req := lockservice.ReadRequest{Resource: key, Client: clientName, Request: s.nextReq}
		s.reply = nil
		s.store.Receive(env, frontEndID, req)
		raw := s.reply
		s.reply = nil
		r, ok := raw.(lockservice.ReadReply)
		switch {
		case !ok:
			err = fmt.Errorf("storesvc: the store answered a read with %#v", raw)
		case r.Err != "":
			err = errors.New(r.Err)
		default:
			o = object{value: r.Value, token: r.Token, tmax: s.store.Table().Read(key).Highest}
		}
	})
	if derr != nil {
		return o, derr
	}
	return o, err
}

// Handler is the API's handler (for tests and embedding).
func (s *Service) Handler() http.Handler { return s.http.Handler }

// Registry is the service's Prometheus registry.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

// Serve accepts connections on l until Shutdown; it returns
// http.ErrServerClosed after a clean shutdown.
func (s *Service) Serve(l net.Listener) error { return s.http.Serve(l) }

// Shutdown drains the HTTP side: /readyz turns 503 and new object requests
// get 503 with Retry-After for DrainDelay, then the listener closes and
// in-flight requests finish. If ctx ends first, the remaining connections
// are closed and ctx's error returned. The store stays open: Close it
// afterwards.
func (s *Service) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.cfg.Logger.Info("storesvc.drain.start", slog.Duration("delay", s.cfg.DrainDelay), slog.Int64("in_flight", s.inFlight.Load()))
	err := s.http.Drain(ctx, s.cfg.DrainDelay)
	s.cfg.Logger.Info("storesvc.drain.done", slog.Any("err", err))
	return err
}

// Close closes the HTTP server (if Shutdown has not) and the store: the
// executor runs what was submitted, and the disk closes with everything
// acknowledged on it.
func (s *Service) Close() error {
	s.draining.Store(true)
	s.http.Close()
	return s.node.Close()
}
