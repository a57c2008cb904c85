// Package ownlock is a small lock design plugged into fencesim's harness:
// copy it, replace the server and the protocol with your own lock's, and
// run the harness's scenarios against it (see README, "Testing your own
// lock").
//
// The lock is one server, "lock", that grants each resource to one owner
// at a time for a lease (timed by the server's monotonic clock) and
// numbers every grant from a counter: the counter is the fencing token the
// clients send to the store. It speaks its own three messages (Lock,
// Unlock, Reply); Protocol translates the harness's lock client's requests
// (lockservice/lockclient) into them.
//
// What it leaves out, on purpose, so the harness has something to find:
// its state lives in memory only. A crash of the server forgets the
// counter and the leases, and the restarted server grants token 1 again
// while the old holder still believes it holds the lock — the test
// TestServerCrashIsCaught shows the checker catching it (S4–S7). A real
// design syncs its counter and leases to disk before it answers (see
// reference.Server in lockservice/reference).
package ownlock

import (
	"fmt"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// Design plugs the lock into the harness: register it with
// scenarios.RegisterDesign(ownlock.Design{}) and name it in a scenario
// ("design": "ownlock").
type Design struct{}

// Info names the design. Its tokens grow with every grant and the store
// fences with them, so every DesignInfo flag stays false.
func (Design) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: "ownlock", Description: "example: one in-memory lock server, counter tokens, its own protocol"}
}

// Nodes: one server; scenarios leave "replicas" out.
func (Design) Nodes(replicas int) ([]string, error) {
	if replicas != 0 {
		return nil, fmt.Errorf("the ownlock design has one server: leave replicas out")
	}
	return []string{"lock"}, nil
}

// NewServer returns the lock server, anew at every (re)start.
func (Design) NewServer(_ int, run lockservice.DesignRun) process.Process {
	return &Server{obs: run.Observer}
}

// ClientProtocol is how the harness's lock client speaks to this lock.
func (Design) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return &Protocol{}
}

// Lock asks for Resource on behalf of Owner for TTL; with Token it extends
// the owner's lease of that grant instead. ID pairs it with its Reply.
type Lock struct {
	Resource, Owner string
	TTL             time.Duration
	Token, ID       uint64
}

// Unlock frees Resource if Owner holds it with Token.
type Unlock struct {
	Resource, Owner string
	Token, ID       uint64
}

// Reply answers a Lock or an Unlock.
type Reply struct {
	ID    uint64
	OK    bool
	Token uint64
	TTL   time.Duration
}

// Fingerprints fold each message into the run's trace hash.
func (m Lock) Fingerprint() uint64 {
	return process.Mix(process.Mix(process.Mix(process.HashString(m.Resource), process.HashString(m.Owner)), uint64(m.TTL)^m.Token), m.ID)
}
func (m Unlock) Fingerprint() uint64 {
	return process.Mix(process.Mix(process.Mix(process.HashString(m.Resource)+1, process.HashString(m.Owner)), m.Token), m.ID)
}
func (m Reply) Fingerprint() uint64 {
	ok := uint64(0)
	if m.OK {
		ok = 1
	}
	return process.Mix(process.Mix(process.Mix(m.ID, ok), m.Token), uint64(m.TTL))
}

// Server is the lock server process.
type Server struct {
	obs    lockservice.Observer
	last   uint64 // the last token issued
	leases map[string]lease
}

type lease struct {
	owner    string
	token    uint64
	deadline time.Duration // on the server's monotonic clock
}

// Start begins with nothing (see the package comment: that is the bug).
func (s *Server) Start(process.Env) { s.leases = map[string]lease{} }

// Receive serves Lock and Unlock, reporting to the harness every grant,
// renewal and end the server decides (the checker judges these).
func (s *Server) Receive(env process.Env, from process.NodeID, msg process.Message) {
	now := env.Clock().Monotonic()
	switch m := msg.(type) {
	case Lock:
		s.expire(m.Resource, now)
		l, held := s.leases[m.Resource]
		rep := Reply{ID: m.ID}
		switch {
		case !held && m.Token == 0: // a new grant, a new token
			s.last++
			l = lease{owner: m.Owner, token: s.last}
			s.obs.Observe(lockservice.Event{Kind: lockservice.EvGranted, Resource: m.Resource, Client: m.Owner, Token: l.token})
		case held && l.owner == m.Owner && (m.Token == 0 || m.Token == l.token): // the holder again: extend
			if m.Token != 0 {
				s.obs.Observe(lockservice.Event{Kind: lockservice.EvRenewed, Resource: m.Resource, Client: m.Owner, Token: l.token, Request: m.ID})
			}
		default:
			env.Send(from, rep) // someone else holds it, or the grant is gone
			return
		}
		l.deadline = now + m.TTL
		s.leases[m.Resource] = l
		rep.OK, rep.Token, rep.TTL = true, l.token, m.TTL
		env.Send(from, rep)
	case Unlock:
		s.expire(m.Resource, now)
		rep := Reply{ID: m.ID}
		if l, held := s.leases[m.Resource]; held && l.owner == m.Owner && l.token == m.Token {
			delete(s.leases, m.Resource)
			s.obs.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: m.Resource, Client: m.Owner, Token: l.token, Reason: "released"})
			rep.OK = true
		}
		env.Send(from, rep)
	}
}

// expire ends resource's lease if its deadline has passed. Expiry is
// noticed when the resource is next asked for; the grant's end is
// recorded then, which is later than the deadline, never earlier.
func (s *Server) expire(resource string, now time.Duration) {
	if l, held := s.leases[resource]; held && now >= l.deadline {
		delete(s.leases, resource)
		s.obs.Observe(lockservice.Event{Kind: lockservice.EvEnded, Resource: resource, Client: l.owner, Token: l.token, Reason: "expired"})
	}
}

// Protocol is the client side: it turns the lock client's AcquireRequest,
// RenewRequest and ReleaseRequest into Lock and Unlock, and Replies into
// the LockReply the lock client expects.
type Protocol struct {
	h       lockservice.ProtocolHost
	pending uint64 // the request id awaiting a Reply (0: none)
	op      lockservice.Op
}

// Start keeps the host.
func (p *Protocol) Start(h lockservice.ProtocolHost) { p.h = h }

// Request sends the lock's own message. A retry (same request id, after
// the lock client's timeout) sends it again: the server answers the holder's
// repeated Lock with the same grant.
func (p *Protocol) Request(to process.NodeID, msg process.Message) {
	c := p.h.Config()
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		p.pending, p.op = m.Request, lockservice.OpAcquire
		p.h.Env().Send(to, Lock{Resource: m.Resource, Owner: m.Client, TTL: m.TTL, ID: m.Request})
	case lockservice.RenewRequest:
		p.pending, p.op = m.Request, lockservice.OpRenew
		p.h.Env().Send(to, Lock{Resource: m.Resource, Owner: m.Client, TTL: c.TTL, Token: m.Token, ID: m.Request})
	case lockservice.ReleaseRequest:
		p.pending, p.op = m.Request, lockservice.OpRelease
		p.h.Env().Send(to, Unlock{Resource: m.Resource, Owner: m.Client, Token: m.Token, ID: m.Request})
	}
}

// Receive answers the pending request from the server's Reply; replies to
// anything else are dropped. Other messages (the store's) are the
// workload's.
func (p *Protocol) Receive(_ process.NodeID, msg process.Message) bool {
	r, ok := msg.(Reply)
	if !ok {
		return false
	}
	if r.ID != p.pending {
		return true
	}
	p.pending = 0
	rep := lockservice.LockReply{Request: r.ID, Token: r.Token, TTL: r.TTL}
	switch {
	case p.op == lockservice.OpAcquire && r.OK:
		rep.Status = lockservice.Granted
	case p.op == lockservice.OpAcquire:
		rep.Status = lockservice.Busy
	case p.op == lockservice.OpRenew && r.OK:
		rep.Status = lockservice.Renewed
	case p.op == lockservice.OpRelease && r.OK:
		rep.Status = lockservice.Released
	default:
		rep.Status = lockservice.NotHolder
	}
	p.h.Reply(rep)
	return true
}

// Observe: the server reports the grants, so the protocol has nothing to
// add.
func (p *Protocol) Observe(lockservice.Event) {}
