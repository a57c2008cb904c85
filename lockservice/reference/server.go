package reference

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/process"
)

// ServerConfig configures the single-node lock server.
type ServerConfig struct {
	Limits   lockservice.Limits
	Observer lockservice.Observer
	// Table: the lock table's rules (the zero value is the reference).
	Table TableRules
	// LeaseClock is the time leases are measured on. nil: the monotonic
	// clock, which no wall-clock step can move.
	LeaseClock func(env process.Env) time.Duration
	// UnsafeNoFsync writes the table but does not sync it before the
	// replies that depend on it (etcd's --unsafe-no-fsync): a crash may
	// forget grants and tokens already handed out.
	UnsafeNoFsync bool
}

// Server is the single-node lock service: one LockTable, persisted to its
// disk and synced before any reply that depends on it, with leases expired
// by its own monotonic clock. It is the contrast design for the replicated
// service: while it is down, nobody gets a lock; it never grants twice.
type Server struct {
	cfg    ServerConfig
	state  record.Slotted
	table  *LockTable
	timers map[string]clockwork.Timer // expiry timer per resource
}

// NewServer returns a server process; every restart needs a new one.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	return &Server{cfg: cfg, timers: map[string]clockwork.Timer{}, state: record.Slotted{Key: record.StateKey}}
}

// Start restores the table from disk and restarts every lease at its full TTL.
func (s *Server) Start(env process.Env) {
	now := s.now(env)
	s.table = NewLockTable()
	if b, ok := s.state.Load(env.Disk()); ok {
		var snap Snapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			panic(fmt.Sprintf("lockservice: corrupt server state on disk: %v", err))
		}
		s.table = RestoreLockTable(snap, now)
	}
	s.table.Rules = s.cfg.Table
	for _, l := range s.table.Leases() {
		s.armExpiry(env, l)
	}
	env.Log().LogAttrs(context.Background(), slog.LevelInfo, "server.start", slog.Uint64("last_token", s.table.LastToken()), slog.Int("leases", len(s.table.Leases())))
}

// Receive handles lock requests.
func (s *Server) Receive(env process.Env, from process.NodeID, msg process.Message) {
	now := s.now(env)
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		if err := s.cfg.Limits.CheckAcquire(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		if _, seen := s.table.SeenAcquire(m); !seen {
			s.expireDue(env, m.Resource, now)
		}
		before := s.table.LastToken()
		rep := s.table.Acquire(m, now, before+1)
		s.persist(env) // the token and the grant are durable before the reply
		if rep.Status == lockservice.Granted && rep.Token > before {
			s.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvGranted, Resource: m.Resource, Client: m.Client, Token: rep.Token})
		}
		if rep.Status == lockservice.Granted {
			l, _ := s.table.Lease(m.Resource)
			s.armExpiry(env, l)
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "server.acquire", slog.String("client", m.Client), slog.Uint64("req", m.Request),
			slog.String("resource", m.Resource), slog.String("status", rep.Status.String()), slog.Uint64("token", rep.Token))
		env.Send(from, rep)
	case lockservice.RenewRequest:
		if err := s.cfg.Limits.CheckRenew(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		rep := s.table.Renew(m, now)
		s.persist(env)
		if rep.Status == lockservice.Renewed {
			l, _ := s.table.Lease(m.Resource)
			s.armExpiry(env, l)
			s.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvRenewed, Resource: m.Resource, Client: m.Client, Token: m.Token, Request: m.Request})
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "server.renew", slog.String("client", m.Client), slog.Uint64("req", m.Request),
			slog.String("resource", m.Resource), slog.String("status", rep.Status.String()), slog.Uint64("token", m.Token))
		env.Send(from, rep)
	case lockservice.ReleaseRequest:
		if err := s.cfg.Limits.CheckRelease(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		rep, ended := s.table.Release(m)
		s.persist(env)
		if ended != nil {
			s.disarm(m.Resource)
			s.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: m.Resource, Client: ended.Holder, Token: ended.Token, Reason: "released"})
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "server.release", slog.String("client", m.Client), slog.Uint64("req", m.Request),
			slog.String("resource", m.Resource), slog.String("status", rep.Status.String()), slog.Uint64("token", m.Token))
		env.Send(from, rep)
	default:
		env.Log().Warn("server.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// persist writes the table and syncs it. Every reply that depends on the
// table's state goes out only after this returns.
func (s *Server) persist(env process.Env) {
	b, err := json.Marshal(s.table.Snapshot())
	if err != nil {
		panic(fmt.Sprintf("lockservice: encoding server state: %v", err))
	}
	s.state.Store(env.Disk(), b)
	if !s.cfg.UnsafeNoFsync {
		env.Disk().Sync()
	}
}

// now is the server's time for leases (ServerConfig.LeaseClock).
func (s *Server) now(env process.Env) time.Duration {
	if s.cfg.LeaseClock != nil {
		return s.cfg.LeaseClock(env)
	}
	return env.Clock().Monotonic()
}

func (s *Server) expireDue(env process.Env, resource string, now time.Duration) {
	if l, ok := s.table.ExpireDue(resource, now); ok {
		s.disarm(resource)
		s.persist(env)
		s.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: resource, Client: l.Holder, Token: l.Token, Reason: "expired"})
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "server.expire", slog.String("resource", resource), slog.Uint64("token", l.Token))
	}
}

// armExpiry (re)starts the timer that ends lease l at its deadline.
func (s *Server) armExpiry(env process.Env, l Lease) {
	s.disarm(l.Resource)
	d := l.Deadline - s.now(env)
	s.timers[l.Resource] = env.Clock().AfterFunc(d, func() {
		delete(s.timers, l.Resource)
		s.expireDue(env, l.Resource, s.now(env))
	})
}

func (s *Server) disarm(resource string) {
	if t, ok := s.timers[resource]; ok {
		t.Stop()
		delete(s.timers, resource)
	}
}

// Table exposes the server's state for tests and the harness.
func (s *Server) Table() *LockTable { return s.table }
