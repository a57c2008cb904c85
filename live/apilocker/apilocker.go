// Package apilocker is the liveclient.Locker of fencesim's HTTP lock API
// (package lockapi), which both the reference (fencesim-node) and lockd
// (fencesim-lockd) serve: cmd/fencesim-liveclient runs it.
//
// Acquire "tries once" as the Locker contract asks: one request id, sent
// to the endpoints in turn (from the one that answered last) while they
// answer "not the leader", "overloaded", "unavailable" or nothing, at
// most a few rounds within the context. Retrying one request id is
// idempotent in the API (the same client and request id get the same
// token back), so the one logical acquire takes effect at most once. A
// redirect's Location is not followed: it names the leader's own address,
// which would bypass this client's fault proxy; the next endpoint is
// tried instead.
package apilocker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/lockapi"
)

// Locker talks to the lock API's instances.
type Locker struct {
	client    string
	endpoints []string
	http      *http.Client
	prefix    string
	seq       atomic.Uint64

	mu        sync.Mutex
	preferred int
}

// Open returns a Locker for cfg's endpoints (http://host:port URLs).
func Open(cfg liveclient.Config) (liveclient.Locker, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("apilocker: no endpoints")
	}
	for _, e := range cfg.Endpoints {
		if u, err := url.Parse(e); err != nil || u.Host == "" || u.Scheme != "http" {
			return nil, fmt.Errorf("apilocker: endpoint %q is not http://host:port", e)
		}
	}
	if !lockapi.ValidName(cfg.Client, lockapi.MaxNameLen) {
		return nil, fmt.Errorf("apilocker: client name %q is not a valid lock API name", cfg.Client)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	return &Locker{client: cfg.Client, endpoints: cfg.Endpoints, prefix: cfg.Client + "-" + hex.EncodeToString(rnd[:]) + "-",
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Acquire implements liveclient.Locker.
func (l *Locker) Acquire(ctx context.Context, resource string, ttl time.Duration) (uint64, error) {
	id := l.prefix + fmt.Sprint(l.seq.Add(1))
	var lease lockapi.LeaseResponse
	err := l.do(ctx, resource, "acquire", lockapi.AcquireRequest{Client: l.client, TTLms: ttl.Milliseconds(), RequestID: id}, &lease)
	if err != nil {
		return 0, err
	}
	// Token 0: a service without fencing tokens (a target that is not
	// Fenced); the harness numbers such grants itself, and records a
	// fenced target's grant without a token as of unknown outcome.
	return uint64(lease.Token), nil
}

// Renew implements liveclient.Locker.
func (l *Locker) Renew(ctx context.Context, resource string, token uint64, ttl time.Duration) error {
	return l.do(ctx, resource, "renew", lockapi.RenewRequest{Client: l.client, Token: lockapi.Token(token), TTLms: ttl.Milliseconds()}, nil)
}

// Release implements liveclient.Locker.
func (l *Locker) Release(ctx context.Context, resource string, token uint64) error {
	return l.do(ctx, resource, "release", lockapi.ReleaseRequest{Client: l.client, Token: lockapi.Token(token)}, nil)
}

// Close implements liveclient.Locker.
func (l *Locker) Close() error {
	l.http.CloseIdleConnections()
	return nil
}

// rounds bounds the passes over the endpoints of one operation.
const rounds = 3

// do sends one operation until an endpoint answers it definitively.
func (l *Locker) do(ctx context.Context, resource, op string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	l.mu.Lock()
	start := l.preferred
	l.mu.Unlock()
	var last error
	n := len(l.endpoints)
	for i := 0; i < rounds*n; i++ {
		if ctx.Err() != nil {
			break
		}
		k := (start + i) % n
		status, eb, b, err := l.post(ctx, l.endpoints[k]+"/v1/locks/"+url.PathEscape(resource)+"/"+op, payload)
		if err != nil {
			last = err
			continue
		}
		switch {
		case status == http.StatusOK:
			l.mu.Lock()
			l.preferred = k
			l.mu.Unlock()
			if out != nil {
				return json.Unmarshal(b, out)
			}
			return nil
		case status == http.StatusConflict && eb.Error == lockapi.CodeHeld:
			return fmt.Errorf("%w: %s", liveclient.ErrBusy, eb.Message)
		case status == http.StatusConflict && eb.Error == lockapi.CodeNotHolder:
			return fmt.Errorf("%w: %s", liveclient.ErrNotHolder, eb.Message)
		case status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect ||
			status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			last = fmt.Errorf("%s: %d %s", l.endpoints[k], status, eb.Error)
			if i%n == n-1 { // a whole round refused: let an election finish
				sleep(ctx, 50*time.Millisecond)
			}
			continue
		default:
			return fmt.Errorf("apilocker: %s: %d %s: %s", op, status, eb.Error, eb.Message)
		}
	}
	if last == nil {
		last = ctx.Err()
	}
	return fmt.Errorf("apilocker: %s: no definitive answer (outcome unknown): %v", op, last)
}

func (l *Locker) post(ctx context.Context, u string, payload []byte) (int, lockapi.ErrorResponse, []byte, error) {
	var eb lockapi.ErrorResponse
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader(payload))
	if err != nil {
		return 0, eb, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return 0, eb, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, eb, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		if json.Unmarshal(b, &eb) != nil {
			eb.Message = strings.TrimSpace(string(b))
		}
	}
	return resp.StatusCode, eb, b, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
