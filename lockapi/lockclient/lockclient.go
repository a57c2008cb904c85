// Package lockclient is the Go client of the HTTP lock API (package
// lockapi): acquire with retries, automatic renewal, and a watchdog that
// says when the lease may be gone.
//
//	c, _ := lockclient.New(lockclient.Config{Endpoints: []string{"http://127.0.0.1:7070"}})
//	lock, err := c.Acquire(ctx, "invoice-42", 10*time.Second)
//	...
//	select {
//	case <-lock.Lost(): // stop: a write now could be stale
//	default: store.Put(key, value, lock.Token())
//	}
//	lock.Release(ctx)
//
// It follows the rules of the simulator's client (lockservice.Client), so
// what the simulator proves about them holds here:
//   - A retry of a request keeps its request id (across network errors,
//     307 redirects to the leader and overload), so a grant whose reply
//     was lost comes back as the same token, never as a second lease.
//   - The watchdog deadline is request start + TTL·(1−ρ) − margin, start
//     being when the first attempt of the request that (re)granted the
//     lease was sent: the server's lease began no earlier, and the
//     client's clock may run up to ρ slower than the server's.
//   - A definitive answer (held, not holder) ends a request; the next
//     attempt is a new request with a new id.
//   - Overload (429/503) is retried after the server's Retry-After plus
//     jitter, and otherwise with jittered exponential backoff.
//
// Unlike the simulator's client it runs on goroutines and the real clock:
// one renewer goroutine per held lock.
package lockclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/lockapi"
)

// Config configures a Client. Zero fields take defaults.
type Config struct {
	// Endpoints are the base URLs of the lock service's instances
	// ("http://host:port"); the client starts with the first, moves to the
	// next on network errors and 503, and follows 307 to the leader.
	Endpoints []string
	// Name identifies this client to the service (owner checks); default
	// a random one. [A-Za-z0-9._-], at most 128 characters.
	Name string
	// HTTP is the transport; its redirects are handled here, not by it.
	HTTP *http.Client
	// DriftBoundPPM is ρ, the assumed bound on the clock rate difference
	// between client and server (default 1000 = 0.1%).
	DriftBoundPPM int64
	// Margin is subtracted from every lease (default 10 ms).
	Margin time.Duration
	// RequestTimeout bounds one attempt (default 2 s).
	RequestTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential backoff
	// (defaults 10 ms and 1 s).
	BackoffMin, BackoffMax time.Duration
}

// Client talks to one lock service; safe for concurrent use.
type Client struct {
	cfg      Config
	http     *http.Client
	endpoint atomic.Pointer[string] // where requests go now
	next     atomic.Uint64          // endpoint rotation
	idPrefix string
	seq      atomic.Uint64
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("lockclient: no Endpoints")
	}
	for _, e := range cfg.Endpoints {
		if u, err := url.Parse(e); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("lockclient: endpoint %q is not an http(s)://host:port URL", e)
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	if cfg.Name == "" {
		cfg.Name = "c-" + hex.EncodeToString(rnd[:])
	}
	if !lockapi.ValidName(cfg.Name, lockapi.MaxNameLen) {
		return nil, fmt.Errorf("lockclient: Name %q must be 1..%d characters of [A-Za-z0-9._-]", cfg.Name, lockapi.MaxNameLen)
	}
	if cfg.DriftBoundPPM == 0 {
		cfg.DriftBoundPPM = 1000
	}
	if cfg.Margin == 0 {
		cfg.Margin = 10 * time.Millisecond
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = 10 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = time.Second
	}
	hc := http.Client{Transport: sharedTransport()}
	if cfg.HTTP != nil {
		hc = *cfg.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{cfg: cfg, http: &hc, idPrefix: hex.EncodeToString(rnd[:4]) + "-"}
	c.endpoint.Store(&cfg.Endpoints[0])
	return c, nil
}

// transport is shared by every Client of the process that brings no
// http.Client of its own, as http.DefaultTransport is: its connections
// are pooled across clients. Unlike the default transport it keeps up to
// 256 idle connections per host; with 2, more concurrent locks than that
// would open and close a TCP connection per request (and run out of
// ephemeral ports under load).
var (
	transportOnce sync.Once
	transport     *http.Transport
)

// sharedTransport is the transport of Clients without an http.Client of
// their own. (HTTP/2 without TLS was measured and dropped: one multiplexed
// connection cost 30–40% of the cycles/s of pooled HTTP/1.1 on loopback.)
func sharedTransport() *http.Transport {
	transportOnce.Do(func() {
		transport = http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 256
	})
	return transport
}

// Name is the client's name as the service sees it.
func (c *Client) Name() string { return c.cfg.Name }

// StatusError is a definitive non-2xx answer.
type StatusError struct {
	Status int
	Body   lockapi.ErrorResponse
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("lock service: %d %s: %s", e.Status, e.Body.Error, e.Body.Message)
}

// ErrHeld matches (errors.Is) a *StatusError for a resource another lease
// holds; ErrNotHolder one for a renew or release of a lease not held.
var (
	ErrHeld      = errors.New("held")
	ErrNotHolder = errors.New("not holder")
)

// Is makes errors.Is(err, ErrHeld) and errors.Is(err, ErrNotHolder) work.
func (e *StatusError) Is(target error) bool {
	return target == ErrHeld && e.Body.Error == lockapi.CodeHeld ||
		target == ErrNotHolder && e.Body.Error == lockapi.CodeNotHolder
}

// call sends one request until it gets a definitive answer or ctx ends,
// retrying the same body (so the same request id) on network errors, 307,
// 429 and 503. start is when the first attempt was sent.
func (c *Client) call(ctx context.Context, method, path string, body, out any) (start time.Time, err error) {
	var payload []byte
	if body != nil {
		if payload, err = json.Marshal(body); err != nil {
			return time.Time{}, err
		}
	}
	start = time.Now()
	backoff := c.cfg.BackoffMin
	redirects := 0
	for attempt := 0; ; attempt++ {
		base := *c.endpoint.Load()
		status, hdr, resp, err := c.attempt(ctx, method, base+path, payload)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return start, fmt.Errorf("lockclient: %s %s: %w (last attempt: %v)", method, path, ctx.Err(), err)
			}
			c.rotate(base)
			wait = c.jitter(backoff)
		case status == http.StatusOK:
			if out != nil {
				if err := json.Unmarshal(resp, out); err != nil {
					return start, fmt.Errorf("lockclient: %s %s: bad reply %q: %w", method, path, resp, err)
				}
			}
			return start, nil
		case status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect:
			if leader := leaderBase(hdr.Get("Location")); leader != "" && redirects < 3 {
				c.endpoint.Store(&leader)
				redirects++
				continue // same request, now to the leader
			}
			redirects = 0
			wait = c.jitter(backoff)
		case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
			if status == http.StatusServiceUnavailable {
				c.rotate(base) // draining or cut off: another instance may serve
			}
			wait = c.jitter(backoff)
			if hint := retryAfter(hdr, resp); hint > 0 {
				// Honour the server: never sooner than it asked, plus up
				// to half again so shed clients do not return in step.
				wait = hint + time.Duration(mrand.Int64N(int64(hint/2)+1))
			}
		default:
			se := &StatusError{Status: status}
			if json.Unmarshal(resp, &se.Body) != nil {
				se.Body.Message = string(resp)
			}
			return start, se
		}
		backoff = min(backoff*2, c.cfg.BackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return start, fmt.Errorf("lockclient: %s %s: %w after %d attempts", method, path, ctx.Err(), attempt+1)
		case <-t.C:
		}
	}
}

func (c *Client) attempt(ctx context.Context, method, url string, payload []byte) (int, http.Header, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// rotate moves to the next endpoint unless another request already moved
// away from base.
func (c *Client) rotate(base string) {
	cur := c.endpoint.Load()
	if *cur != base {
		return
	}
	n := c.next.Add(1)
	e := c.cfg.Endpoints[n%uint64(len(c.cfg.Endpoints))]
	c.endpoint.CompareAndSwap(cur, &e)
}

// jitter draws a wait in [d/2, d]: spread, but never much shorter.
func (c *Client) jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

// retryAfter is the server's hint: retry_after_ms in the body when
// present (finer), else the Retry-After header in seconds.
func retryAfter(h http.Header, body []byte) time.Duration {
	var e lockapi.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.RetryAfterMs > 0 {
		return time.Duration(e.RetryAfterMs) * time.Millisecond
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// leaderBase is scheme://host of a Location header.
func leaderBase(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func (c *Client) requestID() string {
	return c.idPrefix + strconv.FormatUint(c.seq.Add(1), 36)
}

// TryAcquire makes one acquire request (retried on network errors,
// redirects and overload until ctx ends) and returns the lock, or an error
// matching ErrHeld when another lease holds the resource.
func (c *Client) TryAcquire(ctx context.Context, resource string, ttl time.Duration) (*Lock, error) {
	req := lockapi.AcquireRequest{Client: c.cfg.Name, TTLms: ttl.Milliseconds(), RequestID: c.requestID()}
	var resp lockapi.LeaseResponse
	start, err := c.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(resource)+"/acquire", req, &resp)
	if err != nil {
		return nil, err
	}
	return c.newLock(resource, uint64(resp.Token), start, time.Duration(resp.TTLms)*time.Millisecond), nil
}

// Acquire waits until it holds resource or ctx ends; while the resource is
// held it polls with jittered backoff, each poll a new request.
func (c *Client) Acquire(ctx context.Context, resource string, ttl time.Duration) (*Lock, error) {
	backoff := c.cfg.BackoffMin
	for {
		l, err := c.TryAcquire(ctx, resource, ttl)
		var se *StatusError
		if !errors.As(err, &se) || se.Body.Error != lockapi.CodeHeld {
			return l, err
		}
		wait := c.jitter(backoff)
		if hint := time.Duration(se.Body.RetryAfterMs) * time.Millisecond; hint > 0 && hint < wait {
			wait = hint // the lease ends sooner than our backoff
		}
		backoff = min(backoff*2, c.cfg.BackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lockclient: acquire %s: %w (last: %v)", resource, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Lock is a held lease: its token, a renewer keeping it, and a watchdog.
type Lock struct {
	c        *Client
	resource string
	token    uint64
	ttl      time.Duration

	mu       sync.Mutex
	deadline time.Time // the watchdog's limit (monotonic)
	watchdog *time.Timer
	lost     chan struct{}
	lostOnce sync.Once
	ctx      context.Context // ends when renewal must stop (release or loss)
	stop     context.CancelFunc
	done     chan struct{} // renewer exited
}

func (c *Client) newLock(resource string, token uint64, start time.Time, ttl time.Duration) *Lock {
	l := &Lock{c: c, resource: resource, token: token, ttl: ttl, lost: make(chan struct{}), done: make(chan struct{})}
	l.ctx, l.stop = context.WithCancel(context.Background())
	l.mu.Lock()
	l.deadline = start.Add(l.safe(ttl))
	l.watchdog = time.AfterFunc(time.Until(l.deadline), l.fire)
	l.mu.Unlock()
	go l.renewer(start)
	return l
}

// safe is how much of a lease of ttl the client may use: ttl·(1−ρ) − margin.
func (l *Lock) safe(ttl time.Duration) time.Duration {
	return ttl - time.Duration(int64(ttl)/1_000_000*l.c.cfg.DriftBoundPPM) - l.c.cfg.Margin
}

// Token is the fencing token: send it with every write to the fenced
// resource.
func (l *Lock) Token() uint64 { return l.token }

// Resource is the locked resource's name.
func (l *Lock) Resource() string { return l.resource }

// Lost is closed when the lease may be gone: the watchdog's deadline
// passed without a renewal, the service said this client no longer holds
// it, or it was released. After that, no write may use the token.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Deadline is the watchdog's current limit.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *Lock) lose() {
	l.lostOnce.Do(func() { close(l.lost) })
	l.stop()
	l.mu.Lock()
	l.watchdog.Stop()
	l.mu.Unlock()
}

// fire is the watchdog: lose the lock unless a renewal moved the
// deadline since the timer was armed.
func (l *Lock) fire() {
	l.mu.Lock()
	if d := time.Until(l.deadline); d > 0 {
		l.watchdog.Reset(d)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose()
}

// extend moves the deadline for a renewal whose first attempt was sent at
// start.
func (l *Lock) extend(start time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := start.Add(l.safe(ttl)); d.After(l.deadline) {
		l.deadline = d
	}
}

// renewer renews at a third of the lease after each grant, retrying a
// failed renewal (same body) until the watchdog deadline; a "not holder"
// answer loses the lock at once.
func (l *Lock) renewer(granted time.Time) {
	defer close(l.done)
	for {
		t := time.NewTimer(time.Until(granted.Add(l.ttl / 3)))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// Release aborts an in-flight renewal; the watchdog's deadline
		// bounds its retries.
		ctx, cancel := context.WithDeadline(l.ctx, l.Deadline())
		var resp lockapi.LeaseResponse
		start, err := l.c.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(l.resource)+"/renew",
			lockapi.RenewRequest{Client: l.c.cfg.Name, Token: lockapi.Token(l.token), TTLms: l.ttl.Milliseconds()}, &resp)
		cancel()
		if err != nil {
			// Not holder, or no answer before the deadline: either way the
			// lease may be gone.
			l.lose()
			return
		}
		l.extend(start, time.Duration(resp.TTLms)*time.Millisecond)
		granted = start
	}
}

// Release stops renewal and frees the lease (retried until ctx ends). Lost
// is closed afterwards either way. An error matching ErrNotHolder means
// the lease had already expired or been taken over.
func (l *Lock) Release(ctx context.Context) error {
	l.stop()
	<-l.done
	_, err := l.c.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(l.resource)+"/release",
		lockapi.ReleaseRequest{Client: l.c.cfg.Name, Token: lockapi.Token(l.token)}, nil)
	l.lose()
	return err
}
