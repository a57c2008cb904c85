package lockclient

import (
	"context"
	"encoding/binary"
	"log/slog"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/process"
)

// clientPhase is where the client is in a cycle.
type clientPhase uint8

const (
	phaseIdle clientPhase = iota
	phaseAcquiring
	phaseHolding
	phaseReleasing
	phaseDone
)

// Client is a lock client process: the acquirer, the lease renewer, the
// watchdog and the release handler of the client library, driving a
// workload against the fenced store. Each action emits one slog event with
// the client and request id as correlation id.
type Client struct {
	cfg lockservice.ClientConfig
	env process.Env

	incarnation uint64 // from disk: request ids stay unique across restarts
	nextReq     uint64
	target      int // index in Servers of the node requests go to
	phase       clientPhase
	cycle       int

	// acquirer
	acqReq      uint64
	acqStart    time.Duration // monotonic, for the watchdog
	acqStartReq uint64        // the request acqStart was taken for
	// the lease as the client believes it
	token    uint64
	deadline time.Duration // monotonic: the watchdog's limit
	// renewer
	renewReq     uint64
	renewStart   time.Duration
	renewPending bool // the last renewal got no answer yet
	// work
	writesDone int
	storeReq   uint64
	storeRead  bool
	// release handler
	relReq      uint64
	relAttempts int

	// timeout times lock-service requests (acquire, release); storeTimer the
	// outstanding store operation, so a late store reply never cancels a
	// lock request's retry.
	timeout, storeTimer, renewTimer, watchdog, workTimer clockwork.Timer

	// The timers' callbacks, bound once: a method value made at each
	// arming would be an allocation per timer.
	beginCycleFn, sendAcquireFn, retryAcquireFn, sendRenewFn, watchdogFiredFn,
	sendWriteFn, storeTimedOutFn, resendReleaseFn, releaseTimedOutFn func()
}

// NewClient returns a client process; every restart needs a new one.
func NewClient(cfg lockservice.ClientConfig) *Client {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	c := &Client{cfg: cfg}
	c.beginCycleFn, c.sendAcquireFn, c.retryAcquireFn = c.beginCycle, c.sendAcquire, c.retryAcquire
	c.sendRenewFn, c.watchdogFiredFn, c.sendWriteFn = c.sendRenew, c.watchdogFired, c.sendWrite
	c.storeTimedOutFn, c.resendReleaseFn, c.releaseTimedOutFn = c.storeTimedOut, c.resendRelease, c.releaseTimedOut
	return c
}

const incarnationKey = "incarnation"

// Start bumps the client's incarnation on disk (synced, so request ids
// never repeat after a crash) and schedules the first cycle.
func (c *Client) Start(env process.Env) {
	c.env = env
	rec := record.Slotted{Key: incarnationKey}
	if b, ok := rec.Load(env.Disk()); ok && len(b) == 8 {
		c.incarnation = binary.BigEndian.Uint64(b)
	}
	c.incarnation++
	rec.Store(env.Disk(), binary.BigEndian.AppendUint64(nil, c.incarnation))
	env.Disk().Sync()
	c.after(&c.workTimer, c.cfg.StartDelay, c.beginCycleFn)
}

// observe reports an event about this client's own operations.
func (c *Client) observe(e lockservice.Event) {
	e.Client, e.Resource = c.cfg.Name, c.cfg.Resource
	c.cfg.Observer.Observe(e)
}

// Done reports whether the client finished its workload.
func (c *Client) Done() bool { return c.phase == phaseDone }

func (c *Client) newRequest() uint64 {
	c.nextReq++
	return c.incarnation<<32 | c.nextReq
}

func (c *Client) now() time.Duration { return c.env.Clock().Monotonic() }

// log emits one event with the client, the request id and the resource. It
// builds nothing unless the logger takes the record: without a trace, logging
// costs one Enabled call.
func (c *Client) log(event string, req uint64, attrs ...slog.Attr) {
	l := c.env.Log()
	if !l.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, event, append([]slog.Attr{
		slog.String("client", c.cfg.Name), slog.Uint64("req", req), slog.String("resource", c.cfg.Resource)}, attrs...)...)
}

// logStatus is log for the event named prefix + st, which it spells out only
// if the record is taken.
func (c *Client) logStatus(prefix string, st lockservice.Status, req uint64, attrs ...slog.Attr) {
	if c.env.Log().Enabled(context.Background(), slog.LevelInfo) {
		c.log(prefix+st.String(), req, attrs...)
	}
}

// after (re)arms *t to run f after d on the client's monotonic clock. f is
// one of the callbacks bound in NewClient, so arming allocates only the
// timer: a new timer rather than a Reset of the old one, because a timer's
// creation order decides which of the clock's timers a drift change
// re-arms first.
func (c *Client) after(t *clockwork.Timer, d time.Duration, f func()) {
	if *t != nil {
		(*t).Stop()
	}
	*t = c.env.Clock().AfterFunc(d, f)
}

func stop(t clockwork.Timer) {
	if t != nil {
		t.Stop()
	}
}

func (c *Client) backoff() time.Duration {
	span := c.cfg.BackoffMax - c.cfg.BackoffMin
	if span <= 0 {
		return c.cfg.BackoffMin
	}
	return c.cfg.BackoffMin + time.Duration(c.env.Rand().Int64N(int64(span)+1))
}

// --- acquirer ---

func (c *Client) beginCycle() {
	if c.cfg.Cycles > 0 && c.cycle >= c.cfg.Cycles {
		c.phase = phaseDone
		c.log("client.done", 0)
		return
	}
	c.cycle++
	c.phase = phaseAcquiring
	c.acqReq = c.newRequest()
	c.sendAcquire()
}

func (c *Client) sendAcquire() {
	if c.acqStartReq != c.acqReq {
		// The lease is measured from the first send of this request id: a
		// retry is deduplicated, so the grant it is answered with may have
		// started when the first copy arrived.
		c.acqStart, c.acqStartReq = c.now(), c.acqReq
		c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpAcquire, Request: c.acqReq})
	}
	c.env.Send(c.server(), lockservice.AcquireRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, TTL: c.cfg.TTL, Request: c.acqReq})
	c.log("acquire.sent", c.acqReq, slog.Int("to", int(c.server())))
	c.after(&c.timeout, c.cfg.RequestTimeout, c.retryAcquireFn)
}

// retryAcquire resends the acquire elsewhere, with the same id: the last
// server did not answer in time.
func (c *Client) retryAcquire() {
	c.rotate()
	c.sendAcquire()
}

// server is the node lock requests go to now.
func (c *Client) server() process.NodeID { return c.cfg.Servers[c.target] }

// rotate moves to the next server: the current one did not answer.
func (c *Client) rotate() { c.target = (c.target + 1) % len(c.cfg.Servers) }

// redirect follows a NotLeader answer: to the leader it names, else to the
// next server. It reports whether the leader was named.
func (c *Client) redirect(m lockservice.LockReply) bool {
	if i := slices.Index(c.cfg.Servers, m.Leader); m.Leader != lockservice.NoLeader && i >= 0 {
		c.target = i
		return true
	}
	c.rotate()
	return false
}

// retryDelay is how long to wait before following a redirect: at once to
// a named leader, after a backoff while an election is on.
func (c *Client) retryDelay(named bool) time.Duration {
	if named {
		return 0
	}
	return c.backoff()
}

func (c *Client) onAcquireReply(m lockservice.LockReply) {
	stop(c.timeout)
	if m.Status != lockservice.NotLeader { // a redirect is not an answer: the call goes on
		c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpAcquire, Request: m.Request, Token: m.Token, Status: m.Status})
	}
	switch m.Status {
	case lockservice.Granted:
		c.token = m.Token
		c.extend(c.acqStart, m.TTL)
		c.phase = phaseHolding
		c.writesDone = 0
		c.log("acquire.granted", m.Request, slog.Uint64("token", m.Token))
		c.after(&c.renewTimer, c.cfg.TTL/3, c.sendRenewFn)
		c.beginWork()
	case lockservice.Busy, lockservice.Overloaded, lockservice.Stale:
		c.logStatus("acquire.", m.Status, m.Request)
		c.acqReq = c.newRequest() // a definitive answer: the next attempt is new
		c.after(&c.timeout, c.backoff(), c.sendAcquireFn)
	case lockservice.NotLeader:
		named := c.redirect(m)
		c.log("acquire.redirect", m.Request, slog.Int("leader", int(m.Leader)))
		c.after(&c.timeout, c.retryDelay(named), c.sendAcquireFn) // same id
	default:
		c.log("acquire.failed", m.Request, slog.String("status", m.Status.String()), slog.String("err", m.Err))
		c.stopAll()
		c.phase = phaseDone
	}
}

// --- watchdog ---

// extend moves the watchdog's deadline to start + ttl·(1−ρ) − margin,
// start being when the request that (re)granted the lease was sent: the
// server's lease began no earlier than that, and the client's clock may run
// up to ρ slower than the server's.
func (c *Client) extend(start, ttl time.Duration) {
	if c.cfg.Watchdog != nil {
		c.deadline = c.cfg.Watchdog(start, c.now(), ttl)
	} else {
		c.deadline = start + ttl - time.Duration(int64(ttl)/1_000_000*c.cfg.DriftBoundPPM) - c.cfg.Margin
	}
	c.after(&c.watchdog, c.deadline-c.now(), c.watchdogFiredFn)
}

// Holding reports whether the watchdog still allows using the lock.
func (c *Client) Holding() bool {
	return c.phase == phaseHolding && c.now() < c.deadline
}

func (c *Client) watchdogFired() {
	if c.phase != phaseHolding {
		return
	}
	c.log("watchdog.expired", 0, slog.Uint64("token", c.token))
	c.lose("watchdog")
}

// stopAll stops every timer: the client has given up its workload.
func (c *Client) stopAll() {
	for _, t := range []clockwork.Timer{c.timeout, c.storeTimer, c.renewTimer, c.watchdog, c.workTimer} {
		stop(t)
	}
}

// lose stops using the lock: the renewer and any pending work stop, and the
// client moves on to its next cycle without releasing (it is not the
// holder any more as far as it can tell).
func (c *Client) lose(reason string) {
	c.observe(lockservice.Event{Kind: lockservice.EvBeliefEnd, Token: c.token, Reason: reason})
	stop(c.renewTimer)
	stop(c.watchdog)
	stop(c.workTimer)
	c.phase = phaseIdle
	c.after(&c.workTimer, c.cfg.ThinkTime, c.beginCycleFn)
}

// --- renewer ---

func (c *Client) sendRenew() {
	if c.phase != phaseHolding {
		return
	}
	if c.renewPending {
		c.rotate() // the last renewal went unanswered
	}
	c.renewPending = true
	c.renewReq = c.newRequest()
	c.renewStart = c.now()
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRenew, Request: c.renewReq, Token: c.token})
	c.env.Send(c.server(), lockservice.RenewRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Token: c.token, Request: c.renewReq})
	c.log("renew.sent", c.renewReq, slog.Uint64("token", c.token))
	// Renew again at a third of the TTL; a lost renewal is covered by the next.
	c.after(&c.renewTimer, c.cfg.TTL/3, c.sendRenewFn)
}

func (c *Client) onRenewReply(m lockservice.LockReply) {
	if c.phase != phaseHolding {
		return
	}
	c.renewPending = false
	c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRenew, Request: m.Request, Token: m.Token, Status: m.Status})
	if m.Status == lockservice.NotLeader {
		c.redirect(m)
		c.log("renew.redirect", m.Request, slog.Int("leader", int(m.Leader)))
		return // the next renewal goes to the new target
	}
	if m.Status == lockservice.Overloaded || m.Status == lockservice.Stale {
		// Shed at the ingress, or overtaken by the client's own later
		// requests: the lease stands as it was; the next renewal tries
		// again and the watchdog still bounds the belief.
		c.log("renew.overloaded", m.Request, slog.Uint64("token", c.token))
		return
	}
	if m.Status == lockservice.Renewed && m.Token == c.token {
		c.extend(c.renewStart, m.TTL)
		c.log("renew.ok", m.Request, slog.Uint64("token", c.token))
		return
	}
	c.log("renew.lost", m.Request, slog.Uint64("token", c.token), slog.String("status", m.Status.String()))
	c.lose("renew-refused")
}

// --- work against the fenced store ---

// beginWork checks the watchdog and starts one unit of work that ends with
// a fenced write, or reads and releases once the writes are done.
func (c *Client) beginWork() {
	if !c.Holding() {
		c.log("work.abandoned", 0, slog.Uint64("token", c.token))
		c.lose("watchdog")
		return
	}
	if c.writesDone >= c.cfg.WritesPerHold {
		c.sendRead()
		return
	}
	c.after(&c.workTimer, c.cfg.WorkDuration, c.sendWriteFn)
}

func (c *Client) sendWrite() {
	c.storeReq = c.newRequest()
	c.storeRead = false
	value := int64(c.env.ID())<<48 | int64(c.storeReq&(1<<48-1))
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpWrite, Request: c.storeReq, Token: c.token, Value: value})
	c.env.Send(c.cfg.Store, lockservice.WriteRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Token: c.token, Value: value, Request: c.storeReq})
	c.log("write.sent", c.storeReq, slog.Uint64("token", c.token), slog.Int64("value", value))
	c.after(&c.storeTimer, c.cfg.RequestTimeout, c.storeTimedOutFn)
}

func (c *Client) sendRead() {
	c.storeReq = c.newRequest()
	c.storeRead = true
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRead, Request: c.storeReq})
	c.env.Send(c.cfg.Store, lockservice.ReadRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Request: c.storeReq})
	c.log("read.sent", c.storeReq)
	c.after(&c.storeTimer, c.cfg.RequestTimeout, c.storeTimedOutFn)
}

// storeTimedOut gives up on the outstanding store operation: its outcome is
// unknown (the checker treats it as either) and the client moves on.
func (c *Client) storeTimedOut() {
	c.log("store.timeout", c.storeReq)
	c.storeReq = 0
	c.afterStoreOp(!c.storeRead)
}

func (c *Client) onWriteReply(m lockservice.WriteReply) {
	if m.Request != c.storeReq || c.storeRead {
		return
	}
	stop(c.storeTimer)
	c.storeReq = 0
	if m.Err != "" {
		c.log("write.invalid", m.Request, slog.String("err", m.Err))
		c.stopAll()
		c.phase = phaseDone
		return
	}
	c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpWrite, Request: m.Request, Token: c.token, Accepted: m.Accepted})
	c.log("write.reply", m.Request, slog.Uint64("token", c.token), slog.Bool("accepted", m.Accepted), slog.Uint64("highest", m.Highest))
	if c.phase != phaseHolding {
		return // the lock was lost while the write was out; recorded, nothing more
	}
	if !m.Accepted {
		// The store has seen a newer token: someone else holds the lock.
		c.lose("fenced-out")
		return
	}
	c.afterStoreOp(true)
}

func (c *Client) onReadReply(m lockservice.ReadReply) {
	if m.Request != c.storeReq || !c.storeRead {
		return
	}
	stop(c.storeTimer)
	c.storeReq = 0
	if m.Err == "" {
		c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRead, Request: m.Request, Value: m.Value, Token: m.Token})
	}
	c.log("read.reply", m.Request, slog.Int64("value", m.Value), slog.Uint64("token", m.Token))
	c.afterStoreOp(false)
}

// afterStoreOp continues the cycle once a store operation has ended.
func (c *Client) afterStoreOp(wasWrite bool) {
	if c.phase != phaseHolding {
		return
	}
	if wasWrite && c.writesDone < c.cfg.WritesPerHold {
		c.writesDone++
		c.beginWork()
		return
	}
	c.sendRelease()
}

// --- release handler ---

func (c *Client) sendRelease() {
	stop(c.renewTimer)
	stop(c.watchdog)
	c.phase = phaseReleasing
	c.relReq = c.newRequest()
	c.relAttempts = 0
	c.observe(lockservice.Event{Kind: lockservice.EvBeliefEnd, Token: c.token, Reason: "releasing"})
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRelease, Request: c.relReq, Token: c.token})
	c.resendRelease()
}

// releaseAttempts bounds the release handler's retries; after them the
// lease expires on its own.
const releaseAttempts = 3

func (c *Client) resendRelease() {
	c.relAttempts++
	c.env.Send(c.server(), lockservice.ReleaseRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Token: c.token, Request: c.relReq})
	c.log("release.sent", c.relReq, slog.Uint64("token", c.token))
	c.after(&c.timeout, c.cfg.RequestTimeout, c.releaseTimedOutFn)
}

// releaseTimedOut retries the release elsewhere, then gives up: the lease
// expires on its own.
func (c *Client) releaseTimedOut() {
	if c.relAttempts < releaseAttempts {
		c.rotate()
		c.resendRelease()
		return
	}
	c.log("release.timeout", c.relReq)
	c.phase = phaseIdle
	c.after(&c.workTimer, c.cfg.ThinkTime, c.beginCycleFn)
}

func (c *Client) onReleaseReply(m lockservice.LockReply) {
	stop(c.timeout)
	if m.Status == lockservice.NotLeader && c.relAttempts < releaseAttempts {
		named := c.redirect(m)
		c.after(&c.timeout, c.retryDelay(named), c.resendReleaseFn)
		return
	}
	c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRelease, Request: m.Request, Token: c.token, Status: m.Status})
	c.logStatus("release.", m.Status, m.Request, slog.Uint64("token", c.token))
	c.phase = phaseIdle
	c.after(&c.workTimer, c.cfg.ThinkTime, c.beginCycleFn)
}

// Receive routes replies by request id; stale and duplicated replies match
// nothing and are dropped.
func (c *Client) Receive(env process.Env, from process.NodeID, msg process.Message) {
	switch m := msg.(type) {
	case lockservice.LockReply:
		switch {
		case c.phase == phaseAcquiring && m.Request == c.acqReq:
			c.onAcquireReply(m)
		case c.phase == phaseHolding && m.Request == c.renewReq:
			c.onRenewReply(m)
		case c.phase == phaseReleasing && m.Request == c.relReq:
			c.onReleaseReply(m)
		}
	case lockservice.WriteReply:
		c.onWriteReply(m)
	case lockservice.ReadReply:
		c.onReadReply(m)
	}
}
