package lockclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/lockservice"
	simclient "github.com/fencesim/fencesim/lockservice/lockclient"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realclock"
)

// Lock is one acquire of a resource and, once granted, the lease: the
// simulator's lock state machine (lockservice/lockclient.Lock) on an
// executor of its own, with this package as its transport.
type Lock struct {
	c         *Client
	resource  string
	ttl       time.Duration
	cfg       lockservice.ClientConfig // the state machine's
	servers   []string                 // the state machine's server i is servers[i]
	reqPrefix string                   // of the lockapi request_ids
	origin    time.Time
	ex        serial
	env       *env
	lost      chan struct{}
	acquired  chan error    // the acquire's outcome, once
	released  chan struct{} // closed when the release ended (relErr)

	// Written before acquired or released is signalled; read after.
	token  uint64
	mac    string // the service's MAC of token (TokenMAC), if it signs
	relErr error

	// On the executor only.
	sm         *simclient.Lock
	cancel     context.CancelFunc // the attempt in flight
	gen        uint64             // numbers attempts: only the latest one's outcome counts
	last       *StatusError       // the latest refusal
	unanswered uint64             // the latest request an attempt of which got no answer
	releasing  bool
	macs       map[uint64]string // token → its MAC, as the grants came
	over       bool              // acquire failed, release ended, or given up
}

func (c *Client) newLock(resource string, ttl, wait time.Duration) *Lock {
	l := &Lock{
		c: c, resource: resource, ttl: ttl, servers: c.servers(),
		reqPrefix: c.idPrefix + strconv.FormatUint(c.seq.Add(1), 16) + "-",
		lost:      make(chan struct{}), acquired: make(chan error, 1), released: make(chan struct{}),
	}
	l.origin = time.Now()
	l.env = &env{l: l, clock: realclock.New(l.ex.post), rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	ids := make([]process.NodeID, len(l.servers))
	for i := range ids {
		ids[i] = process.NodeID(i)
	}
	cfg := lockservice.ClientConfig{
		Name: c.cfg.Name, Servers: ids, Resource: resource, TTL: ttl,
		DriftBoundPPM: c.cfg.DriftBoundPPM, Margin: c.cfg.Margin, RequestTimeout: c.cfg.RequestTimeout,
		BackoffMin: c.cfg.BackoffMin, BackoffMax: c.cfg.BackoffMax, Wait: wait,
	}
	if f := c.cfg.Observe; f != nil {
		cfg.Observer = observer{l: l, f: f}
	}
	l.cfg = cfg
	l.sm = simclient.NewLock(cfg, nil, handler{l})
	return l
}

// TryAcquire makes one acquire request (retried on no answer, redirects
// and overload until ctx ends) and returns the lock, or an error matching
// ErrHeld when another lease holds the resource.
func (c *Client) TryAcquire(ctx context.Context, resource string, ttl time.Duration) (*Lock, error) {
	return c.acquire(ctx, resource, ttl, true)
}

// Acquire waits until it holds resource or ctx ends. Each request waits at
// the service for up to Config.Wait (or until ctx's deadline) to be
// granted as the lock frees; answered held, it asks again after a jittered
// backoff (no later than the lease's end the service reports), each time
// with a new request.
func (c *Client) Acquire(ctx context.Context, resource string, ttl time.Duration) (*Lock, error) {
	return c.acquire(ctx, resource, ttl, false)
}

// httpReleaseAttempts bounds a release's sends over HTTP. The simulator's
// client gives up after 3 (its lease then expires on its own); a real
// caller's release meets a killed leader and an election more often than
// not in a deploy, and its context bounds the wait, so it keeps trying.
const httpReleaseAttempts = 20

func (c *Client) acquire(ctx context.Context, resource string, ttl time.Duration, once bool) (*Lock, error) {
	var wait time.Duration
	if !once {
		remaining := time.Duration(-1)
		if dl, ok := ctx.Deadline(); ok {
			remaining = dl.Sub(time.Now())
		}
		wait = simclient.WaitWithin(c.cfg.Wait, remaining, c.cfg.BackoffMin)
	}
	l := c.newLock(resource, ttl, wait)
	l.ex.post(func() {
		l.sm.SetOptions(simclient.Options{TryOnce: once, KeepRequestWhenOverloaded: true, RedirectLimit: 3,
			ReleaseAttempts: httpReleaseAttempts, RetryOverloadedRelease: true})
		l.sm.Start(l.env)
		l.sm.Acquire()
	})
	select {
	case err := <-l.acquired:
		if err != nil {
			return nil, err
		}
		return l, nil
	case <-ctx.Done():
	}
	var last error
	l.ex.call(func() {
		if l.last != nil {
			last = l.last
		}
		if l.sm.Held() { // granted as ctx ended: give it back
			l.startRelease()
			return
		}
		l.sm.Stop()
		l.end()
	})
	return nil, fmt.Errorf("lockclient: acquire %s: %w (last answer: %v)", resource, ctx.Err(), last)
}

// observer hands the state machine's calls and answers to Config.Observe.
type observer struct {
	l *Lock
	f func(Event)
}

func (o observer) Observe(e lockservice.Event) {
	if e.Kind != lockservice.EvCall && e.Kind != lockservice.EvReturn {
		return // the belief's end is the Lock's Lost
	}
	ev := Event{Resource: o.l.resource, Op: e.Op.String(), Request: e.Request, Answer: e.Kind == lockservice.EvReturn, Token: e.Token}
	if ev.Answer {
		ev.Status = e.Status.String()
	}
	if e.Op != lockservice.OpAcquire {
		ev.Token = o.l.sm.Token() // a refusal's reply names none: the lease's
	}
	o.f(ev)
}

// handler hears the state machine, on the executor.
type handler struct{ l *Lock }

func (h handler) Granted() {
	h.l.token = h.l.sm.Token()
	h.l.mac = h.l.macs[h.l.token]
	h.l.acquired <- nil
}

func (h handler) Failed() {
	l := h.l
	var err error = l.last
	if l.last == nil {
		err = errors.New("lockclient: acquire refused")
	}
	l.end()
	l.acquired <- err
}

// Lost: the watchdog's deadline passed without a renewal, or the service
// said the lease is not this client's any more.
func (h handler) Lost(string) {
	h.l.closeLost()
}

func (h handler) Released() {
	l := h.l
	switch l.sm.ReleaseResult() {
	case lockservice.Released:
	case 0:
		l.relErr = fmt.Errorf("lockclient: release %s: no answer; the lease expires on its own", l.resource)
	default:
		l.relErr = l.last
		if l.last == nil {
			l.relErr = errors.New("lockclient: release refused")
		}
	}
	l.end()
}

// end closes the lock down (on the executor): no more HTTP calls, Lost
// closed, Release answered.
func (l *Lock) end() {
	if l.over {
		return
	}
	l.over = true
	if l.cancel != nil {
		l.cancel() // the attempt in flight
	}
	l.closeLost()
	close(l.released)
}

func (l *Lock) closeLost() {
	select {
	case <-l.lost:
	default:
		close(l.lost)
	}
}

// Token is the fencing token: send it with every write to the fenced
// resource.
func (l *Lock) Token() uint64 { return l.token }

// TokenMAC is the lock service's MAC of the token, "" if it signs none;
// a store that verifies tokens (fencesim-store with a fencing key) wants
// it with the token and the holder: SetFencingHeaders sets all three.
func (l *Lock) TokenMAC() string { return l.mac }

// SetFencingHeaders sets the fenced store's headers of a write under this
// lock: Fencing-Token, and Fencing-Holder and Fencing-Token-Mac when the
// service signs its tokens.
func (l *Lock) SetFencingHeaders(h http.Header) {
	h.Set("Fencing-Token", strconv.FormatUint(l.token, 10))
	if l.mac != "" {
		h.Set(fencemac.HeaderHolder, l.c.cfg.Name)
		h.Set(fencemac.HeaderMAC, l.mac)
	}
}

// Resource is the locked resource's name.
func (l *Lock) Resource() string { return l.resource }

// Lost is closed when the lease may be gone: the watchdog's deadline
// passed without a renewal, the service said this client no longer holds
// it, or it was released. After that, no write may use the token.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Deadline is the watchdog's current limit: the state machine's, on the
// machine's clock.
func (l *Lock) Deadline() time.Time {
	var d time.Duration
	l.ex.call(func() { d = l.sm.Deadline() })
	return l.origin.Add(d)
}

func (l *Lock) startRelease() {
	if l.releasing || l.over {
		return
	}
	l.releasing = true
	l.sm.Release()
}

// Release stops renewal and frees the lease, retrying a release that gets
// no answer a few times, as the simulator's client does (then the lease
// expires on its own). Lost is closed afterwards either way. An error
// matching ErrNotHolder means the lease had already expired or been taken
// over; "not holder" for a retry after an unanswered attempt is success
// (that attempt released).
func (l *Lock) Release(ctx context.Context) error {
	l.ex.post(l.startRelease)
	select {
	case <-l.released:
		return l.relErr
	case <-ctx.Done():
	}
	l.ex.call(func() {
		if !l.over {
			l.sm.Stop()
			l.relErr = fmt.Errorf("lockclient: release %s: %w", l.resource, ctx.Err())
			l.end()
		}
	})
	return l.relErr
}
