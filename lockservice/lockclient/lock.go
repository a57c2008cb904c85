package lockclient

import (
	"context"
	"encoding/binary"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/process"
)

// Handler is what a Lock tells the code that uses it (the harness's
// workload): each call comes from inside the event that caused it, after
// the Lock has reported it to the observer.
type Handler interface {
	// Granted: the acquire was granted; the lock is held (Holding) until
	// Lost, or until Release.
	Granted()
	// Lost: the client stopped believing it holds the lock without
	// releasing it: its watchdog fired ("watchdog"), a renewal was refused
	// ("renew-refused"), or the caller said so through Lose. The Lock is
	// idle.
	Lost(reason string)
	// Released: the release was answered, or given up after its retries
	// (the lease then expires on its own). The Lock is idle.
	Released()
	// Failed: the service refused the acquire as invalid; the Lock is idle
	// and stopped, and another acquire would fail the same way.
	Failed()
}

// lockPhase is where the Lock is between an acquire and its end.
type lockPhase uint8

const (
	lockIdle lockPhase = iota
	lockAcquiring
	lockHolding
	lockReleasing
)

// Lock is the lock client library: one client's lock on one resource. It
// is the acquirer (retries with the same request id, redirects, jittered
// backoff), the lease renewer, the watchdog (the client stops believing it
// holds the lock at request start + TTL·(1−ρ) − margin on its own clock)
// and the release handler. It speaks the reference's messages
// (AcquireRequest, RenewRequest, ReleaseRequest, LockReply) through the
// node's Send, reports the client events the checker needs (calls, returns
// and belief ends of acquire, renew and release), and tells its Handler
// what happened. Each action emits one slog event with the client and
// request id as correlation id.
type Lock struct {
	cfg   lockservice.ClientConfig
	h     Handler
	env   process.Env
	proto lockservice.Protocol // nil: the reference's messages, sent as they are
	host  *protocolHost

	incarnation uint64 // from disk: request ids stay unique across restarts
	nextReq     uint64
	target      int // index in Servers of the node requests go to
	phase       lockPhase

	// acquirer
	acqReq      uint64
	acqStart    time.Duration // monotonic, for the watchdog
	acqStartReq uint64        // the request acqStart was taken for
	acqKey      string        // the acquire's request id as its key (RequestKey)
	// acqNamed: a redirect named the leader this request went to next;
	// acqMoved: that leader then redirected it again or went silent (the
	// lead changed while the acquire was in flight), for a coverage mark.
	acqNamed, acqMoved bool
	// acqNodes are the servers (bits by index in Servers) the current
	// acquire's request id went to, for a coverage mark.
	acqNodes uint64
	// the lease as the client believes it
	token      uint64
	deadline   time.Duration // monotonic: the watchdog's limit
	leaseStart time.Duration // monotonic: when the request deadline counts from was sent
	// renewer
	renewReq     uint64
	renewStart   time.Duration
	renewPending bool // the last renewal got no answer yet
	// release handler
	relReq        uint64
	relKey        string // the release's request id (RequestKey)
	relAttempts   int
	relStatus     lockservice.Status // the release's answer; 0: given up unanswered
	relUnanswered bool               // an attempt of the release went unanswered

	opts      Options
	redirects int // named redirects followed at once in a row (Options.RedirectLimit)
	// hint is the server's retry hint carried with the reply being
	// handled (ReceiveHint); always 0 in the simulator.
	hint time.Duration

	// timeout times lock-service requests (acquire, release).
	timeout, renewTimer, watchdog clockwork.Timer

	// The timers' callbacks, bound once: a method value made at each
	// arming would be an allocation per timer.
	sendAcquireFn, retryAcquireFn, sendRenewFn, watchdogFiredFn, resendReleaseFn, releaseTimedOutFn func()
}

// NewLock returns a Lock for cfg's client and resource, reporting to h.
// With a Protocol p (a design's ClientProtocol), its lock requests go to p
// and p's replies come back as the service's would; nil sends the
// reference's messages to cfg.Servers. Every restart of the client process
// needs a new one (and a new Protocol).
func NewLock(cfg lockservice.ClientConfig, p lockservice.Protocol, h Handler) *Lock {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	l := &Lock{cfg: cfg, h: h, proto: p}
	if p != nil {
		l.host = &protocolHost{l: l}
		l.host.deliverFn = l.host.deliver
	}
	l.sendAcquireFn, l.retryAcquireFn, l.sendRenewFn = l.sendAcquire, l.retryAcquire, l.sendRenew
	l.watchdogFiredFn, l.resendReleaseFn, l.releaseTimedOutFn = l.watchdogFired, l.resendRelease, l.releaseTimedOut
	return l
}

const incarnationKey = "incarnation"

// Start bumps the client's incarnation on disk (synced, so request ids
// never repeat after a crash). Call it from the process's Start, before
// anything else of the Lock.
func (l *Lock) Start(env process.Env) {
	l.env = env
	if l.proto != nil {
		l.host.env = env
		l.proto.Start(l.host)
	}
	rec := record.Slotted{Key: incarnationKey}
	if b, ok := rec.Load(env.Disk()); ok && len(b) == 8 {
		l.incarnation = binary.BigEndian.Uint64(b)
	}
	l.incarnation++
	rec.Store(env.Disk(), binary.BigEndian.AppendUint64(nil, l.incarnation))
	env.Disk().Sync()
}

// NewRequest returns a request id unique for this client across restarts:
// the Lock's requests take theirs from here, and so may the caller's own
// (the workload's store requests).
func (l *Lock) NewRequest() uint64 {
	l.nextReq++
	return l.incarnation<<32 | l.nextReq
}

// RequestKey is request id req as the string a request carries as its key
// (AcquireRequest.Key, ReleaseRequest.RequestID): unique per client, as
// req is.
func RequestKey(req uint64) string { return strconv.FormatUint(req, 36) }

// Token is the fencing token of the lock the client believes it holds (of
// the last grant once it no longer does).
func (l *Lock) Token() uint64 { return l.token }

// Held reports whether the client believes it holds the lock: granted,
// neither lost nor released, whatever the clock says since (see Holding).
func (l *Lock) Held() bool { return l.phase == lockHolding }

// Holding reports whether the watchdog still allows using the lock: held,
// and its deadline not reached on the client's clock.
func (l *Lock) Holding() bool {
	return l.phase == lockHolding && l.now() < l.deadline
}

// observe reports an event about this client's own operations, shown to
// the Protocol first.
func (l *Lock) observe(e lockservice.Event) {
	e.Client, e.Resource = l.cfg.Name, l.cfg.Resource
	if l.proto != nil {
		l.proto.Observe(e)
	}
	l.cfg.Observer.Observe(e)
}

// send sends a lock request to the service node to, or hands it to the
// Protocol.
func (l *Lock) send(to process.NodeID, msg process.Message) {
	if l.proto != nil {
		l.proto.Request(to, msg)
		return
	}
	l.env.Send(to, msg)
}

func (l *Lock) now() time.Duration { return l.env.Clock().Monotonic() }

// Log emits one event with the client, the request id and the resource. It
// builds nothing unless the logger takes the record: without a trace,
// logging costs one Enabled call.
func (l *Lock) Log(event string, req uint64, attrs ...slog.Attr) {
	lg := l.env.Log()
	if !lg.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	lg.LogAttrs(context.Background(), slog.LevelInfo, event, append([]slog.Attr{
		slog.String("client", l.cfg.Name), slog.Uint64("req", req), slog.String("resource", l.cfg.Resource)}, attrs...)...)
}

// logStatus is Log for the event named prefix + st, which it spells out
// only if the record is taken.
func (l *Lock) logStatus(prefix string, st lockservice.Status, req uint64, attrs ...slog.Attr) {
	if l.env.Log().Enabled(context.Background(), slog.LevelInfo) {
		l.Log(prefix+st.String(), req, attrs...)
	}
}

// Rearm (re)arms *t to run f after d on env's monotonic clock: a new timer
// rather than a Reset of the old one, because a timer's creation order
// decides which of the clock's timers a drift change re-arms first. The
// lock client passes callbacks bound at construction, so arming allocates
// only the timer. The workload arms its timers the same way.
func Rearm(env process.Env, t *clockwork.Timer, d time.Duration, f func()) {
	if *t != nil {
		(*t).Stop()
	}
	*t = env.Clock().AfterFunc(d, f)
}

// StopTimer stops t if it was ever armed.
func StopTimer(t clockwork.Timer) {
	if t != nil {
		t.Stop()
	}
}

func (l *Lock) backoff() time.Duration {
	span := l.cfg.BackoffMax - l.cfg.BackoffMin
	if span <= 0 {
		return l.cfg.BackoffMin
	}
	return l.cfg.BackoffMin + time.Duration(l.env.Rand().Int64N(int64(span)+1))
}

// backoffAfter is the wait after a refusal with status st: the jittered
// backoff, adjusted by the server's hint when the reply carried one
// (ReceiveHint). Busy waits no longer than the hint (the lease's remaining
// time: it ends sooner than the backoff); an overloaded or unavailable
// server is never retried sooner than it asked, plus up to half again so
// shed clients do not come back in step. Without a hint (the simulator)
// it draws exactly what backoff draws.
func (l *Lock) backoffAfter(st lockservice.Status) time.Duration {
	d := l.backoff()
	switch h := l.hint; {
	case h <= 0:
	case st == lockservice.Busy:
		d = min(d, h)
	default:
		d = h + time.Duration(l.env.Rand().Int64N(int64(h/2)+1))
	}
	return d
}

// --- acquirer ---

// Acquire starts acquiring the lock with a new request; the Handler hears
// Granted once it is (or Failed), after as many retries and backoffs as
// it takes.
func (l *Lock) Acquire() {
	l.phase = lockAcquiring
	l.redirects = 0
	l.acqReq = l.NewRequest()
	l.sendAcquire()
}

func (l *Lock) sendAcquire() {
	if l.acqStartReq != l.acqReq {
		// The lease is measured from the first send of this request id: a
		// retry is deduplicated, so the grant it is answered with may have
		// started when the first copy arrived.
		l.acqStart, l.acqStartReq = l.now(), l.acqReq
		l.acqNamed, l.acqMoved, l.acqNodes = false, false, 0
		l.acqKey = RequestKey(l.acqReq)
		l.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpAcquire, Request: l.acqReq})
	}
	l.acqNodes |= 1 << (uint(l.target) % 64)
	// The request id goes with the request as its key, as the HTTP
	// client's request_id does: a front end that numbers requests itself
	// (the reference's, lockservice/frontend) deduplicates by it.
	l.send(l.server(), lockservice.AcquireRequest{Resource: l.cfg.Resource, Client: l.cfg.Name, TTL: l.cfg.TTL, Request: l.acqReq, Key: l.acqKey, Wait: l.cfg.Wait})
	l.Log("acquire.sent", l.acqReq, slog.Int("to", int(l.server())))
	// A waiting acquire is answered up to Wait later, and the server may
	// take a round trip beyond it to commit the answer.
	Rearm(l.env, &l.timeout, l.cfg.RequestTimeout+l.cfg.Wait, l.retryAcquireFn)
}

// retryAcquire resends the acquire elsewhere, with the same id: the last
// server did not answer in time.
func (l *Lock) retryAcquire() {
	l.acqMoved = l.acqMoved || l.acqNamed
	l.acqNamed = false
	l.rotate()
	l.sendAcquire()
}

// server is the node lock requests go to now.
func (l *Lock) server() process.NodeID { return l.cfg.Servers[l.target] }

// rotate moves to the next server: the current one did not answer.
func (l *Lock) rotate() { l.target = (l.target + 1) % len(l.cfg.Servers) }

// redirect follows a NotLeader answer: to the leader it names, else to the
// next server. It reports whether the leader was named.
func (l *Lock) redirect(m lockservice.LockReply) bool {
	if i := slices.Index(l.cfg.Servers, m.Leader); m.Leader != lockservice.NoLeader && i >= 0 {
		l.target = i
		return true
	}
	l.rotate()
	return false
}

// retryDelay is how long to wait before following a redirect: at once to
// a named leader, after a backoff (or the server's hint) while an election
// is on.
func (l *Lock) retryDelay(named bool) time.Duration {
	if named {
		if l.redirects++; l.opts.RedirectLimit == 0 || l.redirects <= l.opts.RedirectLimit {
			return 0
		}
	}
	l.redirects = 0
	return l.backoffAfter(lockservice.NotLeader)
}

func (l *Lock) onAcquireReply(m lockservice.LockReply) {
	StopTimer(l.timeout)
	if m.Status != lockservice.NotLeader { // a redirect is not an answer: the call goes on
		if l.acqNodes&(l.acqNodes-1) != 0 {
			l.cfg.Marks.Hit(coverage.FrontendRetryOtherNode)
		}
		st, token := m.Status, m.Token
		if st == lockservice.Busy && token != 0 {
			// Busy naming a token: the service says the lock is held by
			// this client itself under an earlier attempt (LockReply.Token).
			// The checker's
			// model (S7) knows no such answer, so it is reported as one
			// of unknown outcome (the same backoff follows).
			st, token = lockservice.Overloaded, 0
		}
		l.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpAcquire, Request: m.Request, Token: token, Status: st})
	}
	switch m.Status {
	case lockservice.Granted:
		if l.acqMoved {
			l.cfg.Marks.Hit(coverage.ClientAcquireAcrossLeaders)
		}
		if l.now()-l.acqStart > l.cfg.TTL {
			l.cfg.Marks.Hit(coverage.ClientGrantPastTTL)
		}
		l.token = m.Token
		l.extend(GrantStart(l.cfg, l.acqStart, l.now(), m.Waited), m.TTL)
		l.phase = lockHolding
		l.Log("acquire.granted", m.Request, slog.Uint64("token", m.Token))
		Rearm(l.env, &l.renewTimer, l.cfg.TTL/3, l.sendRenewFn)
		l.h.Granted()
	case lockservice.Busy, lockservice.Overloaded, lockservice.Stale:
		l.logStatus("acquire.", m.Status, m.Request)
		if m.Status == lockservice.Busy && l.opts.TryOnce {
			l.Stop()
			l.h.Failed()
			return
		}
		if m.Status != lockservice.Overloaded || !l.opts.KeepRequestWhenOverloaded {
			l.acqReq = l.NewRequest() // a definitive answer: the next attempt is new
		}
		Rearm(l.env, &l.timeout, l.backoffAfter(m.Status), l.sendAcquireFn)
	case lockservice.NotLeader:
		l.acqMoved = l.acqMoved || l.acqNamed
		named := l.redirect(m)
		l.acqNamed = named
		l.Log("acquire.redirect", m.Request, slog.Int("leader", int(m.Leader)))
		Rearm(l.env, &l.timeout, l.retryDelay(named), l.sendAcquireFn) // same id
	default:
		l.Log("acquire.failed", m.Request, slog.String("status", m.Status.String()), slog.String("err", m.Err))
		l.Stop()
		l.h.Failed()
	}
}

// --- watchdog ---

// extend moves the watchdog's deadline to start + ttl·(1−ρ) − margin,
// start being when the request that (re)granted the lease was sent: the
// server's lease began no earlier than that, and the client's clock may run
// up to ρ slower than the server's.
func (l *Lock) extend(start, ttl time.Duration) {
	l.leaseStart = start
	l.deadline = WatchdogDeadline(l.cfg, start, l.now(), ttl)
	Rearm(l.env, &l.watchdog, l.deadline-l.now(), l.watchdogFiredFn)
}

// GrantStart is when a granted lease began at the earliest, on the
// client's monotonic clock, for an acquire first sent at sent, answered at
// replied, that waited at the server (LockReply.Waited, on the server's
// clock): sent + waited·(1−ρ), since the server took the request no
// sooner than it was sent and began the lease no sooner than waited after
// that; never past replied. Every client of fencesim computes it here.
func GrantStart(cfg lockservice.ClientConfig, sent, replied, waited time.Duration) time.Duration {
	if waited <= 0 {
		return sent
	}
	return min(sent+waited-time.Duration(int64(waited)/1_000_000*cfg.DriftBoundPPM), replied)
}

// WatchdogDeadline is the watchdog's limit for a lease of ttl whose
// request was sent at sent and answered at replied (the client's
// monotonic time): cfg.Watchdog's when set, else sent + ttl·(1−ρ) −
// margin. Every client of fencesim, simulated or over HTTP, computes it
// here.
func WatchdogDeadline(cfg lockservice.ClientConfig, sent, replied, ttl time.Duration) time.Duration {
	if cfg.Watchdog != nil {
		return cfg.Watchdog(sent, replied, ttl)
	}
	return sent + ttl - time.Duration(int64(ttl)/1_000_000*cfg.DriftBoundPPM) - cfg.Margin
}

// WaitWithin is the wait bound (ClientConfig.Wait) of an acquire whose
// caller gives up in remaining (negative: never) and wants up to max (≤ 0:
// no waiting): max, shortened by slack below remaining so that the answer
// comes back before the caller gives up, in whole milliseconds (HTTP's
// wait_ms), never negative.
func WaitWithin(max, remaining, slack time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	if remaining >= 0 {
		max = min(max, remaining-slack)
	}
	if max <= 0 {
		return 0
	}
	return max.Truncate(time.Millisecond)
}

// Deadline is the watchdog's current limit on the client's monotonic
// clock (meaningful while Held).
func (l *Lock) Deadline() time.Duration { return l.deadline }

// LeaseStart is when the request that last granted or renewed the lease
// was first sent (client monotonic time): the start Deadline counts from.
func (l *Lock) LeaseStart() time.Duration { return l.leaseStart }

func (l *Lock) watchdogFired() {
	if l.phase != lockHolding {
		return
	}
	l.cfg.Marks.Hit(coverage.ClientWatchdogFired)
	l.Log("watchdog.expired", 0, slog.Uint64("token", l.token))
	l.Lose("watchdog")
}

// Stop stops every timer of the Lock and leaves it idle: the caller gives
// up its workload.
func (l *Lock) Stop() {
	for _, t := range []clockwork.Timer{l.timeout, l.renewTimer, l.watchdog} {
		StopTimer(t)
	}
	l.phase = lockIdle
}

// Lose stops believing the lock is held, without releasing it (the client
// is not the holder any more as far as it can tell: its watchdog, or the
// store refusing its token): the renewer stops, and the Handler hears Lost
// with reason.
func (l *Lock) Lose(reason string) {
	l.observe(lockservice.Event{Kind: lockservice.EvBeliefEnd, Token: l.token, Reason: reason})
	StopTimer(l.renewTimer)
	StopTimer(l.watchdog)
	l.phase = lockIdle
	l.h.Lost(reason)
}

// --- renewer ---

func (l *Lock) sendRenew() {
	if l.phase != lockHolding {
		return
	}
	if l.renewPending {
		l.rotate() // the last renewal went unanswered
	}
	l.renewPending = true
	l.renewReq = l.NewRequest()
	l.renewStart = l.now()
	l.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRenew, Request: l.renewReq, Token: l.token})
	// The renewal names its TTL, as the HTTP client's does.
	l.send(l.server(), lockservice.RenewRequest{Resource: l.cfg.Resource, Client: l.cfg.Name, Token: l.token, Request: l.renewReq, TTL: l.cfg.TTL})
	l.Log("renew.sent", l.renewReq, slog.Uint64("token", l.token))
	// Renew again at a third of the TTL; a lost renewal is covered by the next.
	Rearm(l.env, &l.renewTimer, l.cfg.TTL/3, l.sendRenewFn)
}

func (l *Lock) onRenewReply(m lockservice.LockReply) {
	l.renewPending = false
	l.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRenew, Request: m.Request, Token: m.Token, Status: m.Status})
	if m.Status == lockservice.NotLeader {
		l.redirect(m)
		l.Log("renew.redirect", m.Request, slog.Int("leader", int(m.Leader)))
		return // the next renewal goes to the new target
	}
	if m.Status == lockservice.Overloaded || m.Status == lockservice.Stale {
		// Shed at the ingress, or overtaken by the client's own later
		// requests: the lease stands as it was; the next renewal tries
		// again and the watchdog still bounds the belief.
		l.Log("renew.overloaded", m.Request, slog.Uint64("token", l.token))
		return
	}
	if m.Status == lockservice.Renewed && m.Token == l.token {
		l.extend(l.renewStart, m.TTL)
		l.Log("renew.ok", m.Request, slog.Uint64("token", l.token))
		return
	}
	l.cfg.Marks.Hit(coverage.ClientRenewRefused)
	l.Log("renew.lost", m.Request, slog.Uint64("token", l.token), slog.String("status", m.Status.String()))
	l.Lose("renew-refused")
}

// --- release handler ---

// Release gives the lock up: the client stops believing it holds it at
// once, and sends the release (retried elsewhere, at most releaseAttempts
// times); the Handler hears Released when it is answered or given up.
func (l *Lock) Release() {
	StopTimer(l.renewTimer)
	StopTimer(l.watchdog)
	l.phase = lockReleasing
	l.relReq = l.NewRequest()
	l.relKey = RequestKey(l.relReq)
	l.relAttempts, l.redirects = 0, 0
	l.relStatus, l.relUnanswered = 0, false
	l.observe(lockservice.Event{Kind: lockservice.EvBeliefEnd, Token: l.token, Reason: "releasing"})
	l.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRelease, Request: l.relReq, Token: l.token})
	l.resendRelease()
}

// releaseAttempts bounds the release handler's retries; after them the
// lease expires on its own.
const releaseAttempts = 3

// maxReleaseAttempts is Options.ReleaseAttempts, or releaseAttempts.
func (l *Lock) maxReleaseAttempts() int {
	if l.opts.ReleaseAttempts > 0 {
		return l.opts.ReleaseAttempts
	}
	return releaseAttempts
}

func (l *Lock) resendRelease() {
	l.relAttempts++
	// The same request id on every attempt, as the HTTP client's: a retry
	// of a release that took effect is answered released.
	l.send(l.server(), lockservice.ReleaseRequest{Resource: l.cfg.Resource, Client: l.cfg.Name, Token: l.token, Request: l.relReq, RequestID: l.relKey})
	l.Log("release.sent", l.relReq, slog.Uint64("token", l.token))
	Rearm(l.env, &l.timeout, l.cfg.RequestTimeout, l.releaseTimedOutFn)
}

// releaseTimedOut retries the release elsewhere, then gives up: the lease
// expires on its own.
func (l *Lock) releaseTimedOut() {
	l.relUnanswered = true
	if l.relAttempts < l.maxReleaseAttempts() {
		l.rotate()
		l.resendRelease()
		return
	}
	l.Log("release.timeout", l.relReq)
	l.phase = lockIdle
	l.h.Released()
}

func (l *Lock) onReleaseReply(m lockservice.LockReply) {
	StopTimer(l.timeout)
	if m.Status == lockservice.NotLeader && l.relAttempts < l.maxReleaseAttempts() {
		named := l.redirect(m)
		Rearm(l.env, &l.timeout, l.retryDelay(named), l.resendReleaseFn)
		return
	}
	if m.Status == lockservice.Overloaded && l.opts.RetryOverloadedRelease && l.relAttempts < l.maxReleaseAttempts() {
		Rearm(l.env, &l.timeout, l.backoffAfter(m.Status), l.resendReleaseFn)
		return
	}
	l.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRelease, Request: m.Request, Token: l.token, Status: m.Status})
	if m.Status != lockservice.Released {
		l.cfg.Marks.Hit(coverage.ClientReleaseRefused)
	}
	l.logStatus("release.", m.Status, m.Request, slog.Uint64("token", l.token))
	l.relStatus = m.Status
	l.phase = lockIdle
	l.h.Released()
}

// Receive takes a message that reached the client and reports whether it
// was the Lock's: the Protocol's messages, and the lock service's replies.
// Others (the store's replies) are the caller's.
func (l *Lock) Receive(from process.NodeID, msg process.Message) bool {
	if l.proto != nil && l.proto.Receive(from, msg) {
		return true
	}
	if m, ok := msg.(lockservice.LockReply); ok {
		l.onReply(m)
		return true
	}
	return false
}

// onReply routes a lock service's reply by request id: stale and
// duplicated replies match nothing and are dropped.
func (l *Lock) onReply(m lockservice.LockReply) {
	switch {
	case l.phase == lockAcquiring && m.Request == l.acqReq:
		l.onAcquireReply(m)
	case l.phase == lockHolding && m.Request == l.renewReq:
		l.onRenewReply(m)
	case l.phase == lockReleasing && m.Request == l.relReq:
		l.onReleaseReply(m)
	}
}

// --- for clients outside the simulator ---

// Options are the Lock's behaviours that a client outside the simulator
// (the HTTP client, lockapi/lockclient) needs. The zero value is the
// simulator's client; set them before Acquire.
type Options struct {
	// TryOnce: a Busy answer ends the acquire (the Handler hears Failed)
	// instead of a retry with a new request after a backoff.
	TryOnce bool
	// KeepRequestWhenOverloaded: after an Overloaded answer the acquire is
	// retried with the same request id. Over HTTP an overloaded answer may
	// come from a hop past the one that applied the request (a proxy, a
	// forwarding follower), so the same id lets the service deduplicate.
	KeepRequestWhenOverloaded bool
	// RedirectLimit: after this many redirects in a row to a named leader,
	// each followed at once, the next waits a backoff, so that two nodes
	// naming each other during a change of leader are not asked in a
	// tight loop. 0: no limit (the simulator's client).
	RedirectLimit int
	// RetryOverloadedRelease: a release shed as Overloaded is sent again
	// (same id) after the server's hint, within ReleaseAttempts, instead
	// of ending unanswered. Over HTTP a busy front end sheds releases as
	// it sheds anything (waiting acquires leave its admission limit to
	// the others), and a release given up holds the lock a whole TTL.
	RetryOverloadedRelease bool
	// ReleaseAttempts bounds the release handler's sends (0: releaseAttempts,
	// the simulator's client). Over HTTP a release may meet a change of
	// leader that outlasts three attempts (a leader killed, an election):
	// the caller's context bounds it there instead.
	ReleaseAttempts int
}

// SetOptions sets o.
func (l *Lock) SetOptions(o Options) { l.opts = o }

// ReceiveHint is Receive for a lock service reply that came with a retry
// hint (HTTP's Retry-After, or a held lease's remaining time): the wait
// after it is backoffAfter's.
func (l *Lock) ReceiveHint(m lockservice.LockReply, retryAfter time.Duration) {
	l.hint = retryAfter
	l.onReply(m)
	l.hint = 0
}

// NoAnswer tells the Lock that the transport knows request req got no
// answer (a refused connection, a cut reply) before the request timeout
// said so: the acquire and release are retried as on a timeout, after a
// backoff instead of the rest of the timeout; a renewal is sent again
// (a new one, to the next server, as after an unanswered renewal) after a
// backoff instead of at the next third of the TTL, so that a leader's
// crash costs the lease one backoff rather than a third of its TTL.
func (l *Lock) NoAnswer(req uint64) {
	switch {
	case l.phase == lockAcquiring && req == l.acqReq:
		Rearm(l.env, &l.timeout, l.backoff(), l.retryAcquireFn)
	case l.phase == lockHolding && req == l.renewReq && l.renewPending:
		Rearm(l.env, &l.renewTimer, l.backoff(), l.sendRenewFn)
	case l.phase == lockReleasing && req == l.relReq:
		Rearm(l.env, &l.timeout, l.backoff(), l.releaseTimedOutFn)
	}
}

// ReleaseResult is how the last release ended, once the Handler heard
// Released: Released; NotHolder (the lease had ended, expired or taken
// over); 0 when every attempt went unanswered (the lease expires on its
// own). A NotHolder after an attempt that got no answer is Released: that
// attempt may have released it, and the retry found it free.
func (l *Lock) ReleaseResult() lockservice.Status {
	if l.relStatus == lockservice.NotHolder && l.relUnanswered {
		return lockservice.Released
	}
	return l.relStatus
}
