// Package lockdsim is seed 000's lock design, lockd, in the simulator: N
// stateless lockd instances and one Redis-like process, on the simulated
// clock, under the simulator's faults. The instances send lockd/scripts'
// Lua scripts — the sources the real lockd sends to a real Redis — and the
// Redis process runs them in an embedded Lua interpreter
// (github.com/yuin/gopher-lua), so each atomic operation has one
// definition in both worlds — lockd's fair wait queue included: its
// sorted sets live in the simulated Redis, and a release's hand-over
// reaches the waiting instance by a publication, as in lockd. Pauses,
// crashes (the AOF synced always or every second) and partitions reach
// the instances and Redis alike.
package lockdsim

import (
	"github.com/fencesim/fencesim/lockd/scripts"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// Prefix starts the simulated lockd's keys, as lockd's default does.
const Prefix = "fencesim:"

// Watcher turns the Redis process's changes to lease keys into the events
// the checker judges: a lease set is a grant, its deadline moved a
// renewal, its deletion a release and its expiry an expiry. The Redis
// process knows nothing of locks; this is lockd's reading of its keys.
func Watcher(prefix string, obs lockservice.Observer) func(Change) {
	return func(c Change) {
		resource, ok := scripts.ResourceOf(prefix, c.Key)
		if !ok {
			return
		}
		l, ok := scripts.ParseLease(c.Value)
		if !ok {
			return
		}
		e := lockservice.Event{Resource: resource, Client: l.Client, Token: l.Token}
		switch c.Op {
		case "set":
			e.Kind = lockservice.EvGranted
		case "pexpire":
			e.Kind = lockservice.EvRenewed
		case "del":
			e.Kind, e.Reason = lockservice.EvEnded, "released"
		case "expired":
			e.Kind, e.Reason = lockservice.EvEnded, "expired"
		default:
			return
		}
		obs.Observe(e)
	}
}

// Protocol is the lock client's side of lockd: the reference's messages
// go to the instances as they are, except that a renewal names its TTL,
// as the shipped client's does (lockd keeps no lease length of its own).
type Protocol struct {
	h lockservice.ProtocolHost
}

// Start implements lockservice.Protocol.
func (p *Protocol) Start(h lockservice.ProtocolHost) { p.h = h }

// Request implements lockservice.Protocol.
func (p *Protocol) Request(to process.NodeID, req process.Message) {
	if r, ok := req.(lockservice.RenewRequest); ok && r.TTL == 0 {
		r.TTL = p.h.Config().TTL
		req = r
	}
	p.h.Env().Send(to, req)
}

// Receive implements lockservice.Protocol: the instances answer with
// LockReply, which the lock client takes itself.
func (p *Protocol) Receive(process.NodeID, process.Message) bool { return false }

// Observe implements lockservice.Protocol.
func (p *Protocol) Observe(lockservice.Event) {}
