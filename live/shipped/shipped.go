// Package shipped is the liveclient.Locker of fencesim's HTTP lock API
// (package lockapi), which both the reference (fencesim-node) and lockd
// (fencesim-lockd) serve: the Go client we ship, lockapi/lockclient,
// behind the live protocol, so that a live run chaos-tests it — its
// request ids, its retries across the endpoints, its per-attempt
// deadline, its automatic renewals and its release handler.
// cmd/fencesim-liveclient runs it.
//
// The harness's commands map onto the client as an application's calls
// would:
//
//   - acquire is TryAcquire: one request id, retried across the
//     endpoints on no answer, redirects and overload until the command's
//     deadline; "held" is busy unless an attempt of the request went
//     unanswered (it may have been granted: unknown);
//   - renew is the lock's next automatic renewal (the client renews by
//     itself every TTL/3): the answer of the first renewal it sends
//     after the command came, unknown if that one goes unanswered;
//   - release is Release, answered as the service answered it (Observe),
//     not as the client reads it: a "not holder" to a retry after an
//     unanswered attempt is not_holder here.
//
// The clients stay on the harness's endpoints (StayOnEndpoints): a
// redirect names the leader's own address, which would bypass the
// client's fault proxy.
package shipped

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// Locker is the shipped client as a liveclient.Locker.
type Locker struct {
	c *lockclient.Client

	mu    sync.Mutex
	locks map[hold]*lease
}

// hold names one grant: renewals and releases carry its token.
type hold struct {
	resource string
	token    uint64
}

// lease is one granted lock and the renewals and releases Observe heard of
// it, in order.
type lease struct {
	lock    *lockclient.Lock
	events  []lockclient.Event
	changed chan struct{} // closed and replaced at every event
}

// Open returns a Locker for cfg's endpoints (http://host:port URLs).
func Open(cfg liveclient.Config) (liveclient.Locker, error) {
	l := &Locker{locks: map[hold]*lease{}}
	c, err := lockclient.New(lockclient.Config{Endpoints: cfg.Endpoints, Name: cfg.Client, StayOnEndpoints: true, Observe: l.observe})
	if err != nil {
		return nil, err
	}
	l.c = c
	return l, nil
}

// lease returns h's lease, made if new (an event may come before the
// acquire's caller records it).
func (l *Locker) lease(h hold) *lease {
	ls := l.locks[h]
	if ls == nil {
		ls = &lease{changed: make(chan struct{})}
		l.locks[h] = ls
	}
	return ls
}

func (l *Locker) observe(e lockclient.Event) {
	if e.Op == "acquire" {
		return // TryAcquire answers those
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.lease(hold{e.Resource, e.Token})
	ls.events = append(ls.events, e)
	close(ls.changed)
	ls.changed = make(chan struct{})
}

// Acquire implements liveclient.Locker.
func (l *Locker) Acquire(ctx context.Context, resource string, ttl time.Duration) (uint64, error) {
	lk, err := l.c.TryAcquire(ctx, resource, ttl)
	var se *lockclient.StatusError
	switch {
	case err == nil:
	case errors.As(err, &se) && errors.Is(se, lockclient.ErrHeld) && !se.Unanswered:
		return 0, fmt.Errorf("%w: %v", liveclient.ErrBusy, err)
	default:
		return 0, err
	}
	l.mu.Lock()
	l.lease(hold{resource, lk.Token()}).lock = lk
	l.mu.Unlock()
	return lk.Token(), nil
}

// answer waits for the answer of the first op call Observe hears for h
// after the events it had when called (once it has run start), until ctx
// ends or lost closes (nil: never). A second call before the first one's
// answer means the first went unanswered; an answer that is no verdict
// (not the leader, overloaded, stale) waits for the next call's.
func (l *Locker) answer(ctx context.Context, h hold, op string, lost <-chan struct{}, start func()) (string, error) {
	l.mu.Lock()
	ls := l.locks[h]
	if ls == nil || ls.lock == nil {
		l.mu.Unlock()
		return "", fmt.Errorf("shipped: no lock on %s with token %d", h.resource, h.token)
	}
	from := len(ls.events)
	l.mu.Unlock()
	if start != nil {
		start()
	}
	var req uint64
	called := false
	for {
		l.mu.Lock()
		for ; from < len(ls.events); from++ {
			e := ls.events[from]
			switch {
			case e.Op != op:
			case !e.Answer && called:
				l.mu.Unlock()
				return "", fmt.Errorf("shipped: %s %d got no answer (outcome unknown)", op, req)
			case !e.Answer:
				req, called = e.Request, true
			case called && e.Request == req && !definite(e.Status):
				called = false // not applied here (redirect, overload): the next one counts
			case called && e.Request == req:
				l.mu.Unlock()
				return e.Status, nil
			}
		}
		changed := ls.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-lost:
			lost = nil // what was heard before it still counts: look once more
			select {
			case <-changed:
			default:
				return "", fmt.Errorf("shipped: the lock on %s was lost with no answer to its %s (outcome unknown)", h.resource, op)
			}
		case <-ctx.Done():
			return "", fmt.Errorf("shipped: %s: %w (outcome unknown)", op, ctx.Err())
		}
	}
}

// Renew implements liveclient.Locker: the answer to the lock's next
// automatic renewal.
func (l *Locker) Renew(ctx context.Context, resource string, token uint64, _ time.Duration) error {
	h := hold{resource, token}
	l.mu.Lock()
	var lost <-chan struct{}
	if ls := l.locks[h]; ls != nil && ls.lock != nil {
		lost = ls.lock.Lost()
	}
	l.mu.Unlock()
	st, err := l.answer(ctx, h, "renew", lost, nil)
	return outcome("renew", st, err, "renewed")
}

// Release implements liveclient.Locker.
func (l *Locker) Release(ctx context.Context, resource string, token uint64) error {
	h := hold{resource, token}
	l.mu.Lock()
	ls := l.locks[h]
	l.mu.Unlock()
	if ls == nil || ls.lock == nil {
		return fmt.Errorf("shipped: no lock on %s with token %d", resource, token)
	}
	var relErr error
	done := make(chan struct{})
	st, err := l.answer(ctx, h, "release", done, func() {
		go func() {
			relErr = ls.lock.Release(ctx)
			close(done)
		}()
	})
	<-done // Release is bounded by ctx
	if err != nil && relErr != nil {
		err = fmt.Errorf("%w (%v)", err, relErr)
	}
	l.mu.Lock()
	delete(l.locks, h)
	l.mu.Unlock()
	return outcome("release", st, err, "released")
}

// definite reports whether st is a verdict on the operation: done,
// refused, or invalid.
func definite(st string) bool {
	switch st {
	case "renewed", "released", "not-holder", "invalid":
		return true
	}
	return false
}

// outcome is the Locker's error for the service's answer st to op.
func outcome(op, st string, err error, ok string) error {
	switch {
	case err != nil:
		return err
	case st == ok:
		return nil
	case st == "not-holder":
		return liveclient.ErrNotHolder
	}
	return fmt.Errorf("shipped: %s answered %s (outcome unknown)", op, st)
}

// Close implements liveclient.Locker.
func (l *Locker) Close() error { return nil }
