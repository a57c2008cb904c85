package lockdsim

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockd/scripts"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// InstanceConfig configures a lockd instance.
type InstanceConfig struct {
	// Redis is the node of the Redis process.
	Redis  process.NodeID
	Prefix string
	Limits lockservice.Limits
	// RequestMemory is lockd.Options.RequestMemory: how long an acquire's
	// request id is remembered past its lease (0: scripts.Memory; below
	// 0: not at all, lockd before the fix — the planted bug
	// lockd-forgets-request).
	RequestMemory time.Duration
	// QueueLease is lockd.Options.QueueLease: how long a wait-queue entry
	// lives past its last refresh; a waiter refreshes every quarter of it.
	// 0: scripts.QueueLease.
	QueueLease time.Duration
	// Timeout gives up a script Redis has not answered (go-redis's read
	// timeout); the client hears nothing and retries elsewhere. 0: 1 s.
	Timeout time.Duration
	// Marks counts the corners the instance reaches (nil: none).
	Marks *coverage.Counts
}

// Instance is one stateless lockd instance (lockd.Backend behind the HTTP
// API): it turns each lock request into script calls on Redis —
// lockd/scripts', the ones the real lockd sends, fenced as lockd fences
// them (the namespace's epoch and the grant sequence it saw) — and the
// replies into the answer. Every acquire goes through lockd's wait queue
// (scripts.QueuedAcquire); one with a Wait joins the queue when held and,
// as lockd.Backend's acquireWait does, waits for the wake channel's
// message (a Published from Redis, to which the instance subscribes on
// its first wait and again when it sees Redis restarted) or its refresh,
// every quarter queue lease (and when the head's lease is up): a wake
// asks again, a grant the release handed over answers at once, and a wait
// that passes leaves the queue. Releases hand the lock over
// (scripts.QueuedRelease). It keeps nothing but the fence and the calls in
// flight: a restart forgets them (and its subscription), and their
// clients retry elsewhere.
type Instance struct {
	cfg   InstanceConfig
	env   process.Env
	next  uint64
	calls map[uint64]*pending
	// The fence (lockd.Backend.fence): the namespace's epoch ("" until
	// read), the highest grant sequence seen, and why it was lost ("":
	// not).
	epoch, lost string
	seq         uint64
	// The wake channel's subscription: this start's session, the Redis run
	// it was confirmed in (0: none), when and in which run it was last
	// asked for, and the run of Redis's last reply.
	session, subRun, run uint64
	subAsked             time.Duration
	subAskedRun          uint64
	subAskedOnce         bool
	// waiters are the waiting acquires by wake key (scripts.Wake), in
	// arrival order.
	waiters map[string][]*op
}

// op is one lock request in the instance, through its script calls.
type op struct {
	from    process.NodeID
	msg     process.Message // the client's request
	request uint64
	start   time.Duration // monotonic, at receipt
	// A waiting acquire (Wait > 0): its queue entry and wake key, when its
	// last attempt went to Redis and how much of the wait it had left, its
	// last held answer, the refresh timer, and the latest message for it
	// heard while an attempt was in flight.
	member, key string
	attempts    int
	sent, left  time.Duration
	last        scripts.Acquired
	refresh     clockwork.Timer
	inFlight    bool
	msgs        []string
	// done: answered or given up; answer and settle: the answer given
	// once the queue is left, and whether it is settled as held first.
	done   bool
	answer lockservice.LockReply
	settle bool
	// silent: a waiter whose call to Redis timed out leaves the line and
	// answers nothing.
	silent bool
}

// step is what a script call is for.
type step int

const (
	stepFence step = iota
	stepAcquire
	stepHeld
	stepLeave
	stepRenew
	stepRelease
)

// pending is one script call in flight.
type pending struct {
	o     *op
	step  step
	timer clockwork.Timer
}

// fenceScript is lockd.Backend.fence's reads in one script: the
// namespace's epoch, created if absent (SET NX, as lockd without
// RequireEpoch does), and its grant sequence.
const fenceScript = `
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]) or '0'}
`

// NewInstance returns an instance process; every restart needs a new one.
func NewInstance(cfg InstanceConfig) *Instance {
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.RequestMemory == 0 {
		cfg.RequestMemory = scripts.Memory
	}
	if cfg.QueueLease == 0 {
		cfg.QueueLease = scripts.QueueLease
	}
	return &Instance{cfg: cfg}
}

// Start implements process.Process.
func (in *Instance) Start(env process.Env) {
	in.env, in.calls, in.waiters = env, map[uint64]*pending{}, map[string][]*op{}
	in.session = env.Rand().Uint64() | 1
	// Call ids start at random, so that a reply to a call of an earlier
	// start (another connection, for a real lockd) is not taken for one
	// of this start's.
	in.next = env.Rand().Uint64() >> 2
}

func (in *Instance) queue() scripts.Queue { return scripts.Queue{Prefix: in.cfg.Prefix} }

// Receive implements process.Process.
func (in *Instance) Receive(env process.Env, from process.NodeID, msg process.Message) {
	in.env = env
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		if err := in.cfg.Limits.CheckAcquire(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		o := &op{from: from, msg: m, request: m.Request, start: env.Clock().Monotonic()}
		if m.Wait > 0 {
			// Listen before the first attempt, so that no message
			// published after it runs is missed.
			o.member = scripts.Member(in.acquireCall(m))
			o.key = scripts.Wake(m.Resource, o.member)
			in.waiters[o.key] = append(in.waiters[o.key], o)
			in.subscribe()
		}
		in.attempt(o)
	case lockservice.RenewRequest:
		if err := in.cfg.Limits.CheckRenew(m); err != nil || m.TTL <= 0 {
			why := "ttl: lockd renews with an explicit ttl"
			if err != nil {
				why = err.Error()
			}
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: why})
			return
		}
		in.eval(&op{from: from, msg: m, request: m.Request}, stepRenew)
	case lockservice.ReleaseRequest:
		if err := in.cfg.Limits.CheckRelease(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		o := &op{from: from, msg: m, request: m.Request}
		if in.epoch == "" && in.lost == "" {
			in.eval(o, stepFence)
			return
		}
		in.eval(o, stepRelease)
	case EvalReply:
		in.reply(m)
	case Subscribed:
		if m.Session == in.session {
			in.subRun, in.run = m.Run, m.Run
		}
	case Published:
		if m.Session == in.session {
			in.published(m.Payload)
		}
	default:
		env.Log().Warn("lockd.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// subscribe asks Redis for the wake channel unless the subscription holds
// in the Redis run last heard from, or was asked for in that run less
// than a timeout ago (lockd's waker subscribes once and go-redis re-subscribes after a
// reconnect; here a changed Run is the broken connection).
func (in *Instance) subscribe() {
	now := in.env.Clock().Monotonic()
	if in.subRun != 0 && in.subRun == in.run || in.subAskedOnce && in.subAskedRun == in.run && now-in.subAsked < in.cfg.Timeout {
		return
	}
	in.subAsked, in.subAskedRun, in.subAskedOnce = now, in.run, true
	in.env.Send(in.cfg.Redis, Subscribe{Channel: in.queue().Channel(), Session: in.session})
}

// requestID is the request id a lock request carries to lockd: the
// client's request number (the shipped client's ids are strings; the
// simulated client numbers its requests).
func requestID(n uint64) string { return strconv.FormatUint(n, 10) }

func (in *Instance) acquireCall(m lockservice.AcquireRequest) scripts.Call {
	return scripts.AcquireCall(in.cfg.Prefix, m.Resource, m.Client, requestID(m.Request), m.TTL, in.cfg.RequestMemory)
}

func (in *Instance) epochKey() string { return in.cfg.Prefix + "epoch" }
func (in *Instance) seqKey() string   { return in.cfg.Prefix + "grants" }

// script is the script call of o's step.
func (in *Instance) script(o *op, s step) scripts.Call {
	p := in.cfg.Prefix
	switch s {
	case stepFence:
		var id [8]byte
		for i := range id {
			id[i] = byte(in.env.Rand().Uint32())
		}
		return scripts.Call{Script: fenceScript, Keys: []string{in.epochKey(), in.seqKey()}, Args: []string{fmt.Sprintf("%x 0", id)}}
	case stepAcquire:
		m := o.msg.(lockservice.AcquireRequest)
		c := in.acquireCall(m).WithFence(in.epochKey(), in.seqKey(), in.epoch, in.seq)
		if m.Wait <= 0 {
			return in.queue().Acquire(c, m.Resource, 0, 0)
		}
		return in.queue().Acquire(c, m.Resource, in.cfg.QueueLease, max(o.left, time.Millisecond))
	case stepHeld:
		m := o.msg.(lockservice.AcquireRequest)
		c, _ := scripts.HeldCall(p, m.Resource, m.Client, requestID(m.Request), in.cfg.RequestMemory)
		return c
	case stepLeave:
		return in.queue().Leave(o.msg.(lockservice.AcquireRequest).Resource, o.member)
	case stepRenew:
		m := o.msg.(lockservice.RenewRequest)
		return scripts.RenewCall(p, m.Resource, m.Client, m.Token, m.TTL, in.cfg.RequestMemory)
	case stepRelease:
		m := o.msg.(lockservice.ReleaseRequest)
		id := m.RequestID
		if id == "" {
			id = requestID(m.Request)
		}
		// Without a whole fence the release only wakes the queue's head.
		epoch, seq := in.epoch, in.seq
		if in.lost != "" {
			epoch, seq = "", 0
		}
		return in.queue().Release(scripts.ReleaseCall(p, m.Resource, m.Client, m.Token, id), m.Resource, in.epochKey(), in.seqKey(), epoch, seq)
	}
	panic(fmt.Sprintf("lockdsim: no script for step %d", s))
}

// eval sends the script of o's step to Redis and gives it up after the
// timeout: the client hears nothing (a queued waiter leaves the line
// first), except that a leave that times out goes on to its answer (lockd
// logs it; the entry lapses by its deadline).
func (in *Instance) eval(o *op, s step) {
	in.next++
	id := in.next
	p := &pending{o: o, step: s}
	in.calls[id] = p
	c := in.script(o, s)
	in.env.Send(in.cfg.Redis, Eval{ID: id, Script: c.Script, Keys: c.Keys, Args: c.Args})
	p.timer = in.env.Clock().AfterFunc(in.cfg.Timeout, func() {
		if in.calls[id] != p {
			return
		}
		delete(in.calls, id)
		in.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "lockd.redis-timeout", slog.Uint64("req", o.request))
		if s == stepLeave {
			in.afterLeave(o)
			return
		}
		in.unlisten(o) // the client hears nothing
		if s == stepAcquire && o.member != "" {
			// A queued waiter leaves the line, as lockd leaves it when a
			// call fails (lockd.Backend.leave), and answers nothing.
			o.silent = true
			in.eval(o, stepLeave)
		}
	})
}

// attempt runs a (waiting) acquire's next attempt: the fence first if it
// is not read yet.
func (in *Instance) attempt(o *op) {
	if o.done {
		return
	}
	m := o.msg.(lockservice.AcquireRequest)
	if in.lost != "" {
		in.finish(o, lockservice.LockReply{Request: o.request, Status: lockservice.Invalid, Err: "lockd: fence lost: " + in.lost}, false)
		return
	}
	if in.epoch == "" {
		o.inFlight = true
		in.eval(o, stepFence)
		return
	}
	now := in.env.Clock().Monotonic()
	o.sent, o.left = now-o.start, m.Wait-(now-o.start)
	o.attempts++
	o.inFlight = true
	if m.Wait > 0 {
		in.subscribe()
	}
	in.eval(o, stepAcquire)
}

// reply handles the reply to a script call.
func (in *Instance) reply(m EvalReply) {
	p, ok := in.calls[m.ID]
	if !ok {
		return // given up, or from before a restart
	}
	delete(in.calls, m.ID)
	p.timer.Stop()
	in.run = m.Run
	o := p.o
	fail := lockservice.LockReply{Request: o.request, Status: lockservice.Invalid}
	if m.Err != "" {
		fail.Err = "lockd: redis: " + m.Err
		if strings.Contains(m.Err, "FENCE_LOST") {
			in.lose(m.Err)
			fail.Err = "lockd: fence lost: " + in.lost
		}
	}
	switch p.step {
	case stepFence:
		o.inFlight = false
		v, _ := m.Value.([]any)
		if e, _ := fenceReply(v); e != "" && in.epoch == "" {
			in.epoch = e
			in.seq, _ = strconv.ParseUint(v[1].(string), 10, 64)
		}
		if _, ok := o.msg.(lockservice.ReleaseRequest); ok {
			// Without the fence the release only wakes the head.
			in.eval(o, stepRelease)
			return
		}
		if in.epoch == "" {
			if fail.Err == "" {
				fail.Err = fmt.Sprintf("lockd: epoch: fence script replied %v", m.Value)
			}
			in.finish(o, fail, false)
			return
		}
		in.attempt(o)
	case stepAcquire:
		o.inFlight = false
		if m.Err != "" {
			in.finish(o, fail, false)
			return
		}
		res, _ := m.Value.([]any)
		a, err := scripts.ParseAcquire(res)
		if err != nil {
			fail.Err = err.Error()
			in.finish(o, fail, false)
			return
		}
		in.acquired(o, a)
	case stepLeave:
		in.afterLeave(o)
	case stepHeld:
		in.settled(o, m)
	case stepRenew:
		rep := lockservice.LockReply{Request: o.request, Status: lockservice.NotHolder}
		req := o.msg.(lockservice.RenewRequest)
		if m.Err != "" {
			rep = fail
		} else if n, _ := m.Value.(int64); n == 1 {
			rep.Status, rep.Token, rep.TTL = lockservice.Renewed, req.Token, req.TTL
		}
		in.env.Send(o.from, rep)
	case stepRelease:
		rep := lockservice.LockReply{Request: o.request, Status: lockservice.NotHolder}
		if m.Err != "" {
			rep = fail
		} else if n, _ := m.Value.(int64); n == 1 {
			rep.Status = lockservice.Released
		}
		in.env.Send(o.from, rep)
	}
}

// fenceReply reads the fence script's reply: the epoch and the grant sequence.
func fenceReply(v []any) (string, string) {
	if len(v) != 2 {
		return "", ""
	}
	e, _ := v[0].(string)
	s, ok := v[1].(string)
	if !ok {
		return "", ""
	}
	return e, s
}

// lose stops granting for good, as lockd.Backend.lose does.
func (in *Instance) lose(why string) {
	if in.lost == "" {
		in.lost = why
		in.env.Log().Warn("lockd.fence-lost", slog.String("why", why))
	}
}

// acquired handles an acquire attempt's answer, as lockd.Backend's
// acquireWait and Acquire do.
func (in *Instance) acquired(o *op, a scripts.Acquired) {
	req := o.msg.(lockservice.AcquireRequest)
	if a.Seq > 0 {
		in.seq = max(in.seq, a.Seq)
	}
	rep := lockservice.LockReply{Request: o.request}
	if a.Granted {
		if a.TTL == 0 {
			in.cfg.Marks.Hit(coverage.LockdRequestRemembered)
		}
		rep.Status, rep.Token, rep.TTL = lockservice.Granted, a.Token, a.TTL
		if o.attempts > 1 {
			// The attempt that granted reached Redis no sooner than it
			// was sent.
			rep.Waited = o.sent
		}
		in.finish(o, rep, false)
		return
	}
	if req.Wait > 0 && o.left > 0 {
		o.last = a
		next := min(in.cfg.QueueLease/4, o.left)
		if a.Place == 1 && a.Left > 0 {
			// The head also asks again when the lease's time is up: a
			// lease that expires publishes nothing.
			next = min(next, a.Left+time.Millisecond)
		}
		if len(o.msgs) > 0 {
			in.woken(o)
			return
		}
		o.refresh = in.env.Clock().AfterFunc(next, func() {
			o.refresh = nil
			in.attempt(o)
		})
		return
	}
	if a.Holder == req.Client {
		// Held by the asker itself, under another request id (a lease it
		// gave up without releasing): lockd answers held, which the
		// fenced-mutex model (S7) does not know — there a holder's fresh
		// attempt is granted its own lease. The client hears an answer of
		// unknown outcome and backs off as for busy.
		rep.Status = lockservice.Overloaded
		in.finish(o, rep, false)
		return
	}
	if a.Left == 0 {
		// No lease is running. Either the lock is free but kept for the
		// queue's head and the script could not hand it the lock (its
		// request answered already: QueuedAcquire hands a free lock to a
		// head it can grant, and then answers held truly), and lockd
		// answers held by the head's client, which a fenced mutex (S7)
		// does not do — a free lock grants; or the request was answered held before and is
		// remembered so (a copy retried), which says nothing of the lock
		// now. The client hears an answer of unknown outcome and backs
		// off as for busy; the answer is settled as held all the same.
		if a.Holder != "" {
			in.cfg.Marks.Hit(coverage.LockdQueueKeptFree)
		}
		rep.Status = lockservice.Overloaded
		in.finish(o, rep, true)
		return
	}
	rep.Status = lockservice.Busy
	in.finish(o, rep, true)
}

// published routes a wake-channel message to the waiters it names: one
// waiting on its refresh handles it now; one with an attempt in flight
// keeps it for when the attempt is answered held.
func (in *Instance) published(payload string) {
	key, rest := scripts.SplitWake(payload)
	for _, o := range in.waiters[key] {
		o.msgs = append(o.msgs[:0], rest) // the latest, as lockd's waker keeps
		if !o.inFlight && o.refresh != nil {
			o.refresh.Stop()
			o.refresh = nil
			in.woken(o)
		}
	}
}

// woken handles the message kept for a waiter between its attempts: a
// grant handed over answers it; a wake asks again.
func (in *Instance) woken(o *op) {
	msg := o.msgs[0]
	o.msgs = o.msgs[:0]
	h, ok := scripts.ParseHandOver(msg)
	if !ok {
		in.attempt(o)
		return
	}
	in.cfg.Marks.Hit(coverage.LockdQueueHandOver)
	heard := in.env.Clock().Monotonic() - o.start
	in.finish(o, lockservice.LockReply{Request: o.request, Status: lockservice.Granted, Token: h.Token, TTL: h.TTL,
		Waited: handedAt(o.sent, heard, h.At-o.last.Now)}, false)
}

// handedAt is lockd's: when, after a waiter's start, a lease handed over
// to it began, no sooner than it began: its last attempt, sent at sent and
// answered held at the Redis clock's ms a.Now, was followed after redisMs
// ms by the grant, which came before it was heard of (heard).
func handedAt(sent, heard time.Duration, redisMs int64) time.Duration {
	d := time.Duration(redisMs-1) * time.Millisecond
	return sent + max(0, min(d, heard-sent))
}

// finish answers o: a waiter that did not win leaves the queue first (as
// lockd leaves on a held answer past its wait or an error; a grant leaves
// it in the script), and a held answer is settled (scripts.Held) before
// it is given.
func (in *Instance) finish(o *op, rep lockservice.LockReply, settle bool) {
	in.unlisten(o)
	o.answer, o.settle = rep, settle
	if o.member != "" && rep.Status != lockservice.Granted {
		in.eval(o, stepLeave)
		return
	}
	in.afterLeave(o)
}

// afterLeave settles o's held answer, or gives its answer.
func (in *Instance) afterLeave(o *op) {
	if o.silent {
		return // gave up on Redis: the client hears nothing
	}
	req := o.msg.(lockservice.AcquireRequest)
	if o.settle {
		o.settle = false
		if _, ok := scripts.HeldCall(in.cfg.Prefix, req.Resource, req.Client, requestID(req.Request), in.cfg.RequestMemory); ok {
			in.eval(o, stepHeld)
			return
		}
	}
	in.env.Send(o.from, o.answer)
}

// settled gives a held answer as the Held script settled it.
func (in *Instance) settled(o *op, m EvalReply) {
	rep := lockservice.LockReply{Request: o.request, Status: o.answer.Status}
	if m.Err != "" {
		rep.Status, rep.Err = lockservice.Invalid, "lockd: redis: "+m.Err
	} else if tok, err := scripts.ParseHeld(m.Value); err != nil {
		rep.Status, rep.Err = lockservice.Invalid, err.Error()
	} else if tok != 0 {
		in.cfg.Marks.Hit(coverage.LockdHeldSettled)
		rep.Status, rep.Token = lockservice.Granted, tok // a copy's grant, no time left
	}
	in.env.Send(o.from, rep)
}

// unlisten ends o's wait: no more messages, no refresh.
func (in *Instance) unlisten(o *op) {
	o.done = true
	if o.refresh != nil {
		o.refresh.Stop()
		o.refresh = nil
	}
	if o.key == "" {
		return
	}
	l := in.waiters[o.key]
	for i, w := range l {
		if w == o {
			l = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(in.waiters, o.key)
	} else {
		in.waiters[o.key] = l
	}
}
