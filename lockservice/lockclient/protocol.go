package lockclient

import (
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// protocolHost is the Lock's side of a Protocol (lockservice.ProtocolHost).
type protocolHost struct {
	l   *Lock
	env process.Env
	// replies[next:] wait for the Lock, oldest first: each Reply arms a
	// timer with deliverFn, bound once, and the timers fire in the order
	// they were armed (each at the instant of its Reply, ties broken by
	// arming order), so each delivers the oldest reply still waiting.
	replies   []lockservice.LockReply
	next      int
	deliverFn func()
}

func (h *protocolHost) Env() process.Env                 { return h.env }
func (h *protocolHost) Config() lockservice.ClientConfig { return h.l.cfg }

// Reply queues r for the Lock, delivered in an event of its own.
func (h *protocolHost) Reply(r lockservice.LockReply) {
	h.replies = append(h.replies, r)
	h.env.Clock().AfterFunc(0, h.deliverFn)
}

// deliver hands the oldest waiting reply to the Lock.
func (h *protocolHost) deliver() {
	r := h.replies[h.next]
	h.replies[h.next] = lockservice.LockReply{}
	if h.next++; h.next == len(h.replies) {
		h.replies, h.next = h.replies[:0], 0
	}
	h.l.onReply(r)
}

// Observe records a protocol's own event, with the client's names.
func (h *protocolHost) Observe(e lockservice.Event) {
	if e.Client == "" {
		e.Client = h.l.cfg.Name
	}
	if e.Resource == "" {
		e.Resource = h.l.cfg.Resource
	}
	h.l.cfg.Observer.Observe(e)
}
