package redlock

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// RedlockConfig tunes the Redlock client.
type RedlockConfig struct {
	// Wait bounds one round of requests to the nodes: the round is decided
	// when every node has answered, when the outcome can no longer change,
	// or after Wait (Redlock's per-node timeout, small against the TTL).
	// 0: half the lock client's RequestTimeout, so the round is decided before
	// the lock client would retry.
	Wait time.Duration
	// ExtraDrift is added to the drift allowance TTL·ρ (ρ the workload's
	// DriftBoundPPM); 0: 2 ms, Redis's expiry precision, as in the
	// Redlock reference implementation.
	ExtraDrift time.Duration
}

// RedlockProtocol is the Redlock client algorithm, as a Protocol under the
// harness's lock client:
//
//   - acquire: draw a random value (non-zero, tagged with the client: see
//     redlockRandomBits) from the client's stream and SET it NX PX ttl on
//     all N nodes at once, measuring from the send on the client's
//     monotonic clock. With a majority (N/2+1) of OKs and validity
//     = TTL − elapsed − drift > 0 (drift = TTL·ρ + ExtraDrift) the lock is
//     granted with the value as its token and TTL − drift as its lease
//     from the send; else every node is asked to delete the value
//     (release on failure). The acquire is answered Busy if a majority of
//     the nodes named one and the same value of another client — an
//     attempt that reached a majority, so another client holds the lock or
//     may (its outcome unknown) — and Overloaded (unknown) otherwise: a
//     split between concurrent attempts, keys left by attempts that failed
//     or by holders that gave up, unreachable nodes. The lock client retries
//     after a random backoff with a new value.
//   - renew: extend the value's expiry on all nodes; Renewed with a
//     majority within validity, NotHolder if a majority refused,
//     Overloaded (the lease stands as it was) otherwise.
//   - release: delete the value on all nodes; Released with a majority,
//     NotHolder if a majority refused, Overloaded otherwise.
//
// There is no service that decides, so the protocol reports the grants the
// checker judges (DesignInfo.ClientGrants): EvGranted when the lock client's
// acquire returns granted, EvRenewed when a renewal succeeds while the grant
// stands, EvEnded when the lock client stops believing it holds the lock
// ("released" when it releases, "expired" otherwise).
type RedlockProtocol struct {
	cfg  RedlockConfig
	h    lockservice.ProtocolHost
	env  process.Env
	c    lockservice.ClientConfig // h.Config(), kept at Start
	next uint64                   // attempt ids
	op   *redlockRound
	// held is the value of the grant the lock client believes it holds (0:
	// none), reported to the checker.
	held uint64
	// waiting is the round whose Wait timer was armed last, and waitFn,
	// bound once, decides it: every earlier round's timer was stopped when
	// the round was decided or superseded.
	waiting *redlockRound
	waitFn  func()
}

// A value is the client's tag (24 bits of a hash of its name) above 40
// random bits, as lock values that name their owner do (Redisson's
// "uuid:thread"): a key left on a node by one of the client's own earlier
// attempts, even from before a crash, is not another client's lock. It
// stays random per attempt: nothing orders two values.
const redlockRandomBits = 40

func (p *RedlockProtocol) tag() uint64 {
	return process.HashString(p.c.Name) >> redlockRandomBits
}

func (p *RedlockProtocol) mine(v uint64) bool { return v>>redlockRandomBits == p.tag() }

// redlockRound is one round of requests to every node.
type redlockRound struct {
	kind    lockservice.Op // OpAcquire, OpRenew or OpRelease
	req     uint64         // the lock client's request id
	attempt uint64         // on the wire
	value   uint64
	ttl     time.Duration
	start   time.Duration // monotonic, at the send
	replied []bool
	// ok: the node holds (or deleted) our value; refused: it answered no.
	ok, refused int
	// holders counts the refusals by the value they named, for values
	// of other clients.
	holders []valueCount
	timer   clockwork.Timer
}

type valueCount struct {
	value uint64
	n     int
}

// NewRedlockProtocol returns the client side of Redlock; every client
// (re)start needs a new one.
func NewRedlockProtocol(cfg RedlockConfig) *RedlockProtocol {
	p := &RedlockProtocol{cfg: cfg}
	p.waitFn = p.waitOver
	return p
}

// waitOver ends the round whose Wait ran out.
func (p *RedlockProtocol) waitOver() { p.decide(p.waiting) }

// Start keeps the host.
func (p *RedlockProtocol) Start(h lockservice.ProtocolHost) {
	p.h, p.env, p.c = h, h.Env(), h.Config()
	if p.cfg.Wait <= 0 {
		p.cfg.Wait = max(p.c.RequestTimeout/2, time.Millisecond)
	}
	if p.cfg.ExtraDrift <= 0 {
		p.cfg.ExtraDrift = 2 * time.Millisecond
	}
}

func (p *RedlockProtocol) nodes() []process.NodeID { return p.c.Servers }
func (p *RedlockProtocol) quorum() int             { return len(p.nodes())/2 + 1 }
func (p *RedlockProtocol) now() time.Duration      { return p.env.Clock().Monotonic() }

// drift is the allowance for clock drift between the client and the nodes.
func (p *RedlockProtocol) drift(ttl time.Duration) time.Duration {
	return time.Duration(int64(ttl)/1_000_000*p.c.DriftBoundPPM) + p.cfg.ExtraDrift
}

// Request starts a round for a new request; a retry of the request in
// progress is ignored (the round answers it once).
func (p *RedlockProtocol) Request(_ process.NodeID, msg process.Message) {
	var r redlockRound
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		r = redlockRound{kind: lockservice.OpAcquire, req: m.Request, ttl: m.TTL}
	case lockservice.RenewRequest:
		r = redlockRound{kind: lockservice.OpRenew, req: m.Request, value: m.Token, ttl: p.c.TTL}
	case lockservice.ReleaseRequest:
		r = redlockRound{kind: lockservice.OpRelease, req: m.Request, value: m.Token}
	default:
		return
	}
	if p.op != nil && p.op.req == r.req {
		return // a retry of the round in flight, or of one answered
	}
	if p.op != nil && p.op.timer != nil {
		p.op.timer.Stop() // superseded: the lock client moved on
	}
	if r.kind == lockservice.OpAcquire {
		r.value = p.randomValue() // a new value for every attempt
	}
	p.next++
	r.attempt = p.next
	r.start = p.now()
	r.replied = make([]bool, len(p.nodes()))
	p.op = &r
	for _, n := range p.nodes() {
		switch r.kind {
		case lockservice.OpAcquire:
			p.env.Send(n, RedlockSet{Resource: p.c.Resource, Value: r.value, TTL: r.ttl, Attempt: r.attempt})
		case lockservice.OpRenew:
			p.env.Send(n, RedlockExtend{Resource: p.c.Resource, Value: r.value, TTL: r.ttl, Attempt: r.attempt})
		case lockservice.OpRelease:
			p.env.Send(n, RedlockDel{Resource: p.c.Resource, Value: r.value, Attempt: r.attempt})
		}
	}
	if p.logging() {
		p.log("redlock."+r.kind.String()+".sent", &r)
	}
	p.waiting = &r
	p.op.timer = p.env.Clock().AfterFunc(p.cfg.Wait, p.waitFn)
}

// randomValue draws a non-zero value, tagged with the client, from the
// client's seeded stream.
func (p *RedlockProtocol) randomValue() uint64 {
	for {
		if v := p.tag()<<redlockRandomBits | p.env.Rand().Uint64()>>(64-redlockRandomBits); v != 0 {
			return v
		}
	}
}

// Receive counts the nodes' answers to the round in flight; answers to
// older rounds (and duplicates) are dropped.
func (p *RedlockProtocol) Receive(from process.NodeID, msg process.Message) bool {
	m, ok := msg.(RedlockReply)
	if !ok {
		return false
	}
	r := p.op
	if r == nil || m.Attempt != r.attempt {
		return true
	}
	i := -1
	for j, n := range p.nodes() {
		if n == from {
			i = j
		}
	}
	if i < 0 || r.replied[i] {
		return true
	}
	r.replied[i] = true
	switch {
	case m.OK || r.kind == lockservice.OpAcquire && m.Holder == r.value:
		r.ok++
	default:
		r.refused++
		if m.Holder != 0 && !p.mine(m.Holder) {
			i := slices.IndexFunc(r.holders, func(c valueCount) bool { return c.value == m.Holder })
			if i < 0 {
				i = len(r.holders)
				r.holders = append(r.holders, valueCount{value: m.Holder})
			}
			r.holders[i].n++
		}
	}
	n, q := len(p.nodes()), p.quorum()
	if r.ok >= q || r.refused > n-q || r.ok+r.refused == n {
		p.decide(r)
	}
	return true
}

// decide ends round r with what it has.
func (p *RedlockProtocol) decide(r *redlockRound) {
	if p.op != r {
		return
	}
	r.timer.Stop()
	p.op = &redlockRound{req: r.req} // answered: a late retry of it is ignored
	q := p.quorum()
	elapsed := p.now() - r.start
	validity := r.ttl - elapsed - p.drift(r.ttl)
	rep := lockservice.LockReply{Request: r.req}
	switch r.kind {
	case lockservice.OpAcquire:
		switch {
		case r.ok >= q && validity > 0:
			rep.Status, rep.Token, rep.TTL = lockservice.Granted, r.value, r.ttl-p.drift(r.ttl)
		default:
			// Release on failure: the nodes that took the value must not
			// keep it until it expires.
			for _, n := range p.nodes() {
				p.env.Send(n, RedlockDel{Resource: p.c.Resource, Value: r.value, Attempt: r.attempt})
			}
			rep.Status = lockservice.Overloaded
			if slices.ContainsFunc(r.holders, func(c valueCount) bool { return c.n >= q }) {
				rep.Status = lockservice.Busy
			}
		}
	case lockservice.OpRenew:
		switch {
		case r.ok >= q && validity > 0:
			rep.Status, rep.Token, rep.TTL = lockservice.Renewed, r.value, r.ttl-p.drift(r.ttl)
			if p.held == r.value {
				p.h.Observe(lockservice.Event{Kind: lockservice.EvRenewed, Token: r.value, Request: r.req})
			}
		case r.refused >= q:
			rep.Status = lockservice.NotHolder
		default:
			rep.Status = lockservice.Overloaded
		}
	case lockservice.OpRelease:
		switch {
		case r.ok >= q:
			rep.Status = lockservice.Released
		case r.refused >= q:
			rep.Status = lockservice.NotHolder
		default:
			rep.Status = lockservice.Overloaded
		}
	}
	if p.logging() {
		p.log("redlock."+r.kind.String()+".decided", r, slog.String("status", rep.Status.String()),
			slog.Int("ok", r.ok), slog.Int("refused", r.refused), slog.Duration("validity", validity))
	}
	p.h.Reply(rep)
}

// Observe turns the workload's belief into the checker's grant records.
func (p *RedlockProtocol) Observe(e lockservice.Event) {
	switch {
	case e.Kind == lockservice.EvReturn && e.Op == lockservice.OpAcquire && e.Status == lockservice.Granted && p.held == 0:
		p.held = e.Token
		p.h.Observe(lockservice.Event{Kind: lockservice.EvGranted, Token: e.Token})
	case e.Kind == lockservice.EvBeliefEnd && e.Token == p.held && p.held != 0:
		reason := "expired"
		if e.Reason == "releasing" {
			reason = "released"
		}
		p.h.Observe(lockservice.Event{Kind: lockservice.EvEnded, Token: p.held, Reason: reason})
		p.held = 0
	}
}

// logging reports whether the logger takes records, so that nothing is
// built for one it would drop.
func (p *RedlockProtocol) logging() bool {
	return p.env.Log().Enabled(context.Background(), slog.LevelInfo)
}

func (p *RedlockProtocol) log(event string, r *redlockRound, attrs ...slog.Attr) {
	p.env.Log().LogAttrs(context.Background(), slog.LevelInfo, event, append([]slog.Attr{
		slog.String("client", p.c.Name), slog.Uint64("req", r.req), slog.Uint64("attempt", r.attempt),
		slog.Uint64("value", r.value), slog.String("resource", p.c.Resource)}, attrs...)...)
}
