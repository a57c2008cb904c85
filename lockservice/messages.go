package lockservice

import (
	"time"

	"github.com/fencesim/fencesim/process"
)

// Status is the lock service's answer to a request.
type Status uint8

const (
	// Granted: the lock is yours with the reply's token and TTL.
	Granted Status = iota + 1
	// Busy: another client holds the lock; try again later with a new request id.
	Busy
	// Renewed: the lease restarts its full TTL from the server's receipt.
	Renewed
	// Released: the lock is free.
	Released
	// NotHolder: the token is not the current grant (expired, released or
	// never yours); renew and release do nothing.
	NotHolder
	// Invalid: the request failed validation; Err says why.
	Invalid
	// Overloaded: the server shed the request at its ingress; back off.
	Overloaded
	// NotLeader: this replica cannot serve the request; Leader names the
	// leader it knows (or NoLeader), and the client retries there with the
	// same request id.
	NotLeader
	// Stale: the request is older than requests the client has made since
	// and has fallen out of the dedup window; the client gave up on it long
	// ago, so it is not applied (a late copy must not grant a lock nobody
	// waits for).
	Stale
)

// NoLeader is the Leader hint of a replica that knows no leader.
const NoLeader process.NodeID = -1

var statusNames = [...]string{Granted: "granted", Busy: "busy", Renewed: "renewed", Released: "released",
	NotHolder: "not-holder", Invalid: "invalid", Overloaded: "overloaded", NotLeader: "not-leader", Stale: "stale"}

func (s Status) String() string {
	if int(s) < len(statusNames) && statusNames[s] != "" {
		return statusNames[s]
	}
	return "status?"
}

// AcquireRequest asks for resource on behalf of client for ttl. Request is
// the client's id for this attempt: a retry reuses it, so the server applies
// the attempt at most once.
//
// Wait bounds how long the client is willing to wait for a held lock (0:
// answer at once, Busy if held). A service with a wait queue (the
// replicated reference) parks a waiting acquire at the leader while another
// client holds the resource and grants it, first come first served, when
// the lease ends; once Wait has passed it answers as without waiting. A
// service without one answers at once: Wait is an upper bound, never a
// promise to wait. The client's request timeout must cover Wait.
type AcquireRequest struct {
	Resource string
	Client   string
	TTL      time.Duration
	Request  uint64
	// Key, if set, is the client's own name for the attempt when Request
	// is not its own: the HTTP API's request_id, which the front end
	// (nodesvc) submits under a fresh Request number per HTTP call. The
	// server then applies the attempt at most once per (Client, Key),
	// whichever Request carries it, and a holder's acquire under another
	// Key is a second acquire (Busy). The simulator's clients leave it
	// empty (their Request is their own).
	Key string
	// Wait, if positive, lets the leader park the acquire while another
	// client holds the resource, up to Wait (the wait queue).
	Wait time.Duration
}

// RenewRequest restarts the lease of the grant with Token, for TTL.
type RenewRequest struct {
	Resource string
	Client   string
	Token    uint64
	Request  uint64
	// TTL is the lease's new length from the server's receipt; 0 keeps
	// the length it has (the simulator's clients renew for the TTL they
	// acquired with and send 0; the HTTP API's renew names its ttl_ms).
	TTL time.Duration
}

// ReleaseRequest frees the lock if Token is still the current grant and
// Client its holder.
type ReleaseRequest struct {
	Resource string
	Client   string
	Token    uint64
	Request  uint64
	// RequestID is the caller's own id of this release (the HTTP API's
	// request_id), kept with the release by a service that replicates it,
	// so that a retry of a release that took effect — its answer lost to
	// a change of leader — is recognised on any replica and answered
	// released rather than not-holder. Empty in the simulator.
	RequestID string
}

// LockReply answers an acquire, renew or release.
type LockReply struct {
	Request uint64
	Status  Status
	// Token is the grant's fencing token (Granted, Renewed), or, on a
	// Busy answer, the asker's own token when the lock is held by the
	// asker itself under another attempt (a lease it gave up without
	// releasing; the lock client reports that answer as one of unknown
	// outcome, since the fenced-mutex model grants a holder's fresh
	// attempt its own lease).
	Token  uint64
	TTL    time.Duration  // Granted, Renewed: the lease length from the server's receipt
	Err    string         // Invalid: what to fix
	Leader process.NodeID // NotLeader: where to retry, or NoLeader
	// Waited (Granted, optional): how long, on the server's clock, the
	// acquire waited in the server's queue after it arrived before the
	// grant was proposed. The lease began no sooner than that after the
	// request reached the server, so the client counts its lease from its
	// send plus Waited (less its drift bound), not from its send alone.
	// 0: unknown or no wait.
	Waited time.Duration `json:",omitempty"` // absent when 0: a snapshot keeps its bytes
}

// WriteRequest asks the fenced store to set Resource to Value, fenced by Token.
type WriteRequest struct {
	Resource string
	Client   string
	Token    uint64
	Value    int64
	Request  uint64
}

// WriteReply says whether the store accepted a write. Highest is the
// highest token the store had accepted for the resource after the decision.
type WriteReply struct {
	Request  uint64
	Accepted bool
	Highest  uint64
	Err      string // the request failed validation
}

// ReadRequest asks the store for a resource's current value.
type ReadRequest struct {
	Resource string
	Client   string
	Request  uint64
}

// ReadReply carries a resource's value and the token of the write that set
// it (0: never written).
type ReadReply struct {
	Request uint64
	Value   int64
	Token   uint64
	Err     string
}

// Fingerprints fold each message's fields into the trace hash.

func (m AcquireRequest) Fingerprint() uint64 {
	// Wait is folded so that 0 leaves the fingerprint as it was before
	// acquires could wait.
	h := fold(1, process.HashString(m.Resource), process.HashString(m.Client), uint64(m.TTL)^uint64(m.Wait)<<17, m.Request)
	if m.Key != "" { // an unkeyed request hashes as before the field existed
		h = process.Mix(h, process.HashString(m.Key))
	}
	return h
}
func (m RenewRequest) Fingerprint() uint64 {
	req := m.Request
	if m.TTL != 0 { // a renewal that keeps its TTL hashes as before the field existed
		req = process.Mix(req, uint64(m.TTL))
	}
	return fold(2, process.HashString(m.Resource), process.HashString(m.Client), m.Token, req)
}
func (m ReleaseRequest) Fingerprint() uint64 {
	req := m.Request
	if m.RequestID != "" { // without one, a release hashes as before the field existed
		req = process.Mix(req, process.HashString(m.RequestID))
	}
	return fold(3, process.HashString(m.Resource), process.HashString(m.Client), m.Token, req)
}
func (m LockReply) Fingerprint() uint64 {
	return fold(4, m.Request, uint64(m.Status)<<32|uint64(uint32(m.Leader)), m.Token, uint64(m.TTL)^uint64(m.Waited)<<21)
}
func (m WriteRequest) Fingerprint() uint64 {
	return fold(5, process.HashString(m.Resource), process.HashString(m.Client), m.Token, uint64(m.Value)^m.Request<<32)
}
func (m WriteReply) Fingerprint() uint64 {
	var a uint64
	if m.Accepted {
		a = 1
	}
	return fold(6, m.Request, a, m.Highest, 0)
}
func (m ReadRequest) Fingerprint() uint64 {
	return fold(7, process.HashString(m.Resource), process.HashString(m.Client), m.Request, 0)
}
func (m ReadReply) Fingerprint() uint64 {
	return fold(8, m.Request, uint64(m.Value), m.Token, 0)
}

func fold(kind, a, b, c, d uint64) uint64 {
	return process.Mix(process.Mix(process.Mix(process.Mix(kind, a), b), c), d)
}
