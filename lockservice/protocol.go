package lockservice

import (
	"github.com/fencesim/fencesim/process"
)

// Protocol is the client side of a lock design whose service does not speak
// the reference's messages (Design.ClientProtocol). The harness's lock
// client keeps running the acquirer, the renewer, the watchdog and the
// release handler, and reports every client event the checker needs; it
// sends its lock requests (AcquireRequest, RenewRequest, ReleaseRequest)
// as it would to a reference server, but to the Protocol instead, which
// speaks the design's own messages to the design's nodes and answers each
// with a LockReply (ProtocolHost.Reply):
//
//   - Granted: the lock is held with Token (non-zero; the client sends it to
//     the store with every write) for TTL, measured from when the acquire
//     was first sent. The client's watchdog gives the lock up at that
//     start plus TTL·(1−ρ) minus its margin.
//   - Renewed: likewise from when the renewal was sent.
//   - Busy, Overloaded: not acquired; the client backs off and tries again
//     with a new request id. Busy tells the checker (S7) that someone else
//     held the lock; Overloaded that the outcome is unknown.
//   - NotHolder: the renewal or release found the lock not held with Token.
//   - Released: the lock is free.
//
// A request id repeats when the client retries after RequestTimeout
// without an answer; answer the request once. Everything runs on the
// client's node: the same clock, pauses, crashes, disk and random stream.
type Protocol interface {
	// Start runs when the client process starts: at boot and after every
	// restart (a restart builds a new Protocol through the design's
	// ClientProtocol, so it keeps nothing but what is on the disk).
	Start(h ProtocolHost)
	// Request gets a lock request the client would have sent to `to`.
	Request(to process.NodeID, req process.Message)
	// Receive gets every message that reaches the client first; it reports
	// whether the message was the protocol's. Messages it declines (the
	// store's replies) go to the client.
	Receive(from process.NodeID, msg process.Message) bool
	// Observe sees each event the lock client reports (acquire, renew and
	// release calls and returns, belief ends), just before the harness
	// records it; events the protocol reports from here through
	// ProtocolHost.Observe are recorded first, at the same instant.
	Observe(e Event)
}

// ProtocolHost is what a Protocol works with: the lock client's side of
// the node.
type ProtocolHost interface {
	// Env is the client node's environment: clock, Send, disk, random
	// stream, logger.
	Env() process.Env
	// Config is the client's configuration (Servers are the design's
	// nodes).
	Config() ClientConfig
	// Reply answers the client's pending lock request. The answer reaches
	// the client in an event of its own at the current instant, never
	// inside the call that sent the request.
	Reply(r LockReply)
	// Observe reports an event of the protocol's own to the run's observer
	// (with Client and Resource filled in from the client if empty): for
	// designs without a service that decides (DesignInfo.ClientGrants),
	// the grants and their ends.
	Observe(e Event)
}
