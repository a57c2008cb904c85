package lockdsim

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
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
	// Timeout gives up a script Redis has not answered (go-redis's read
	// timeout); the client hears nothing and retries elsewhere. 0: 1 s.
	Timeout time.Duration
	// Marks counts the corners the instance reaches (nil: none).
	Marks *coverage.Counts
}

// Instance is one stateless lockd instance (lockd.Backend behind the HTTP
// API): it turns each lock request into one script call on Redis —
// lockd/scripts', the ones the real lockd sends — and the reply into the
// answer. An acquire with a Wait asks again after a jittered backoff from
// 1 ms doubling to 32 ms, never past the lease's reported end or the
// wait's, as lockd.Backend.Acquire does. It keeps nothing but the calls in
// flight: a restart forgets them, and their clients retry elsewhere.
type Instance struct {
	cfg   InstanceConfig
	env   process.Env
	next  uint64
	calls map[uint64]*call
}

// call is one lock request in flight: the script sent for it, and for a
// waiting acquire, when it started and its backoff.
type call struct {
	from    process.NodeID
	msg     process.Message
	request uint64
	start   time.Duration // monotonic, at receipt
	sent    time.Duration // monotonic, when the last attempt went to Redis
	backoff time.Duration
	timer   clockwork.Timer
}

// NewInstance returns an instance process; every restart needs a new one.
func NewInstance(cfg InstanceConfig) *Instance {
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.RequestMemory == 0 {
		cfg.RequestMemory = scripts.Memory
	}
	return &Instance{cfg: cfg}
}

// Start implements process.Process.
func (in *Instance) Start(env process.Env) {
	in.env, in.calls = env, map[uint64]*call{}
}

// Receive implements process.Process.
func (in *Instance) Receive(env process.Env, from process.NodeID, msg process.Message) {
	in.env = env
	switch m := msg.(type) {
	case lockservice.AcquireRequest:
		if err := in.cfg.Limits.CheckAcquire(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		in.eval(&call{from: from, msg: m, request: m.Request, start: env.Clock().Monotonic(), backoff: time.Millisecond})
	case lockservice.RenewRequest:
		if err := in.cfg.Limits.CheckRenew(m); err != nil || m.TTL <= 0 {
			why := "ttl: lockd renews with an explicit ttl"
			if err != nil {
				why = err.Error()
			}
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: why})
			return
		}
		in.eval(&call{from: from, msg: m, request: m.Request})
	case lockservice.ReleaseRequest:
		if err := in.cfg.Limits.CheckRelease(m); err != nil {
			env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Invalid, Err: err.Error()})
			return
		}
		in.eval(&call{from: from, msg: m, request: m.Request})
	case EvalReply:
		in.reply(m)
	default:
		env.Log().Warn("lockd.unknown-message", slog.String("type", fmt.Sprintf("%T", msg)))
	}
}

// requestID is the request id a lock request carries to lockd: the
// client's request number (the shipped client's ids are strings; the
// simulated client numbers its requests).
func requestID(n uint64) string { return strconv.FormatUint(n, 10) }

// script is the script call for c's request.
func (in *Instance) script(c *call) scripts.Call {
	p := in.cfg.Prefix
	switch m := c.msg.(type) {
	case lockservice.AcquireRequest:
		return scripts.AcquireCall(p, m.Resource, m.Client, requestID(m.Request), m.TTL, in.cfg.RequestMemory)
	case lockservice.RenewRequest:
		return scripts.RenewCall(p, m.Resource, m.Client, m.Token, m.TTL, in.cfg.RequestMemory)
	case heldRequest:
		call, _ := scripts.HeldCall(p, m.Resource, m.Client, requestID(m.Request), in.cfg.RequestMemory)
		return call
	case lockservice.ReleaseRequest:
		id := m.RequestID
		if id == "" {
			id = requestID(m.Request)
		}
		return scripts.ReleaseCall(p, m.Resource, m.Client, m.Token, id)
	}
	panic(fmt.Sprintf("lockdsim: no script for %T", c.msg))
}

// eval sends c's script to Redis and gives it up after the timeout.
func (in *Instance) eval(c *call) {
	in.next++
	id := in.next
	in.calls[id] = c
	c.sent = in.env.Clock().Monotonic()
	s := in.script(c)
	in.env.Send(in.cfg.Redis, Eval{ID: id, Script: s.Script, Keys: s.Keys, Args: s.Args})
	c.timer = in.env.Clock().AfterFunc(in.cfg.Timeout, func() {
		if in.calls[id] == c {
			delete(in.calls, id)
			in.env.Log().LogAttrs(context.Background(), slog.LevelInfo, "lockd.redis-timeout", slog.Uint64("req", c.request))
		}
	})
}

// reply answers the call Redis replied to.
func (in *Instance) reply(m EvalReply) {
	c, ok := in.calls[m.ID]
	if !ok {
		return // given up, or from before a restart
	}
	delete(in.calls, m.ID)
	c.timer.Stop()
	rep := lockservice.LockReply{Request: c.request}
	if m.Err != "" {
		rep.Status, rep.Err = lockservice.Invalid, "lockd: redis: "+m.Err
		in.env.Send(c.from, rep)
		return
	}
	switch req := c.msg.(type) {
	case lockservice.AcquireRequest:
		res, _ := m.Value.([]any)
		a, err := scripts.ParseAcquire(res)
		switch {
		case err != nil:
			rep.Status, rep.Err = lockservice.Invalid, err.Error()
		case a.Granted:
			if a.TTL == 0 {
				in.cfg.Marks.Hit(coverage.LockdRequestRemembered)
			}
			rep.Status, rep.Token, rep.TTL = lockservice.Granted, a.Token, a.TTL
			if req.Wait > 0 {
				// The attempt that granted reached Redis no sooner than
				// it was sent.
				rep.Waited = c.sent - c.start
			}
		case in.waitAgain(c, req, a.Left):
			return
		case a.Holder == req.Client:
			// Held by the asker itself, under another request id (a lease
			// it gave up without releasing): lockd answers held, which
			// the fenced-mutex model (S7) does not know — there a
			// holder's fresh attempt is granted its own lease. The
			// client hears an answer of unknown outcome and backs off as
			// for busy.
			rep.Status = lockservice.Overloaded
		default:
			if in.settle(c, req) {
				return
			}
			rep.Status = lockservice.Busy
		}
	case heldRequest:
		rep.Status = lockservice.Busy
		if tok, err := scripts.ParseHeld(m.Value); err != nil {
			rep.Status, rep.Err = lockservice.Invalid, err.Error()
		} else if tok != 0 {
			in.cfg.Marks.Hit(coverage.LockdHeldSettled)
			rep.Status, rep.Token = lockservice.Granted, tok // a copy's grant, no time left
		}
	case lockservice.RenewRequest:
		rep.Status = lockservice.NotHolder
		if n, _ := m.Value.(int64); n == 1 {
			rep.Status, rep.Token, rep.TTL = lockservice.Renewed, req.Token, req.TTL
		}
	case lockservice.ReleaseRequest:
		rep.Status = lockservice.NotHolder
		if n, _ := m.Value.(int64); n == 1 {
			rep.Status = lockservice.Released
		}
	}
	in.env.Send(c.from, rep)
}

// heldRequest is an acquire being settled as held (scripts.Held).
type heldRequest struct{ lockservice.AcquireRequest }

// settle settles c's acquire as held before it is answered (as
// lockd.Backend.Acquire does) and reports whether it sent the script; the
// answer comes with its reply.
func (in *Instance) settle(c *call, req lockservice.AcquireRequest) bool {
	if _, ok := scripts.HeldCall(in.cfg.Prefix, req.Resource, req.Client, requestID(req.Request), in.cfg.RequestMemory); !ok {
		return false
	}
	in.eval(&call{from: c.from, msg: heldRequest{req}, request: c.request})
	return true
}

// waitAgain schedules a waiting acquire's next attempt, if its wait has
// time left: after a jittered backoff, never past the lease's reported end
// (left) or the wait's.
func (in *Instance) waitAgain(c *call, req lockservice.AcquireRequest, left time.Duration) bool {
	rest := req.Wait - (in.env.Clock().Monotonic() - c.start)
	if req.Wait <= 0 || rest <= 0 {
		return false
	}
	b := c.backoff
	d := min(b/2+time.Duration(in.env.Rand().Int64N(int64(b/2)+1)), left+time.Millisecond, rest)
	c.backoff = min(2*b, 32*time.Millisecond)
	in.env.Clock().AfterFunc(d, func() { in.eval(c) })
	return true
}
