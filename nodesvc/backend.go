// Package nodesvc is one replica of the reference lock service as a
// lockapi.Backend: the simulator's reference.Replica (Raft + lock table),
// hosted by realrt on the file disk and the TCP transport, with the HTTP
// lock API (package lockapi) in front of it. cmd/fencesim-node runs it.
//
// The HTTP front end is a client of the replica that is not on the
// network: its requests enter through realrt's Node.Do as AcquireRequest,
// RenewRequest and ReleaseRequest from a node id no replica has
// (frontEndID), and the replica's answers to that id come back through
// realrt's Config.Local, matched to the waiting HTTP request by request
// number. A follower answers NotLeader, which the API turns into a 307 to
// the leader's HTTP address (every node knows its peers' from Config).
//
// Request numbers. The replica deduplicates by (client, request number)
// and refuses as Stale a number below what it has applied for the client
// (lockservice.LockTable.stale: a lower incarnation in the high 32 bits, or
// below the dedup window). HTTP clients of one name may call any node, so
// the numbers cannot be theirs: the front end numbers every request it
// submits as term<<32 | seq, where term is the replica's Raft term at
// submission and seq counts the submissions in that term, on the
// executor. A request is proposed only by the leader of that term, entries
// apply in log order, and a later leader has a higher term, so the numbers
// a client's requests apply with only grow, whichever node took them: none
// is refused as Stale. The API's request_id is not mapped to a number: it
// travels through the log as the acquire's Key
// (lockservice.AcquireRequest.Key), and the lock table, on every replica
// alike, applies an acquire at most once per (client, request_id) and
// answers a retry from its memory — whichever node takes the retry, and
// even after the first grant, whose answer was lost, has expired (the
// client is told that grant, which it measures from its first attempt,
// not a second one). A holder's acquire under another request_id is
// decided in the log too: busy (the Backend's contract, as lockd's).
// Nothing is answered from this replica's own table: a follower's, or a
// leader's that has not applied a release yet, may be stale. Renew and
// release are owner-checked by token. A release's API request_id goes into
// its log entry (ReleaseRequest.RequestID), so every replica learns it as
// it applies the release: a retry of a release that took effect — its
// answer lost to a change of leader — is answered released by whichever
// node leads then.
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
	"github.com/fencesim/fencesim/lockservice/raft"
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
	// SweepInterval is how often requests waiting on a replica that lost
	// the lead are answered not-leader (the replica forgets them when it
	// steps down; default 50ms).
	SweepInterval time.Duration
	// LeaderWait is how long a request answered "not the leader, and no
	// leader known" (an election or a hand-over under way) is held until
	// a leader is known, to be redirected there (or submitted again, if
	// it is this node) instead of answered 503; the client would wait out
	// the 503's Retry-After, longer than a hand-over takes (default
	// 250ms, about an election; negative: do not wait).
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

// frontEndID is the HTTP front end's node id as the replica's client: no
// replica has it, so the replica's answers to it are taken by Local.
const frontEndID process.NodeID = 1 << 20

// Backend is a lockapi.Backend over the replica this process hosts.
type Backend struct {
	cfg   Config
	node  *realrt.Node
	rep   *reference.Replica
	httpX map[process.NodeID]string // peers' HTTP base URLs

	// Read off the executor (metrics, Ready).
	term, applied atomic.Uint64
	// loadedSnap and loadedEntries are what the replica's start loaded
	// (Loaded).
	loadedSnap, loadedEntries atomic.Uint64
	leader                    atomic.Int64 // the leader's id as last seen, or -1
	closed                    chan struct{}
	closeOnce                 sync.Once
	sweepDone                 chan struct{}
	closeErr                  error

	// Owned by the executor (touched in Do, Local and the process wrapper).
	pending map[uint64]pending
	seqTerm uint64 // the term seq counts in
	seq     uint64
	since   map[string]time.Time // resource → when its lease last (re)started as applied here (Get's remaining TTL)
	// released is, by resource, its last release made with a request id,
	// as applied here: the release's id travels in the log entry, so every
	// replica knows it and a retry at a new leader is answered released.
	// One entry per resource ever released, as the replica's own table.
	released map[string]releaseInfo
}

// releaseInfo identifies a release made with a request id.
type releaseInfo struct {
	client    string
	token     uint64
	requestID string
}

type pending struct {
	term uint64
	ch   chan lockservice.LockReply
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
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 50 * time.Millisecond
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = 250 * time.Millisecond
	}
	if n := len(cfg.Peers); n != 3 && n != 5 {
		return nil, fmt.Errorf("nodesvc: %d peers; a group has 3 or 5 replicas, this one included", n)
	}
	b := &Backend{cfg: cfg, httpX: map[process.NodeID]string{}, closed: make(chan struct{}), sweepDone: make(chan struct{}),
		pending: map[uint64]pending{}, since: map[string]time.Time{}, released: map[string]releaseInfo{}}
	b.leader.Store(int64(lockservice.NoLeader))
	ids := make([]process.NodeID, 0, len(cfg.Peers))
	raftAddrs := map[process.NodeID]string{}
	self := false
	for _, p := range cfg.Peers {
		if _, dup := raftAddrs[p.ID]; dup {
			return nil, fmt.Errorf("nodesvc: peer id %d appears twice", p.ID)
		}
		if p.ID < 0 || p.ID >= frontEndID {
			return nil, fmt.Errorf("nodesvc: peer id %d out of range 0..%d", p.ID, frontEndID-1)
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
	b.rep = reference.NewReplica(rc)
	node, err := realrt.Start(realrt.Config{
		ID: cfg.ID, DataDir: cfg.DataDir, Disk: cfg.Disk, Listen: cfg.Listen, Listener: cfg.Listener,
		Peers: raftAddrs, Codec: wire.Codec{}, Local: b.local, Logger: cfg.Logger, TLS: cfg.PeerTLS,
	}, wrapper{b})
	if err != nil {
		return nil, err
	}
	b.node = node
	go b.sweep()
	return b, nil
}

// Node is the realrt node hosting the replica (its peer address, stats).
func (b *Backend) Node() *realrt.Node { return b.node }

// Close stops the sweeper and the node; the data directory keeps what the
// replica synced. Waiting requests fail closed.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		<-b.sweepDone
		b.closeErr = b.node.Close()
	})
	return b.closeErr
}

// wrapper is the process realrt runs: the replica, plus what the front end
// learns from its traffic (who leads, its term).
type wrapper struct{ b *Backend }

func (w wrapper) Start(env process.Env) {
	w.b.rep.Start(env)
	snap, entries := w.b.rep.Loaded()
	w.b.loadedSnap.Store(snap)
	w.b.loadedEntries.Store(uint64(entries))
	w.b.observeRole()
}

// Loaded returns what the replica loaded from the data directory when the
// node opened it: the index of its snapshot (0: none) and how many log
// entries after it it replayed (reference.Replica.Loaded).
func (b *Backend) Loaded() (snapshot, entries uint64) {
	return b.loadedSnap.Load(), b.loadedEntries.Load()
}

// EndBatch lets the replica do the batch's Raft work in one Ready
// (reference.ReplicaConfig.GroupCommit).
func (w wrapper) EndBatch(env process.Env) {
	w.b.rep.EndBatch(env)
	w.b.observeRole()
}

func (w wrapper) Receive(env process.Env, from process.NodeID, m process.Message) {
	w.b.rep.Receive(env, from, m)
	w.b.observeRole()
	// Only the leader of a term sends these; noted after observeRole, which
	// forgets the leader when the term moves (this message may move it).
	if rm, ok := m.(reference.RaftMessage); ok && (rm.M.Type == raft.MsgApp || rm.M.Type == raft.MsgHeartbeat) && rm.M.Term == w.b.term.Load() {
		w.b.leader.Store(int64(from))
	}
}

// observeRole publishes the replica's term and, if it leads, itself as
// leader; on the executor.
func (b *Backend) observeRole() {
	lead, term := b.rep.IsLeader()
	if !lead && (term != b.term.Load() || process.NodeID(b.leader.Load()) == b.cfg.ID) {
		// A new term: its leader is not known yet. Or this replica stepped
		// down within its term (CheckQuorum): it must not go on calling
		// itself the leader.
		b.leader.Store(int64(lockservice.NoLeader))
	}
	b.term.Store(term)
	if lead {
		b.leader.Store(int64(b.cfg.ID))
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
		if e.RequestID != "" {
			o.b.released[e.Resource] = releaseInfo{client: e.Client, token: e.Token, requestID: e.RequestID}
		}
	}
}

// local takes the replica's answers to the front end, on the executor.
func (b *Backend) local(to process.NodeID, m process.Message) bool {
	if to != frontEndID {
		return false
	}
	if rep, ok := m.(lockservice.LockReply); ok {
		if p, ok := b.pending[rep.Request]; ok {
			delete(b.pending, rep.Request)
			p.ch <- rep // buffered, one answer per request
		}
	}
	return true
}

// sweep answers not-leader the requests waiting on a replica that is no
// longer the leader of their term: it dropped them when it stepped down.
// Their outcome is unknown (the entry may still commit under the next
// leader); the client retries there, which is safe (see the package doc).
func (b *Backend) sweep() {
	defer close(b.sweepDone)
	t := time.NewTicker(b.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-b.closed:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b.node.Do(ctx, func(process.Env) {
			b.observeRole()
			lead, term := b.rep.IsLeader()
			for req, p := range b.pending { //detlint:sorted (each answered alone; order is not observable)
				if !lead || p.term != term {
					delete(b.pending, req)
					p.ch <- lockservice.LockReply{Request: req, Status: lockservice.NotLeader, Leader: lockservice.NoLeader}
				}
			}
		})
		cancel()
	}
}

// errClosed: the node is shutting down.
var errClosed = errors.New("nodesvc: node closed")

// call is call1, holding an answer "not the leader" that names no other
// leader this node knows to lead (an election under way, or this node
// handing the lead over) for up to LeaderWait, until a leader is known: a
// peer, which the answer then names (the API redirects there), or this
// node, which takes the request again under a new number (as a client's
// retry would; during a hand-over it is refused again at once). A
// client told "no leader" (503) would wait out a Retry-After longer than
// an election; one redirected to a hand-over's target before it leads
// would bounce back here.
func (b *Backend) call(ctx context.Context, build func(request uint64) process.Message) (lockservice.LockReply, error) {
	deadline := time.Now().Add(b.cfg.LeaderWait)
	for {
		rep, err := b.call1(ctx, build)
		if err != nil || rep.Status != lockservice.NotLeader {
			return rep, err
		}
		self := process.NodeID(b.leader.Load()) == b.cfg.ID
		if rep.Leader != lockservice.NoLeader && rep.Leader != b.cfg.ID && !self {
			return rep, nil // a follower's redirect to the leader it knows
		}
		for {
			if time.Now().After(deadline) {
				return rep, nil
			}
			t := time.NewTimer(2 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return rep, nil
			case <-b.closed:
				t.Stop()
				return rep, nil
			case <-t.C:
			}
			if l := process.NodeID(b.leader.Load()); l == b.cfg.ID {
				break // this node leads (still, or now): submit again
			} else if l != lockservice.NoLeader {
				rep.Leader = l
				return rep, nil
			}
		}
	}
}

// call1 submits the request build makes with its number and waits for the
// replica's answer: a follower's redirect, or the leader's once the
// request applies. Every decision comes from the log, none from this
// replica's table.
func (b *Backend) call1(ctx context.Context, build func(request uint64) process.Message) (lockservice.LockReply, error) {
	ch := make(chan lockservice.LockReply, 1)
	var req uint64
	var full bool
	err := b.node.Do(ctx, func(env process.Env) {
		_, term := b.rep.IsLeader()
		if term != b.seqTerm {
			b.seqTerm, b.seq = term, 0
		}
		if b.seq == 1<<32-1 {
			full = true // 4 billion requests in one term: wait for the next
			return
		}
		b.seq++
		req = term<<32 | b.seq
		b.pending[req] = pending{term: term, ch: ch}
		b.rep.Receive(env, frontEndID, build(req))
	})
	switch {
	case errors.Is(err, realrt.ErrClosed):
		return lockservice.LockReply{}, errClosed
	case err != nil:
		return lockservice.LockReply{}, err
	case full:
		return lockservice.LockReply{}, &lockapi.OverloadedError{RetryAfter: time.Second}
	}
	select {
	case rep := <-ch:
		return rep, nil
	case <-ctx.Done():
	case <-b.closed:
	}
	// Forget the request; an answer after this is dropped by local.
	dctx, cancel := context.WithTimeout(context.Background(), time.Second)
	b.node.Do(dctx, func(process.Env) { delete(b.pending, req) })
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

// Acquire implements lockapi.Backend. requestID is not the replica's
// request number but the acquire's Key (see the package doc): the table
// applies it once, and answers a retry from its memory. With wait > 0 the
// acquire waits in the leader's queue (see reference.Replica's wait
// queue) for up to wait.
func (b *Backend) Acquire(ctx context.Context, resource, client string, ttl, wait time.Duration, requestID string) (lockapi.Lease, error) {
	rep, err := b.call(ctx, func(r uint64) process.Message {
		return lockservice.AcquireRequest{Resource: resource, Client: client, TTL: ttl, Request: r, Key: requestID, Wait: wait}
	})
	if err != nil {
		return lockapi.Lease{}, err
	}
	switch rep.Status {
	case lockservice.Granted:
		return lockapi.Lease{Token: rep.Token, TTL: rep.TTL, Waited: rep.Waited}, nil
	case lockservice.Busy:
		he := &lockapi.HeldError{RetryAfter: ttl}
		if st, err := b.Get(ctx, resource); err == nil && st.Held {
			he.Holder, he.RetryAfter = st.Holder, st.TTL
		}
		return lockapi.Lease{}, he
	}
	return lockapi.Lease{}, b.replyError(rep)
}

// Renew implements lockapi.Backend.
func (b *Backend) Renew(ctx context.Context, resource, client string, token uint64, ttl time.Duration) (lockapi.Lease, error) {
	// The renewal carries ttl through the log: the lease restarts for
	// it, and keeps it for later renewals and a new leader's restart.
	rep, err := b.call(ctx, func(r uint64) process.Message {
		return lockservice.RenewRequest{Resource: resource, Client: client, Token: token, Request: r, TTL: ttl}
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
// the release, so that its retry — the first answer lost, or a 503 or 307
// from a leader that stepped down after applying it — is recognised by
// whichever replica leads then, and answered released.
func (b *Backend) Release(ctx context.Context, resource, client string, token uint64, requestID string) error {
	rep, err := b.call(ctx, func(r uint64) process.Message {
		return lockservice.ReleaseRequest{Resource: resource, Client: client, Token: token, Request: r, RequestID: requestID}
	})
	if err != nil {
		return err
	}
	if rep.Status == lockservice.Released {
		return nil
	}
	if rep.Status == lockservice.NotHolder && requestID != "" {
		// The replica answered from the entries it applied, which include
		// the release being retried if it took effect.
		var done bool
		if err := b.node.Do(ctx, func(process.Env) {
			done = b.released[resource] == releaseInfo{client: client, token: token, requestID: requestID}
		}); err == nil && done {
			return nil
		}
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
		lead, _ = b.rep.IsLeader()
		if !lead {
			return
		}
		t := b.rep.Table()
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

// Handover, if this replica leads, hands the lead to the follower whose
// log is most up to date (reference.Replica.TransferLeadership) and waits
// until another replica leads, so that stopping this one costs the group
// no election: requests it had proposed are answered as they commit, new
// ones are refused as not-leader meanwhile (the client retries, and then
// follows the redirect to the new leader). A transfer the Raft core
// abandons (the target did not take over within an election timeout) is
// started again while ctx lasts. It returns the new leader, or
// lockservice.NoLeader and nil if this replica does not lead; when ctx
// ends first it returns ctx's error, and the caller stops anyway (the
// others then elect a leader after their election timeout).
func (b *Backend) Handover(ctx context.Context) (process.NodeID, error) {
	const poll = 5 * time.Millisecond
	for first := true; ; first = false {
		var done bool
		var leader process.NodeID
		var terr error
		err := b.node.Do(ctx, func(process.Env) {
			lead, _ := b.rep.IsLeader()
			leader = b.rep.Leader()
			switch {
			case !lead:
				done = true
			case !b.rep.Transferring():
				_, terr = b.rep.TransferLeadership(lockservice.NoLeader)
			}
			b.observeRole()
		})
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
	b.node.Do(ctx, func(process.Env) { n = b.rep.Waiting() })
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
