package lockclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// serveWrapped serves the API over m behind wrap (a fault injector) on a
// free loopback port.
func serveWrapped(t *testing.T, m lockapi.Backend, wrap func(http.Handler) http.Handler) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: wrap(lockapi.NewServer(m, lockapi.Config{}).Handler()), ReadHeaderTimeout: time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func newClient(t *testing.T, endpoints ...string) *lockclient.Client {
	c, err := lockclient.New(lockclient.Config{Endpoints: endpoints, Name: "tester", BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestAcquireRenewRelease(t *testing.T) {
	m := lockapitest.NewMem()
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	c := newClient(t, base)
	l, err := c.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, base).TryAcquire(ctxT(t, 5*time.Second), "r", time.Second); !errors.Is(err, lockclient.ErrHeld) {
		t.Fatalf("second client: %v, want ErrHeld", err)
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost open after Release")
	}
	l2, err := c.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil || l2.Token() <= l.Token() {
		t.Fatalf("second acquire: %v token %d after %d", err, l2.Token(), l.Token())
	}
	l2.Release(ctxT(t, 5*time.Second))
}

// TestAcquireWaitsForRelease: Acquire polls while another holds the lock
// and gets it once released.
func TestAcquireWaitsForRelease(t *testing.T) {
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{})
	a := newClient(t, base)
	b, err := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, func() { la.Release(context.Background()) })
	lb, err := b.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil || lb.Token() <= la.Token() {
		t.Fatalf("waiting acquire: %v", err)
	}
	lb.Release(ctxT(t, 5*time.Second))
}

// recorder keeps the request ids of acquires.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) wrap(next http.Handler, fault func(n int, w http.ResponseWriter, req *http.Request, next http.Handler) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/acquire") {
			next.ServeHTTP(w, req)
			return
		}
		body, _ := io.ReadAll(req.Body)
		var a lockapi.AcquireRequest
		json.Unmarshal(body, &a)
		r.mu.Lock()
		r.ids = append(r.ids, a.RequestID)
		n := len(r.ids)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
		if fault == nil || !fault(n, w, req, next) {
			next.ServeHTTP(w, req)
		}
	})
}

func (r *recorder) sameID(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) != n {
		t.Fatalf("%d acquire attempts %q, want %d", len(r.ids), r.ids, n)
	}
	for _, id := range r.ids {
		if id != r.ids[0] {
			t.Fatalf("request ids %q differ across retries", r.ids)
		}
	}
}

// TestLostReplyRetriesWithSameID: the service grants but the reply is lost
// (connection cut); the retry carries the same request id and gets the
// same token back, and only one token was ever issued.
func TestLostReplyRetriesWithSameID(t *testing.T) {
	m := lockapitest.NewMem()
	var rec recorder
	base := serveWrapped(t, m, func(h http.Handler) http.Handler {
		return rec.wrap(h, func(n int, w http.ResponseWriter, req *http.Request, next http.Handler) bool {
			if n != 1 {
				return false
			}
			next.ServeHTTP(discard{}, req) // granted...
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close() // ...and the reply never arrives
			return true
		})
	})
	l, err := newClient(t, base).Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec.sameID(t, 2)
	st, _ := m.Get(context.Background(), "r")
	if l.Token() != 1 || st.LastToken != 1 || st.Holder != "tester" {
		t.Fatalf("token %d, state %+v: want one grant, token 1", l.Token(), st)
	}
	l.Release(ctxT(t, 5*time.Second))
}

// TestReleaseWithLostReply: the release is applied but its reply lost;
// the retry hears "not holder", which after an unanswered attempt means
// released, so Release reports success.
func TestReleaseWithLostReply(t *testing.T) {
	m := lockapitest.NewMem()
	var cut atomic.Bool
	base := serveWrapped(t, m, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/release") && cut.CompareAndSwap(false, true) {
				h.ServeHTTP(discard{}, req)
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close()
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	l, err := newClient(t, base).Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("release whose first reply was lost: %v", err)
	}
	if st, _ := m.Get(context.Background(), "r"); st.Held || !cut.Load() {
		t.Fatalf("state %+v, cut %v: want released by the first attempt", st, cut.Load())
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestFollowsLeaderWithSameID: a follower answers 307; the client retries
// the same request at the leader and remembers it for the next request.
func TestFollowsLeaderWithSameID(t *testing.T) {
	leaderMem := lockapitest.NewMem()
	var rec recorder
	leader := serveWrapped(t, leaderMem, func(h http.Handler) http.Handler { return rec.wrap(h, nil) })
	follower := lockapitest.NewMem()
	follower.SetHook(func(context.Context, string) error { return &lockapi.NotLeaderError{Leader: leader} })
	var frec recorder
	fbase := serveWrapped(t, follower, func(h http.Handler) http.Handler { return frec.wrap(h, nil) })
	c := newClient(t, fbase)
	l, err := c.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec.sameID(t, 1)
	frec.sameID(t, 1)
	if frec.ids[0] != rec.ids[0] {
		t.Fatalf("follower saw %q, leader %q: the redirect changed the request id", frec.ids, rec.ids)
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("release (should go straight to the leader): %v", err)
	}
}

// TestRetryAfterHonoured: a 429 with retry_after_ms 300 makes the client
// wait at least 300 ms before retrying the same request.
func TestRetryAfterHonoured(t *testing.T) {
	m := lockapitest.NewMem()
	var rec recorder
	var mu sync.Mutex
	var times []time.Time
	base := serveWrapped(t, m, func(h http.Handler) http.Handler {
		return rec.wrap(h, func(n int, w http.ResponseWriter, req *http.Request, next http.Handler) bool {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			if n > 2 {
				return false
			}
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			json.NewEncoder(w).Encode(lockapi.ErrorResponse{Error: lockapi.CodeOverloaded, RetryAfterMs: 300})
			return true
		})
	})
	if _, err := newClient(t, base).Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rec.sameID(t, 3)
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < 300*time.Millisecond || gap > 600*time.Millisecond {
			t.Fatalf("retry %d came %v after the 429, want within [300ms, 450ms+slack]", i, gap)
		}
	}
}

// TestRetriesNextEndpointOnNetworkError: a dead first endpoint is skipped.
func TestRetriesNextEndpointOnNetworkError(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{})
	lk, err := newClient(t, dead, base).Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lk.Release(ctxT(t, 5*time.Second))
}

// TestRenewalKeepsTheLock: renewals go out every TTL/3 and move the
// watchdog's deadline; Lost stays open.
func TestRenewalKeepsTheLock(t *testing.T) {
	m := lockapitest.NewMem()
	var renewals atomic.Int32
	m.SetHook(func(_ context.Context, op string) error {
		if op == "renew" {
			renewals.Add(1)
		}
		return nil
	})
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	l, err := newClient(t, base).Acquire(ctxT(t, 5*time.Second), "r", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	time.Sleep(700 * time.Millisecond)
	select {
	case <-l.Lost():
		t.Fatal("lost while renewals succeed")
	default:
	}
	if n := renewals.Load(); n < 4 || !l.Deadline().After(first) {
		t.Fatalf("%d renewals in 700ms of a 300ms lease; deadline %v then %v", n, first, l.Deadline())
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestLostWhenRenewalsFail: with every renewal failing (503), Lost closes
// at the watchdog's deadline — start + TTL·(1−ρ) − margin — and not
// later; with the service saying "not holder" it closes at once.
func TestLostWhenRenewalsFail(t *testing.T) {
	m := lockapitest.NewMem()
	m.SetHook(func(_ context.Context, op string) error {
		if op == "renew" {
			return errors.New("redis down")
		}
		return nil
	})
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	c := newClient(t, base)
	start := time.Now()
	l, err := c.Acquire(ctxT(t, 5*time.Second), "r", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost never closed while renewals failed")
	}
	took := time.Since(start)
	// 300ms·(1−0.001) − 10ms = 289.7ms from the request's start.
	if took < 280*time.Millisecond || took > 450*time.Millisecond {
		t.Fatalf("Lost closed %v after the acquire started, want about 290ms", took)
	}

	m.SetHook(nil)
	l2, err := c.Acquire(ctxT(t, 5*time.Second), "q", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Hour) // the service lets the lease expire: next renewal gets 409
	select {
	case <-l2.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost did not close after 'not holder'")
	}
	if err := l2.Release(ctxT(t, 5*time.Second)); !errors.Is(err, lockclient.ErrNotHolder) {
		t.Fatalf("release of a lost lease: %v, want ErrNotHolder", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []lockclient.Config{
		{},
		{Endpoints: []string{"localhost:7070"}},
		{Endpoints: []string{"http://127.0.0.1:7070"}, Name: "bad name"},
	} {
		if _, err := lockclient.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestReleaseAnsweredUnavailableAfterItApplied: the service applies a
// release but answers 503 (a leader that stepped down between applying it
// and answering); the client retries the same release, whose request id
// makes it idempotent, and sees released rather than "not holder".
func TestReleaseAnsweredUnavailableAfterItApplied(t *testing.T) {
	m := lockapitest.NewMem()
	var lost atomic.Bool
	base := serveWrapped(t, m, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/release") && lost.CompareAndSwap(false, true) {
				h.ServeHTTP(discard{}, r) // applied; the answer is lost
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":"unavailable","message":"no leader known; retry later","retry_after_ms":5}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, base)
	l, err := c.Acquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("release whose first answer was a 503 after it applied: %v, want released", err)
	}
	if !lost.Load() {
		t.Fatal("the release's answer was never lost: the test tested nothing")
	}
	if st, _ := m.Get(context.Background(), "r"); st.Held {
		t.Fatalf("the lock is still held: %+v", st)
	}
}
