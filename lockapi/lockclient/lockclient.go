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
// It is the simulator's lock client, not a copy of its rules: every Lock
// runs the state machine of lockservice/lockclient (the acquirer, the
// renewer, the watchdog and the release handler, as the simulator checks
// them) on a small serial executor with the machine's clock (realclock),
// and this package is only its transport. The state machine's requests
// become HTTP calls (its request ids become lockapi request_ids), and the
// answers go back to it as the replies it understands:
//
//	200                    Granted / Renewed / Released
//	307, 308 to a known    NotLeader naming that endpoint (retried there at once, same id)
//	409 held               Busy, with the lease's remaining time as a hint
//	409 not_holder         NotHolder
//	429                    Overloaded, with Retry-After as a hint (same id)
//	503                    NotLeader naming no one: the next endpoint, after Retry-After
//	other 4xx/5xx          Invalid: the acquire fails with a *StatusError
//	no answer              nothing, or NoAnswer for a refused or cut connection
//
// So what the simulator proves about the client holds here: a retry keeps
// its request id (across lost replies, redirects and overload), the
// watchdog closes Lost at request start + TTL·(1−ρ) − margin, renewals go
// out every TTL/3, and a release is retried a bounded number of times
// (after which the lease expires on its own).
package lockclient

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/lockapi"
)

// Config configures a Client. Zero fields take defaults.
type Config struct {
	// Endpoints are the base URLs of the lock service's instances
	// ("http://host:port"); a lock starts with the one that answered
	// last, moves to the next on no answer and 503, and follows 307 to
	// the leader.
	Endpoints []string
	// Name identifies this client to the service (owner checks); default
	// a random one. [A-Za-z0-9._-], at most 128 characters.
	Name string
	// HTTP is the transport; its redirects are handled here, not by it.
	// For an API served over TLS (https endpoints) with a private CA, give
	// one whose Transport's TLSClientConfig trusts it.
	HTTP *http.Client
	// BearerToken, if set, goes with every request (Authorization:
	// Bearer): the service's client token file maps it to this client's
	// identity, which must be Name.
	BearerToken string
	// DriftBoundPPM is ρ, the assumed bound on the clock rate difference
	// between client and server (default 1000 = 0.1%).
	DriftBoundPPM int64
	// Margin is subtracted from every lease (default 10 ms).
	Margin time.Duration
	// RequestTimeout: an acquire or release attempt unanswered for this
	// long is retried, same request id, at the next endpoint (default 2 s).
	RequestTimeout time.Duration
	// BackoffMin and BackoffMax bound the backoff after a refusal without
	// a server's hint, drawn uniformly between them (defaults 10 ms and
	// 1 s).
	BackoffMin, BackoffMax time.Duration
	// Wait is the longest one acquire request of Acquire waits at the
	// service for a held resource (wait_ms; default 5 s, which must not
	// exceed the server's MaxWait), capped by the context's deadline: the
	// service grants it as the lock frees instead of the client polling.
	// Negative: never wait, poll. TryAcquire never waits.
	Wait time.Duration
	// StayOnEndpoints: a redirect to an address outside Endpoints is not
	// followed; the next endpoint is tried at once instead (a leader
	// exists: one of the endpoints leads to it). For a client that reaches the service
	// through proxies, a load balancer or a NAT, where the addresses the
	// service names (its own) are not the client's way in, and a request
	// sent there would bypass the path the operator chose.
	StayOnEndpoints bool
	// Observe, if set, hears every lock operation the client makes, as
	// the service answered it (the simulator's recorder hears the same
	// from the same state machine): the call of an acquire request (once
	// per request id, however many attempts carry it), of a renewal and
	// of a release, and each answer that ends an attempt definitively
	// (not a redirect). An operation whose answer never comes has a call
	// and no answer: its outcome is unknown. It is called on the lock's
	// executor, in order; it must return quickly and must not call the
	// Lock.
	Observe func(Event)
}

// Event is one call or answer of a lock operation (Config.Observe).
type Event struct {
	Resource string
	Op       string // "acquire", "renew" or "release"
	// Request numbers the lock's requests: a call and its answers share
	// it.
	Request uint64
	// Answer: false for the call, true for an answer.
	Answer bool
	// Status is the answer as the service gave it: "granted", "busy",
	// "renewed", "released", "not-holder", "overloaded", "stale",
	// "invalid" (the names of the checker's lock outcomes). The
	// client's own reading may differ: Release reports success for a
	// "not-holder" that follows an unanswered attempt.
	Status string
	// Token is the fencing token: of a granted acquire's answer, and of
	// the lease every renewal and release (call and answer) is for.
	Token uint64
}

// Client talks to one lock service; safe for concurrent use.
type Client struct {
	cfg      Config
	http     *http.Client
	idPrefix string
	seq      atomic.Uint64 // numbers the client's locks, for request ids

	mu        sync.Mutex
	endpoints []string // Config.Endpoints, then leaders learned from redirects
	preferred int      // index in endpoints of the one that answered last
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
	if cfg.Wait == 0 {
		cfg.Wait = 5 * time.Second
	}
	hc := http.Client{Transport: sharedTransport()}
	if cfg.HTTP != nil {
		hc = *cfg.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{cfg: cfg, http: &hc, idPrefix: hex.EncodeToString(rnd[:4]) + "-", endpoints: slices.Clone(cfg.Endpoints)}
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

// servers returns the endpoints a new lock knows, the preferred one first
// (the state machine starts with its first server).
func (c *Client) servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(slices.Clone(c.endpoints[c.preferred:]), c.endpoints[:c.preferred]...)
}

// answered makes base, which just answered, where the next locks start.
func (c *Client) answered(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.endpoints, base); i >= 0 {
		c.preferred = i
		return
	}
	c.preferred = len(c.endpoints)
	c.endpoints = append(c.endpoints, base) // a leader learned from a redirect
}

// StatusError is a definitive non-2xx answer.
type StatusError struct {
	Status int
	Body   lockapi.ErrorResponse
	// Unanswered: an earlier attempt of the same request got no answer,
	// so it may have taken effect (a release answered "not holder" after
	// it had in fact released).
	Unanswered bool
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
