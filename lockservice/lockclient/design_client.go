package lockclient

import (
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// Protocol is the client side of a lock design whose service does not speak
// the reference's messages. The harness's Client keeps running the
// workload — acquire, fenced writes, read, release, the renewer and the
// watchdog, and every client event the checker needs — and sends its lock
// requests (AcquireRequest, RenewRequest, ReleaseRequest) as it would to a
// reference server; ProtocolClient hands them to the Protocol instead, which
// speaks the design's own messages to the design's nodes and answers each
// with a LockReply:
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
	// NewClient, so it keeps nothing but what is on the disk).
	Start(h *ProtocolHost)
	// Request gets a lock request the workload would have sent to `to`.
	Request(to process.NodeID, req process.Message)
	// Receive gets every message that reaches the client first; it reports
	// whether the message was the protocol's. Messages it declines (the
	// store's replies) go to the workload.
	Receive(from process.NodeID, msg process.Message) bool
	// Observe sees each event the workload reports, just before the harness
	// records it; events the protocol reports from here through
	// ProtocolHost.Observe are recorded first, at the same instant.
	Observe(e lockservice.Event)
}

// ProtocolHost is what a Protocol works with.
type ProtocolHost struct {
	// Env is the client node's environment: clock, Send, disk, random
	// stream, logger.
	Env process.Env
	// Config is the workload's configuration (Servers are the design's
	// nodes).
	Config lockservice.ClientConfig

	client *Client
	wenv   protocolEnv
	// replies[next:] wait for the workload, oldest first: each Reply arms
	// a timer with deliverFn, bound once, and the timers fire in the order
	// they were armed (each at the instant of its Reply, ties broken by
	// arming order), so each delivers the oldest reply still waiting.
	replies   []lockservice.LockReply
	next      int
	deliverFn func()
}

// Reply answers the workload's pending lock request. The answer reaches the
// workload in an event of its own at the current instant, never inside the
// call that sent the request.
func (h *ProtocolHost) Reply(r lockservice.LockReply) {
	h.replies = append(h.replies, r)
	h.Env.Clock().AfterFunc(0, h.deliverFn)
}

// deliver hands the oldest waiting reply to the workload.
func (h *ProtocolHost) deliver() {
	r := h.replies[h.next]
	h.replies[h.next] = lockservice.LockReply{}
	if h.next++; h.next == len(h.replies) {
		h.replies, h.next = h.replies[:0], 0
	}
	h.client.Receive(h.wenv, h.Env.ID(), r)
}

// Observe reports an event of the protocol's own to the run's observer
// (with Client and Resource filled in from the workload if empty): for
// designs without a service that decides (DesignInfo.ClientGrants), the
// grants and their ends.
func (h *ProtocolHost) Observe(e lockservice.Event) {
	if e.Client == "" {
		e.Client = h.Config.Name
	}
	if e.Resource == "" {
		e.Resource = h.Config.Resource
	}
	h.Config.Observer.Observe(e)
}

// ProtocolClient is a client process: the harness's Client running the
// workload, with its lock requests translated by a Protocol.
type ProtocolClient struct {
	proto Protocol
	host  ProtocolHost
}

// NewProtocolClient returns a client process running cfg's workload over p.
// Every restart needs a new one (and a new Protocol).
func NewProtocolClient(cfg lockservice.ClientConfig, p Protocol) *ProtocolClient {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	pc := &ProtocolClient{proto: p, host: ProtocolHost{Config: cfg}}
	pc.host.deliverFn = pc.host.deliver
	inner := cfg
	inner.Observer = protocolTap{pc}
	pc.host.client = NewClient(inner)
	return pc
}

// Start starts the protocol, then the workload.
func (pc *ProtocolClient) Start(env process.Env) {
	pc.host.Env = env
	pc.host.wenv = protocolEnv{Env: env, pc: pc}
	pc.proto.Start(&pc.host)
	pc.host.client.Start(pc.host.wenv)
}

// Receive offers msg to the protocol, then to the workload.
func (pc *ProtocolClient) Receive(_ process.Env, from process.NodeID, msg process.Message) {
	if pc.proto.Receive(from, msg) {
		return
	}
	pc.host.client.Receive(pc.host.wenv, from, msg)
}

// Done reports whether the workload finished.
func (pc *ProtocolClient) Done() bool { return pc.host.client.Done() }

// protocolEnv is the workload's view of the node: lock requests go to the
// protocol, everything else to the network.
type protocolEnv struct {
	process.Env
	pc *ProtocolClient
}

func (e protocolEnv) Send(to process.NodeID, msg process.Message) {
	switch msg.(type) {
	case lockservice.AcquireRequest, lockservice.RenewRequest, lockservice.ReleaseRequest:
		e.pc.proto.Request(to, msg)
	default:
		e.Env.Send(to, msg)
	}
}

// protocolTap shows the workload's events to the protocol before the run's
// observer records them.
type protocolTap struct{ pc *ProtocolClient }

func (t protocolTap) Observe(e lockservice.Event) {
	t.pc.proto.Observe(e)
	t.pc.host.Config.Observer.Observe(e)
}
