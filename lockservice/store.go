package lockservice

import (
	"fmt"
	"log/slog"

	"github.com/fencesim/fencesim/process"
)

// StoreConfig configures the fenced store.
type StoreConfig struct {
	Limits Limits
	// IgnoreTokens makes the store accept every write: the lease-only
	// contrast design, and the canary the checker must catch.
	IgnoreTokens bool
	Observer     Observer
	// Fence decides a write's token against the highest the store has
	// accepted for its resource. nil: token ≥ highest (the holder may
	// write many times).
	Fence func(token, highest uint64) bool
	// FenceInMemory keeps the highest token per resource in memory only
	// (the durable record says 0), so a restarted store has forgotten it.
	FenceInMemory bool
}

// FencedStore is the storage a lock protects: it accepts write(resource,
// value, token) iff token ≥ the highest token it has accepted for that
// resource. The check and the update happen in one event (atomic on the
// simulation thread) and are synced to disk before the reply.
type FencedStore struct {
	cfg   StoreConfig
	state slotted
	table *FenceTable
	// rec is the durable record's encoding, reused across writes
	// (slotted.store seals a copy of it, and the disk keeps its own).
	rec []byte
}

// NewFencedStore returns a store process; every restart needs a new one.
func NewFencedStore(cfg StoreConfig) *FencedStore {
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	return &FencedStore{cfg: cfg, state: slotted{key: stateKey}}
}

// Start restores the registers from disk.
func (s *FencedStore) Start(env process.Env) {
	s.table = NewFenceTable()
	if b, ok := s.state.load(env.Disk()); ok {
		t, err := decodeStoreRecord(b)
		if err != nil {
			panic(fmt.Sprintf("lockservice: corrupt store state on disk: %v", err))
		}
		s.table = t
	}
	s.table.IgnoreTokens = s.cfg.IgnoreTokens
	s.table.fence = s.cfg.Fence
}

// Receive handles writes and reads.
func (s *FencedStore) Receive(env process.Env, from process.NodeID, msg process.Message) {
	switch m := msg.(type) {
	case WriteRequest:
		if err := s.cfg.Limits.CheckWrite(m); err != nil {
			env.Send(from, WriteReply{Request: m.Request, Err: err.Error()})
			return
		}
		d := s.table.Write(m)
		if d.Stale {
			return
		}
		if d.Applied {
			s.rec = s.table.appendRecord(s.rec[:0], s.cfg.FenceInMemory)
			s.state.store(env.Disk(), s.rec)
			env.Disk().Sync()
			s.cfg.Observer.Observe(Event{Kind: EvApplied, Resource: m.Resource, Client: m.Client, Token: m.Token, Value: m.Value, Accepted: d.Reply.Accepted, Request: m.Request})
			env.Log().Info("store.write", slog.String("client", m.Client), slog.Uint64("req", m.Request),
				slog.String("resource", m.Resource), slog.Uint64("token", m.Token), slog.Bool("accepted", d.Reply.Accepted))
		}
		env.Send(from, d.Reply)
	case ReadRequest:
		if err := s.cfg.Limits.checkNames(m.Resource, m.Client); err != nil {
			env.Send(from, ReadReply{Request: m.Request, Err: err.Error()})
			return
		}
		r := s.table.Read(m.Resource)
		env.Send(from, ReadReply{Request: m.Request, Value: r.Value, Token: r.ValueToken})
	default:
		env.Log().Warn("store.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// Table exposes the store's state for tests and the harness.
func (s *FencedStore) Table() *FenceTable { return s.table }
