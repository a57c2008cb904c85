// Package nodesvc is one replica of the reference lock service as a
// lockapi.Backend: the simulator's reference.Replica (Raft + lock table),
// hosted by realrt on the file disk and the TCP transport, with the HTTP
// lock API (package lockapi) in front of it. cmd/fencesim-node runs it.
//
// Everything the node decides for its clients beyond the replica's own
// protocol — request numbers, the request id as the acquire's key in the
// log, answering "not the leader" (outcome unknown) the requests a deposed
// leader dropped, holding a request while a leader is elected or the lead
// handed over, answering a retried release that took effect, the hand-over
// itself — is the front end's (lockservice/frontend): process code, which
// the simulator runs in front of every simulated replica, here hosted by
// realrt with the replica in one frontend.Node. This package only
// translates: an HTTP call becomes the lock request a simulated client
// sends, submitted on the executor from a node id no replica has (apiID)
// under a call number, and the front end's answer to that id comes back
// through realrt's Config.Local, matched to the waiting HTTP call by that
// number. A NotLeader answer becomes a 307 to the leader's HTTP address
// (every node knows its peers' from Config), or a 503 when none is known.
package nodesvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/frontend"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
	"github.com/fencesim/fencesim/wire"
)

// Peer is one replica of the group as every node knows it.
type Peer struct {
	ID process.NodeID
	// Raft is the replica's peer address (host:port of realrt's TCP
	// transport).
	Raft string
	// HTTP is the base URL of its lock API ("http://host:port"), where a
	// follower redirects clients when it is the leader.
	HTTP string
}

// Config describes one node. ID, DataDir, a peer listen address (Listen or
// Listener) and Peers (3 or 5, this one included) are required.
type Config struct {
	ID      process.NodeID
	DataDir string
	Disk    filedisk.Options
	// Listen is the address the Raft transport accepts peers on; Listener,
	// if set, is used instead.
	Listen   string
	Listener net.Listener
	Peers    []Peer
	// Replica tunes the replica; nil keeps reference.DefaultReplicaConfig.
	Replica func(*reference.ReplicaConfig)
	// SyncWrites fsyncs each Raft Ready in the replica's loop before it
	// goes on, as fencesim-0.19 did. By default the syncs run in the
	// background (reference.ReplicaConfig.AsyncWrites): the loop keeps
	// stepping acknowledgements and proposals while the disk works.
	SyncWrites bool
	// TokenOffset starts the group's fencing tokens above it (token = the
	// granting log index + the offset), e.g. to keep them clear of tokens
	// an older lock service issued to the same fenced resources. Every
	// replica of a group must use the same; it is recorded in a brand-new
	// data directory and Open refuses a different one later
	// (ErrTokenOffset). At most MaxTokenOffset.
	TokenOffset uint64
	// Snapshot is when the replica snapshots its lock table and drops the
	// Raft log it covers; the zero value keeps the reference's defaults.
	Snapshot Snapshot
	// LeaderWait is how long a request answered "not the leader, and no
	// leader known" (an election or a hand-over under way) is held until
	// a leader is known, to be redirected there (or submitted again, if
	// it is this node) instead of answered 503; the client would wait out
	// the 503's Retry-After, longer than a hand-over takes (default
	// 250ms, about an election; negative: do not wait). The front end
	// holds it (frontend.Config.LeaderWait).
	LeaderWait time.Duration
	Logger     *slog.Logger
	// ElectionTimeout is how long a follower waits to hear from a leader
	// before it campaigns (default DefaultElectionTimeout; the simulator's
	// replica uses 100 ms). A real machine's scheduler, saturated by
	// client work, delays heartbeats far more than the simulated network
	// does: at 100 ms, 1,000 clients against a 2-core machine's leader
	// caused an election every time (TestOverloadKeepsTheLeader).
	ElectionTimeout time.Duration
	// PeerTLS, if set, authenticates the replicas to each other with
	// mutual TLS (package internal/peertls); nil trusts whoever reaches
	// the Raft port.
	PeerTLS *realrt.PeerTLS
}

// Snapshot sets the replica's snapshot thresholds
// (reference.ReplicaConfig.SnapshotEntries, SnapshotBytes, SnapshotKeep):
// a snapshot after Entries entries or Bytes bytes of commands (0: that
// trigger off), keeping Keep entries before it in memory.
type Snapshot struct {
	Entries, Bytes, Keep uint64
}

// DefaultDiskCompactBytes is the file disk's compaction threshold for a
// node (filedisk.Options.CompactBytes) unless Config.Disk sets one.
const DefaultDiskCompactBytes = 8 << 20

// DefaultElectionTimeout is Config.ElectionTimeout's default, etcd's:
// at 500 ms the 1,000-client test still lost the leader one run in two on
// this loaded 2-core machine.
const DefaultElectionTimeout = time.Second

// apiID is the HTTP layer's node id as the front end's client: no replica
// has it, so the front end's answers to it are taken by Local.
const apiID process.NodeID = frontend.LocalID + 1

// Backend is a lockapi.Backend over the replica this process hosts.
type Backend struct {
	cfg   Config
	node  *realrt.Node
	proc  *frontend.Node
	httpX map[process.NodeID]string // peers' HTTP base URLs

	// Read off the executor (metrics, Ready).
	term, applied atomic.Uint64
	// loadedSnap and loadedEntries are what the replica's start loaded
	// (Loaded).
	loadedSnap, loadedEntries atomic.Uint64
	leader                    atomic.Int64 // the leader's id as last seen, or -1
	closed                    chan struct{}
	closeOnce                 sync.Once
	closeErr                  error

	// Owned by the executor (touched in Do, Local and the observer).
	calls    map[uint64]chan lockservice.LockReply // HTTP calls waiting, by call number
	nextCall uint64
	since    map[string]time.Time // resource → when its lease last (re)started as applied here (Get's remaining TTL)
}

var (
	_ lockapi.Backend        = (*Backend)(nil)
	_ lockapi.MetricsBackend = (*Backend)(nil)
)

// Open starts the replica on cfg.DataDir (a restart finds there what it
// synced) and its transport. Close stops it.
func Open(cfg Config) (*Backend, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = 250 * time.Millisecond
	}
	if n := len(cfg.Peers); n != 3 && n != 5 {
		return nil, fmt.Errorf("nodesvc: %d peers; a group has 3 or 5 replicas, this one included", n)
	}
	b := &Backend{cfg: cfg, httpX: map[process.NodeID]string{}, closed: make(chan struct{}),
		calls: map[uint64]chan lockservice.LockReply{}, since: map[string]time.Time{}}
	b.leader.Store(int64(lockservice.NoLeader))
	ids := make([]process.NodeID, 0, len(cfg.Peers))
	raftAddrs := map[process.NodeID]string{}
	self := false
	for _, p := range cfg.Peers {
		if _, dup := raftAddrs[p.ID]; dup {
			return nil, fmt.Errorf("nodesvc: peer id %d appears twice", p.ID)
		}
		if p.ID < 0 || p.ID >= frontend.LocalID {
			return nil, fmt.Errorf("nodesvc: peer id %d out of range 0..%d", p.ID, frontend.LocalID-1)
		}
		self = self || p.ID == cfg.ID
		ids = append(ids, p.ID)
		raftAddrs[p.ID] = p.Raft
		b.httpX[p.ID] = p.HTTP
	}
	if !self {
		return nil, fmt.Errorf("nodesvc: this node's id %d is not among the peers", cfg.ID)
	}
	if cfg.Disk.CompactBytes == 0 {
		// The replica's live data is bounded by its snapshot thresholds
		// (a few MiB by default), so the file disk compacts its own log
		// at 8 MiB rather than at its general 64 MiB: the data directory
		// stays a few times the live data.
		cfg.Disk.CompactBytes = DefaultDiskCompactBytes
	}
	if err := checkTokenOffset(cfg.DataDir, cfg.Disk, cfg.TokenOffset); err != nil {
		return nil, err
	}
	rc := reference.DefaultReplicaConfig(ids)
	rc.TokenOffset = cfg.TokenOffset
	rc.GroupCommit = true // realrt runs events in batches: one fsync each
	rc.AsyncWrites = !cfg.SyncWrites
	if s := cfg.Snapshot; s != (Snapshot{}) {
		rc.SnapshotEntries, rc.SnapshotBytes, rc.SnapshotKeep = s.Entries, s.Bytes, s.Keep
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = DefaultElectionTimeout
	}
	rc.ElectionTick = max(2*rc.HeartbeatTick+1, int(cfg.ElectionTimeout/rc.TickInterval))
	if cfg.Replica != nil {
		cfg.Replica(&rc)
	}
	rc.Observer = observer{b}
	b.proc = frontend.NewNode(rc, frontend.Config{LeaderWait: max(cfg.LeaderWait, 0), After: b.observeRole})
	node, err := realrt.Start(realrt.Config{
		ID: cfg.ID, DataDir: cfg.DataDir, Disk: cfg.Disk, Listen: cfg.Listen, Listener: cfg.Listener,
		Peers: raftAddrs, Codec: wire.Codec{}, Local: b.local, Logger: cfg.Logger, TLS: cfg.PeerTLS,
	}, wrapper{b})
	if err != nil {
		return nil, err
	}
	b.node = node
	return b, nil
}

// Node is the realrt node hosting the replica (its peer address, stats).
func (b *Backend) Node() *realrt.Node { return b.node }

// Close stops the node; the data directory keeps what the replica synced.
// Waiting requests fail closed.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.closeErr = b.node.Close()
	})
	return b.closeErr
}

// wrapper is the process realrt runs: the front end and replica
// (frontend.Node), and what the real service publishes of them.
type wrapper struct{ b *Backend }

func (w wrapper) Start(env process.Env) {
	w.b.proc.Start(env)
	snap, entries := w.b.proc.Replica().Loaded()
	w.b.loadedSnap.Store(snap)
	w.b.loadedEntries.Store(uint64(entries))
}

// Loaded returns what the replica loaded from the data directory when the
// node opened it: the index of its snapshot (0: none) and how many log
// entries after it it replayed (reference.Replica.Loaded).
func (b *Backend) Loaded() (snapshot, entries uint64) {
	return b.loadedSnap.Load(), b.loadedEntries.Load()
}

// EndBatch lets the replica do the batch's Raft work in one Ready
// (reference.ReplicaConfig.GroupCommit).
func (w wrapper) EndBatch(env process.Env) { w.b.proc.EndBatch(env) }

func (w wrapper) Receive(env process.Env, from process.NodeID, m process.Message) {
	w.b.proc.Receive(env, from, m)
}

// observeRole publishes the replica's term and the leader it knows; the
// front end runs it at the end of every event.
func (b *Backend) observeRole() {
	rep := b.proc.Replica()
	lead, term := rep.IsLeader()
	b.term.Store(term)
	switch l := rep.Leader(); {
	case lead:
		b.leader.Store(int64(b.cfg.ID))
	case l == b.cfg.ID: // stepped down within its term (CheckQuorum)
		b.leader.Store(int64(lockservice.NoLeader))
	default:
		b.leader.Store(int64(l))
	}
}

// observer takes the replica's applied decisions: the applied index, and
// when each lease (re)started here, for Get's remaining TTL.
type observer struct{ b *Backend }

func (o observer) Observe(e lockservice.Event) {
	switch e.Kind {
	case lockservice.EvEntryApplied:
		o.b.applied.Store(e.Index)
	case lockservice.EvGranted, lockservice.EvRenewed:
		o.b.since[e.Resource] = time.Now()
	case lockservice.EvEnded:
		delete(o.b.since, e.Resource)
	}
}

// local takes the front end's answers to the HTTP layer, on the executor.
func (b *Backend) local(to process.NodeID, m process.Message) bool {
	if to != apiID {
		return false
	}
	if rep, ok := m.(lockservice.LockReply); ok {
		if ch, ok := b.calls[rep.Request]; ok {
			delete(b.calls, rep.Request)
			ch <- rep // buffered, one answer per call
		}
	}
	return true
}

// errClosed: the node is shutting down.
var errClosed = errors.New("nodesvc: node closed")

// call hands the request build makes with its call number to the front
// end, as a client's message, and waits for the answer.
func (b *Backend) call(ctx context.Context, build func(request uint64) process.Message) (lockservice.LockReply, error) {
	ch := make(chan lockservice.LockReply, 1)
	var n uint64
	err := b.node.Do(ctx, func(env process.Env) {
		b.nextCall++
		n = b.nextCall
		b.calls[n] = ch
		wrapper{b}.Receive(env, apiID, build(n))
	})
	switch {
	case errors.Is(err, realrt.ErrClosed):
		return lockservice.LockReply{}, errClosed
	case err != nil:
		return lockservice.LockReply{}, err
	}
	select {
	case rep := <-ch:
		return rep, nil
	case <-ctx.Done():
	case <-b.closed:
	}
	// Forget the call; an answer after this is dropped by local.
	dctx, cancel := context.WithTimeout(context.Background(), time.Second)
	b.node.Do(dctx, func(process.Env) { delete(b.calls, n) })
	cancel()
	select {
	case rep := <-ch: // answered meanwhile
		return rep, nil
	default:
	}
	if ctx.Err() != nil {
		return lockservice.LockReply{}, ctx.Err()
	}
	return lockservice.LockReply{}, errClosed
}

// replyError maps a reply that is not the operation's success to the
// Backend's typed errors; anything else fails closed (503).
func (b *Backend) replyError(rep lockservice.LockReply) error {
	switch rep.Status {
	case lockservice.NotHolder:
		return lockapi.ErrNotHolder
	case lockservice.NotLeader:
		return &lockapi.NotLeaderError{Leader: b.leaderURL(rep.Leader)}
	case lockservice.Overloaded:
		return &lockapi.OverloadedError{RetryAfter: 100 * time.Millisecond}
	case lockservice.Invalid:
		return fmt.Errorf("nodesvc: the replica refused the request: %s", rep.Err)
	default:
		return fmt.Errorf("nodesvc: unexpected answer %v", rep.Status)
	}
}

// leaderURL is the HTTP base URL of the leader id, or "" when unknown (the
// API then answers 503: an election is under way).
func (b *Backend) leaderURL(id process.NodeID) string {
	if id == lockservice.NoLeader || id == b.cfg.ID {
		if l := process.NodeID(b.leader.Load()); l != lockservice.NoLeader && l != b.cfg.ID {
			id = l
		} else {
			return ""
		}
	}
	return b.httpX[id]
}

// Acquire implements lockapi.Backend: requestID is the acquire's key (see
// lockservice/frontend). With wait > 0 the acquire waits in the leader's
// queue for up to wait.
func (b *Backend) Acquire(ctx context.Context, resource, client string, ttl, wait time.Duration, requestID string) (lockapi.Lease, error) {
	rep, err := b.call(ctx, func(n uint64) process.Message {
		return lockservice.AcquireRequest{Resource: resource, Client: client, TTL: ttl, Request: n, Key: requestID, Wait: wait}
	})
	if err != nil {
		return lockapi.Lease{}, err
	}
	switch rep.Status {
	case lockservice.Granted:
		return lockapi.Lease{Token: rep.Token, TTL: rep.TTL, Waited: rep.Waited}, nil
	case lockservice.Busy:
		// The log decided busy; who holds it and for how long are a hint
		// read from the leader's table.
		he := &lockapi.HeldError{RetryAfter: ttl}
		if st, err := b.Get(ctx, resource); err == nil && st.Held {
			he.Holder, he.RetryAfter = st.Holder, st.TTL
		}
		return lockapi.Lease{}, he
	}
	return lockapi.Lease{}, b.replyError(rep)
}

// Renew implements lockapi.Backend. The renewal carries ttl through the
// log: the lease restarts for it, and keeps it for later renewals and a
// new leader's restart.
func (b *Backend) Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (lockapi.Lease, error) {
	rep, err := b.call(ctx, func(n uint64) process.Message {
		return lockservice.RenewRequest{Resource: resource, Client: client, Token: token, Request: n, TTL: ttl}
	})
	if err != nil {
		return lockapi.Lease{}, err
	}
	if rep.Status == lockservice.Renewed {
		return lockapi.Lease{Token: rep.Token, TTL: rep.TTL}, nil
	}
	return lockapi.Lease{}, b.replyError(rep)
}

// Release implements lockapi.Backend. requestID goes into the log with
// the release, so that its retry is answered released by whichever
// replica leads then (lockservice/frontend).
func (b *Backend) Release(ctx context.Context, resource, client string, token uint64, requestID string) error {
	rep, err := b.call(ctx, func(n uint64) process.Message {
		return lockservice.ReleaseRequest{Resource: resource, Client: client, Token: token, Request: n, RequestID: requestID}
	})
	if err != nil {
		return err
	}
	if rep.Status == lockservice.Released {
		return nil
	}
	return b.replyError(rep)
}

// Get implements lockapi.Backend from the leader's applied table: a
// follower redirects. It is not a linearizable read (no read index): a
// leader deposed an instant ago may answer from a table the new one has
// moved past. TTL is the lease's remaining time as measured from when
// this replica applied its grant or last renewal (the leader's timer
// restarts it in full on a change of leader, so it is a lower bound).
func (b *Backend) Get(ctx context.Context, resource string) (lockapi.LockState, error) {
	var st lockapi.LockState
	var lead bool
	err := b.node.Do(ctx, func(process.Env) {
		rep := b.proc.Replica()
		lead, _ = rep.IsLeader()
		if !lead {
			return
		}
		t := rep.Table()
		st.LastToken = t.LastToken()
		if l, ok := t.Lease(resource); ok {
			st.Held, st.Holder, st.Token, st.TTL = true, l.Holder, l.Token, l.TTL
			if since, ok := b.since[resource]; ok {
				st.TTL = max(l.TTL-time.Since(since), 0)
			}
		}
	})
	if errors.Is(err, realrt.ErrClosed) {
		return st, errClosed
	}
	if err != nil {
		return st, err
	}
	if !lead {
		return st, &lockapi.NotLeaderError{Leader: b.leaderURL(lockservice.NoLeader)}
	}
	return st, nil
}

// Ready implements lockapi.Backend: the node serves when a leader is known
// (itself or a peer it can redirect to).
func (b *Backend) Ready(ctx context.Context) error {
	select {
	case <-b.closed:
		return errClosed
	default:
	}
	if process.NodeID(b.leader.Load()) == lockservice.NoLeader {
		return errors.New("no leader known (an election is under way, or no quorum)")
	}
	return nil
}

// Handover, if this replica leads, hands the lead over
// (frontend.FrontEnd.Handover) and waits until another replica leads, so
// that stopping this one costs the group no election; a transfer the Raft
// core abandons is started again while ctx lasts. It returns the new
// leader, or lockservice.NoLeader and nil if this replica does not lead;
// when ctx ends first it returns ctx's error, and the caller stops anyway
// (the others then elect a leader after their election timeout).
func (b *Backend) Handover(ctx context.Context) (process.NodeID, error) {
	const poll = 5 * time.Millisecond
	for first := true; ; first = false {
		var done bool
		var leader process.NodeID
		var terr error
		err := b.node.Do(ctx, func(process.Env) { done, leader, terr = b.proc.FrontEnd().Handover() })
		switch {
		case errors.Is(err, realrt.ErrClosed):
			return lockservice.NoLeader, errClosed
		case err != nil:
			return lockservice.NoLeader, err
		case done && first:
			return lockservice.NoLeader, nil // a follower: nothing to hand over
		case done && leader != lockservice.NoLeader:
			b.cfg.Logger.Info("nodesvc.handover.done", slog.Int("leader", int(leader)), slog.Uint64("term", b.term.Load()))
			return leader, nil
		case terr != nil:
			b.cfg.Logger.Warn("nodesvc.handover", slog.Any("err", terr))
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return lockservice.NoLeader, ctx.Err()
		case <-t.C:
		}
	}
}

// IsLeader reports whether this replica led at its last event.
func (b *Backend) IsLeader() bool { return process.NodeID(b.leader.Load()) == b.cfg.ID }

// Waiting is how many acquires wait in the replica's queue (at the
// leader; 0 elsewhere, or if the replica does not answer within a second).
func (b *Backend) Waiting() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	b.node.Do(ctx, func(process.Env) { n = b.proc.Replica().Waiting() })
	return n
}

// Term is the replica's Raft term at its last event.
func (b *Backend) Term() uint64 { return b.term.Load() }

// Collectors implements lockapi.MetricsBackend: Raft term, applied index
// and leadership.
func (b *Backend) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_term", Help: "The replica's Raft term.",
		}, func() float64 { return float64(b.term.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_applied_index", Help: "The last Raft log index this replica applied (committed and applied; a grant's token is its index).",
		}, func() float64 { return float64(b.applied.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_leader", Help: "1 if this replica is the leader, else 0.",
		}, func() float64 {
			if b.IsLeader() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_leader_id", Help: "The id of the leader as this replica last saw it, -1 if unknown.",
		}, func() float64 { return float64(b.leader.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fencesim_node_disk_fsyncs_total", Help: "fsyncs of the replica's write batches since it started (one a group of Raft writes: group commit and background syncs share them).",
		}, func() float64 { return float64(b.node.Fsyncs()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_start_snapshot_index", Help: "The index of the snapshot the replica started from (0: none).",
		}, func() float64 { return float64(b.loadedSnap.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencesim_node_raft_start_replayed_entries", Help: "The log entries after its snapshot the replica replayed when it started (bounded by the snapshot thresholds).",
		}, func() float64 { return float64(b.loadedEntries.Load()) }),
	}
}

// APILimiter is the admission limit fencesim-node puts in front of its
// replica (lockapi.LimiterConfig; algorithm "" is the gradient): it moves
// between the replica's own ingress bound (ReplicaConfig.IngressDepth, 64)
// and 256, never below. Below that bound a latency gradient throttles the
// replica's group commit: more requests in flight make each batch — and so
// each request — slower while throughput rises, which the gradient reads
// as queueing. With lockapi's floor of 8, a step from 8 to 64 clients
// after an idle spell was shed for seconds (fencesim-bench per-worker 64
// after the 8-worker cells: p99 268 ms, 4× etcd's; with this floor 26 ms
// at 4,843 cycles/s). Beyond the bound the replica sheds by itself.
func APILimiter(algorithm string) lockapi.LimiterConfig {
	c := lockapi.DefaultConfig().Limiter // the algorithm and AIMD's target
	if algorithm != "" {
		c.Algorithm = algorithm
	}
	c.Min, c.Max = reference.DefaultReplicaConfig(nil).IngressDepth, 256
	return c
}
