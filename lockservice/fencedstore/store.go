package fencedstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/process"
)

// StoreConfig configures the fenced store.
type StoreConfig struct {
	Limits lockservice.Limits
	// IgnoreTokens makes the store accept every write: the lease-only
	// contrast design, and the canary the checker must catch.
	IgnoreTokens bool
	Observer     lockservice.Observer
	// Fence decides a write's token against the highest the store has
	// accepted for its resource. nil: token ≥ highest (the holder may
	// write many times).
	Fence func(token, highest uint64) bool
	// FenceInMemory keeps the highest token per resource in memory only
	// (the durable record says 0), so a restarted store has forgotten it.
	FenceInMemory bool
	// Marks counts the protocol corners the store reaches (package
	// coverage); nil counts nothing.
	Marks *coverage.Counts
}

// FencedStore is the storage a lock protects: it accepts write(resource,
// value, token) iff token ≥ the highest token it has accepted for that
// resource. The check and the update happen in one event (atomic on the
// simulation thread) and are synced to disk before the reply.
type FencedStore struct {
	cfg   StoreConfig
	state record.Slotted
	table *FenceTable
	// rec is the durable record's encoding, reused across writes
	// (slotted.store seals a copy of it, and the disk keeps its own).
	rec []byte
}

// NewFencedStore returns a store process; every restart needs a new one.
func NewFencedStore(cfg StoreConfig) *FencedStore {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	return &FencedStore{cfg: cfg, state: record.Slotted{Key: record.StateKey}}
}

// Start restores the registers from disk.
func (s *FencedStore) Start(env process.Env) {
	s.table = NewFenceTable()
	if b, ok := s.state.Load(env.Disk()); ok {
		t, err := decodeStoreRecord(b)
		if err != nil {
			panic(fmt.Sprintf("lockservice: corrupt store state on disk: %v", err))
		}
		s.table = t
	}
	s.table.IgnoreTokens = s.cfg.IgnoreTokens
	s.table.Fence = s.cfg.Fence
}

// Receive handles writes and reads.
func (s *FencedStore) Receive(env process.Env, from process.NodeID, msg process.Message) {
	switch m := msg.(type) {
	case lockservice.WriteRequest:
		if err := s.cfg.Limits.CheckWrite(m); err != nil {
			env.Send(from, lockservice.WriteReply{Request: m.Request, Err: err.Error()})
			return
		}
		d := s.table.Write(m)
		switch {
		case d.Stale:
			s.cfg.Marks.Hit(coverage.StoreLateCopy)
			return
		case !d.Applied:
			s.cfg.Marks.Hit(coverage.StoreReplayedWrite)
		case !d.Reply.Accepted:
			s.cfg.Marks.Hit(coverage.StoreFenced)
		}
		if d.Applied {
			s.rec = s.table.appendRecord(s.rec[:0], s.cfg.FenceInMemory)
			s.state.Store(env.Disk(), s.rec)
			env.Disk().Sync()
			s.cfg.Observer.Observe(lockservice.Event{Kind: lockservice.EvApplied, Resource: m.Resource, Client: m.Client, Token: m.Token, Value: m.Value, Accepted: d.Reply.Accepted, Request: m.Request})
			env.Log().LogAttrs(context.Background(), slog.LevelInfo, "store.write", slog.String("client", m.Client), slog.Uint64("req", m.Request),
				slog.String("resource", m.Resource), slog.Uint64("token", m.Token), slog.Bool("accepted", d.Reply.Accepted))
		}
		env.Send(from, d.Reply)
	case lockservice.ReadRequest:
		if err := s.cfg.Limits.CheckNames(m.Resource, m.Client); err != nil {
			env.Send(from, lockservice.ReadReply{Request: m.Request, Err: err.Error()})
			return
		}
		r := s.table.Read(m.Resource)
		env.Send(from, lockservice.ReadReply{Request: m.Request, Value: r.Value, Token: r.ValueToken})
	default:
		env.Log().Warn("store.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// Table exposes the store's state for tests and the harness.
func (s *FencedStore) Table() *FenceTable { return s.table }
