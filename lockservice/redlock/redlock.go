package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs/shape"
	"github.com/fencesim/fencesim/process"
)

// Redlock, the contrast design of Kleppmann's "How to do distributed
// locking" (2016): N independent lock nodes, no replication, no
// consensus. Each node is a Redis-like key store; a client holds the lock
// while it believes a majority of the nodes keep its random value:
//
//	acquire  SET resource value NX PX ttl   on every node
//	extend   if GET resource == value then PEXPIRE resource ttl
//	release  if GET resource == value then DEL resource
//
// A node expires a key by its own wall clock, as Redis does (expiry is an
// absolute Unix time in ms): a wall-clock step forward on a node ends the
// keys it holds early — Kleppmann's clock-jump case. Nodes keep keys in
// memory only (Redis without fsync-always AOF): a crashed node forgets them.
//
// The value is random, not monotonic: a store cannot order two holders'
// values, so the design runs against a store that does not fence
// (DesignInfo.UnfencedStore), and a GC pause past the validity lets a stale
// holder's write land after the next holder's — Kleppmann's pause case.

// RedlockSet asks a node to SET Resource to Value if absent (NX), expiring
// TTL from now on the node's wall clock (PX).
type RedlockSet struct {
	Resource string
	Value    uint64
	TTL      time.Duration
	Attempt  uint64 // the client's attempt id, echoed in the reply
}

// RedlockExtend asks a node to restart Resource's expiry at TTL if it still
// holds Value.
type RedlockExtend struct {
	Resource string
	Value    uint64
	TTL      time.Duration
	Attempt  uint64
}

// RedlockDel asks a node to delete Resource if it holds Value.
type RedlockDel struct {
	Resource string
	Value    uint64
	Attempt  uint64
}

// RedlockReply answers a node request: OK, or the value holding the key
// instead (0: none).
type RedlockReply struct {
	Attempt uint64
	OK      bool
	Holder  uint64
}

func (m RedlockSet) Fingerprint() uint64 {
	return fold(40, process.HashString(m.Resource), m.Value, uint64(m.TTL), m.Attempt)
}
func (m RedlockExtend) Fingerprint() uint64 {
	return fold(41, process.HashString(m.Resource), m.Value, uint64(m.TTL), m.Attempt)
}
func (m RedlockDel) Fingerprint() uint64 {
	return fold(42, process.HashString(m.Resource), m.Value, m.Attempt, 0)
}
func (m RedlockReply) Fingerprint() uint64 {
	var ok uint64
	if m.OK {
		ok = 1
	}
	return fold(43, m.Attempt, ok, m.Holder, 0)
}

// redlockKey is one key of a node: its value and its expiry instant on the
// node's wall clock.
type redlockKey struct {
	value   uint64
	expires time.Time
}

// RedlockNode is one independent Redlock node: resource → (value, expiry),
// in memory, expired lazily by the node's wall clock when a request touches
// the key (what a client sees is the same as with Redis's active expiry).
type RedlockNode struct {
	limits lockservice.Limits
	keys   map[string]redlockKey
}

// NewRedlockNode returns a node process; every restart needs a new one
// (and finds no keys: they were never on disk).
func NewRedlockNode(limits lockservice.Limits) *RedlockNode {
	return &RedlockNode{limits: limits, keys: map[string]redlockKey{}}
}

// Start does nothing: the node keeps nothing on disk.
func (n *RedlockNode) Start(env process.Env) {
	env.Log().Info("redlock.start")
}

// get returns the live value of resource, dropping it if it has expired
// by the node's wall clock.
func (n *RedlockNode) get(env process.Env, resource string) (redlockKey, bool) {
	k, ok := n.keys[resource]
	if ok && !env.Clock().Now().Before(k.expires) {
		delete(n.keys, resource)
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "redlock.expired", slog.String("resource", resource), slog.Uint64("value", k.value))
		return redlockKey{}, false
	}
	return k, ok
}

// Receive serves SET NX PX, extend and delete.
func (n *RedlockNode) Receive(env process.Env, from process.NodeID, msg process.Message) {
	switch m := msg.(type) {
	case RedlockSet:
		rep := RedlockReply{Attempt: m.Attempt}
		if n.valid(m.Resource, m.Value, m.TTL) {
			if k, held := n.get(env, m.Resource); held {
				rep.Holder = k.value
			} else {
				n.keys[m.Resource] = redlockKey{value: m.Value, expires: env.Clock().Now().Add(m.TTL)}
				rep.OK = true
			}
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "redlock.set", slog.String("resource", m.Resource), slog.Uint64("value", m.Value), slog.Bool("ok", rep.OK))
		env.Send(from, rep)
	case RedlockExtend:
		rep := RedlockReply{Attempt: m.Attempt}
		if n.valid(m.Resource, m.Value, m.TTL) {
			k, held := n.get(env, m.Resource)
			switch {
			case held && k.value == m.Value:
				n.keys[m.Resource] = redlockKey{value: m.Value, expires: env.Clock().Now().Add(m.TTL)}
				rep.OK = true
			case held:
				rep.Holder = k.value
			}
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "redlock.extend", slog.String("resource", m.Resource), slog.Uint64("value", m.Value), slog.Bool("ok", rep.OK))
		env.Send(from, rep)
	case RedlockDel:
		rep := RedlockReply{Attempt: m.Attempt}
		if n.valid(m.Resource, m.Value, time.Second) {
			k, held := n.get(env, m.Resource)
			switch {
			case held && k.value == m.Value:
				delete(n.keys, m.Resource)
				rep.OK = true
			case held:
				rep.Holder = k.value
			}
		}
		env.Log().LogAttrs(context.Background(), slog.LevelInfo, "redlock.del", slog.String("resource", m.Resource), slog.Uint64("value", m.Value), slog.Bool("ok", rep.OK))
		env.Send(from, rep)
	default:
		env.Log().Warn("redlock.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// valid rejects what no client of this package sends: empty or oversized
// names, value 0, a non-positive TTL.
func (n *RedlockNode) valid(resource string, value uint64, ttl time.Duration) bool {
	return n.limits.CheckNames(resource, "redlock") == nil && value != 0 && ttl > 0
}

// RedlockDesign is the Redlock contrast design: Nodes(replicas) independent
// nodes n1…nN (N odd, 1 to 9; Redlock's usual N is 5) and clients running
// RedlockProtocol. There is no service that decides, so a grant in the
// checker's records is the client's belief that a majority agreed: it
// starts when the client's acquire returns granted and ends when the client
// stops believing (release, watchdog, refused renewal, restart). Its token
// is the random value, renamed in the records to its rank in grant order
// (DesignInfo.UnorderedTokens).
type RedlockDesign struct{ shape.Redlock }

// Name is the design's name in scenarios.
const Name = shape.DesignRedlock

// NewServer returns a Redlock node.
func (RedlockDesign) NewServer(_ int, run lockservice.DesignRun) process.Process {
	return NewRedlockNode(run.Limits)
}

// ClientProtocol is RedlockProtocol: the harness's lock client acquires
// through it.
func (RedlockDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return NewRedlockProtocol(RedlockConfig{})
}

// fold folds a message's fields into its fingerprint, as the lock
// protocol's messages do.
func fold(kind, a, b, c, d uint64) uint64 {
	return process.Mix(process.Mix(process.Mix(process.Mix(kind, a), b), c), d)
}
