package lockapitest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
)

// T is what the contract's cases need of a test: *testing.T has it, and
// so does simrun conform's report, which runs the cases against any
// server's URL outside go test. Fatalf and Fatal end the case (the
// goroutine that called them).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
	Errorf(format string, args ...any)
}

// Harness is what Suite needs from a backend under test.
type Harness struct {
	// Backends are two instances over one shared state (two lockd
	// processes over one Redis, two handles on one Mem).
	Backends [2]lockapi.Backend
	// Advance lets leases age by d: a fast-forward (Mem, miniredis) or a
	// sleep (a real Redis).
	Advance func(d time.Duration)
	// SetFence sets a resource's last issued token. A backend whose
	// tokens cannot be set (the Raft node's are log indexes) leaves it nil
	// and starts its tokens above TokenOffset instead.
	SetFence func(resource string, t uint64)
	// TokenOffset, with SetFence nil, is what the backend's tokens start
	// above: the tokens-beyond-2^53 case needs it at 2^53 or more.
	TokenOffset uint64
	// GlobalTokens says the backend's tokens are one sequence across
	// resources (fencesim-node's Raft log indexes): a resource's
	// last_token is then the last token issued anywhere, not 0 for a
	// resource never granted.
	GlobalTokens bool
	// RemembersGrants says the backend answers a retried acquire (same
	// client, same request id) from its memory of the first grant, even
	// after that lease ended: the one grant the request made, which the
	// client measures from its first attempt (fencesim-node's replicated
	// table). Otherwise the retry after the lease ended is a new acquire
	// (lockd: held, when another client holds the lock). Neither may
	// grant the same request twice.
	RemembersGrants bool
}

// Serve starts a lockapi server over b on a free loopback port and returns
// it with its base URL; it is shut down when the test ends.
func Serve(t testing.TB, b lockapi.Backend, cfg lockapi.Config) (*lockapi.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := lockapi.NewServer(b, cfg)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, "http://" + l.Addr().String()
}

// Reply is an HTTP answer with its body read.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Error decodes the body as an ErrorResponse.
func (r Reply) Error(t T) lockapi.ErrorResponse {
	t.Helper()
	var e lockapi.ErrorResponse
	if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
		t.Fatalf("status %d body %q is not an ErrorResponse: %v", r.Status, r.Body, err)
	}
	return e
}

// Lease decodes the body as a LeaseResponse, failing unless 200.
func (r Reply) Lease(t T) lockapi.LeaseResponse {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d %s, want 200", r.Status, r.Body)
	}
	var l lockapi.LeaseResponse
	if err := json.Unmarshal([]byte(r.Body), &l); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return l
}

// noRedirect is a client that reports 307s instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Do sends one request (body "" = none) and reads the reply.
func Do(t T, method, url, body string) Reply {
	t.Helper()
	return DoAs(t, "", method, url, body)
}

// DoAs is Do with a bearer token ("" = none).
func DoAs(t T, bearer, method, url, body string) Reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

func acquire(t T, base, res, client, reqID string, ttlMs int) Reply {
	t.Helper()
	return Do(t, "POST", base+"/v1/locks/"+res+"/acquire",
		`{"client":"`+client+`","ttl_ms":`+itoa(ttlMs)+`,"request_id":"`+reqID+`"}`)
}

func renew(t T, base, res, client string, tok lockapi.Token, ttlMs int) Reply {
	t.Helper()
	return Do(t, "POST", base+"/v1/locks/"+res+"/renew",
		`{"client":"`+client+`","token":"`+tok.String()+`","ttl_ms":`+itoa(ttlMs)+`}`)
}

func release(t T, base, res, client string, tok lockapi.Token) Reply {
	t.Helper()
	return Do(t, "POST", base+"/v1/locks/"+res+"/release", `{"client":"`+client+`","token":"`+tok.String()+`"}`)
}

func itoa(i int) string { return lockapi.Token(uint64(i)).String() }

func wantStatus(t T, what string, r Reply, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d %s, want %d %s", what, r.Status, r.Body, status, code)
	}
	if code != "" {
		if e := r.Error(t); e.Error != code {
			t.Fatalf("%s: error %q, want %q (%s)", what, e.Error, code, r.Body)
		}
	}
}

// Target is what a case runs against: two instances' base URLs over one
// shared state (the same URL twice for a single instance), the
// harness's knobs (Backends unused), and a prefix for every resource
// name, so that cases against a long-running server do not meet the
// locks of an earlier run.
type Target struct {
	URLs   [2]string
	H      Harness
	Prefix string
}

// Case is one case of the contract. Skip, if set, says why the case
// cannot run against tg ("" runs it).
type Case struct {
	Name string
	Run  func(t T, tg Target)
	Skip func(tg Target) string
}

// Suite runs the lock API contract (Cases) against a backend, over HTTP
// on loopback. Each subtest gets a fresh harness.
func Suite(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t)
			_, a := Serve(t, h.Backends[0], lockapi.Config{})
			_, b := Serve(t, h.Backends[1], lockapi.Config{})
			tg := Target{URLs: [2]string{a, b}, H: h}
			if c.Skip != nil {
				if why := c.Skip(tg); why != "" {
					t.Fatalf("harness: %s", why)
				}
			}
			c.Run(t, tg)
		})
	}
}

// Cases returns the contract's cases, in order.
func Cases() []Case {
	return []Case{

		{Name: "grant-held-renew-release", Run: func(t T, tg Target) {
			h, a, _ := tg.H, tg.URLs[0], tg.URLs[1]
			l := acquire(t, a, tg.Prefix+"r", "alice", "q1", 5000).Lease(t)
			if l.Token == 0 || l.TTLms != 5000 {
				t.Fatalf("lease %+v, want a token and ttl 5000", l)
			}
			r := acquire(t, a, tg.Prefix+"r", "bob", "q1", 5000)
			wantStatus(t, "bob while alice holds", r, 409, lockapi.CodeHeld)
			if e := r.Error(t); e.Holder != "alice" || e.RetryAfterMs <= 0 || e.RetryAfterMs > 5000 {
				t.Fatalf("held reply %+v, want holder alice and a retry hint in (0, 5000]", e)
			}
			g := Do(t, "GET", a+"/v1/locks/"+tg.Prefix+"r", "")
			var st lockapi.LockResponse
			if err := json.Unmarshal([]byte(g.Body), &st); err != nil || !st.Held || st.Holder != "alice" || st.Token != l.Token || st.LastToken != l.Token {
				t.Fatalf("GET: %d %s, want held by alice with token %d", g.Status, g.Body, l.Token)
			}
			if rl := renew(t, a, tg.Prefix+"r", "alice", l.Token, 8000).Lease(t); rl.Token != l.Token || rl.TTLms != 8000 {
				t.Fatalf("renew %+v", rl)
			}
			wantStatus(t, "release", release(t, a, tg.Prefix+"r", "alice", l.Token), 200, "")
			wantStatus(t, "release twice", release(t, a, tg.Prefix+"r", "alice", l.Token), 409, lockapi.CodeNotHolder)
			l2 := acquire(t, a, tg.Prefix+"r", "bob", "q2", 5000).Lease(t)
			if l2.Token <= l.Token {
				t.Fatalf("token after release %d, want > %d", l2.Token, l.Token)
			}
			g = Do(t, "GET", a+"/v1/locks/"+tg.Prefix+"never-used", "")
			var unused lockapi.LockResponse
			if err := json.Unmarshal([]byte(g.Body), &unused); g.Status != 200 || err != nil || unused.Held {
				t.Fatalf("GET unused: %d %s", g.Status, g.Body)
			}
			if want := lockapi.Token(0); !h.GlobalTokens && unused.LastToken != want || h.GlobalTokens && unused.LastToken < l2.Token {
				t.Fatalf("GET unused: last_token %d (global tokens: %v), want 0 for per-resource tokens, >= %d for global ones", unused.LastToken, h.GlobalTokens, l2.Token)
			}
		}},

		{Name: "release-retry", Run: func(t T, tg Target) {
			_, a, b := tg.H, tg.URLs[0], tg.URLs[1]
			l := acquire(t, a, tg.Prefix+"r", "alice", "q1", 5000).Lease(t)
			rel := func(base, client, id string) Reply {
				return Do(t, "POST", base+"/v1/locks/"+tg.Prefix+"r/release", `{"client":"`+client+`","token":"`+l.Token.String()+`","request_id":"`+id+`"}`)
			}
			wantStatus(t, "release with a request id", rel(a, "alice", "rel-1"), 200, "")
			wantStatus(t, "its retry (the first answer lost), at the other instance", rel(b, "alice", "rel-1"), 200, "")
			wantStatus(t, "a retry by another client with that id", rel(a, "bob", "rel-1"), 409, lockapi.CodeNotHolder)
			wantStatus(t, "another release of the token", rel(a, "alice", "rel-2"), 409, lockapi.CodeNotHolder)
			wantStatus(t, "a release of it without request id", release(t, a, tg.Prefix+"r", "alice", l.Token), 409, lockapi.CodeNotHolder)
		}},

		{Name: "idempotent-retry", Run: func(t T, tg Target) {
			_, a, b := tg.H, tg.URLs[0], tg.URLs[1]
			l := acquire(t, a, tg.Prefix+"r", "alice", "req-7", 5000).Lease(t)
			// The same request arriving again, even through the other
			// instance (a retry after a lost reply): the same token.
			if l2 := acquire(t, b, tg.Prefix+"r", "alice", "req-7", 5000).Lease(t); l2.Token != l.Token {
				t.Fatalf("retry got token %d, want %d", l2.Token, l.Token)
			}
			// A new request by the same client is a second acquire: held.
			wantStatus(t, "new request id", acquire(t, a, tg.Prefix+"r", "alice", "req-8", 5000), 409, lockapi.CodeHeld)
			// Another client reusing the id gets nothing.
			wantStatus(t, "other client same id", acquire(t, a, tg.Prefix+"r", "bob", "req-7", 5000), 409, lockapi.CodeHeld)
		}},

		{Name: "owner-checks", Run: func(t T, tg Target) {
			_, a, _ := tg.H, tg.URLs[0], tg.URLs[1]
			l := acquire(t, a, tg.Prefix+"r", "alice", "q", 5000).Lease(t)
			wantStatus(t, "renew by another client", renew(t, a, tg.Prefix+"r", "bob", l.Token, 5000), 409, lockapi.CodeNotHolder)
			wantStatus(t, "renew with another token", renew(t, a, tg.Prefix+"r", "alice", l.Token+1, 5000), 409, lockapi.CodeNotHolder)
			wantStatus(t, "release by another client", release(t, a, tg.Prefix+"r", "bob", l.Token), 409, lockapi.CodeNotHolder)
			wantStatus(t, "release with another token", release(t, a, tg.Prefix+"r", "alice", l.Token+1), 409, lockapi.CodeNotHolder)
			wantStatus(t, "renew unheld", renew(t, a, tg.Prefix+"other", "alice", l.Token, 5000), 409, lockapi.CodeNotHolder)
			wantStatus(t, "still held", acquire(t, a, tg.Prefix+"r", "bob", "q", 5000), 409, lockapi.CodeHeld)
		}},

		{Name: "expiry", Run: func(t T, tg Target) {
			h, a, _ := tg.H, tg.URLs[0], tg.URLs[1]
			l := acquire(t, a, tg.Prefix+"r", "alice", "q", 100).Lease(t)
			h.Advance(250 * time.Millisecond)
			l2 := acquire(t, a, tg.Prefix+"r", "bob", "q", 5000).Lease(t)
			if l2.Token <= l.Token {
				t.Fatalf("token after expiry %d, want > %d", l2.Token, l.Token)
			}
			wantStatus(t, "stale renew", renew(t, a, tg.Prefix+"r", "alice", l.Token, 5000), 409, lockapi.CodeNotHolder)
			wantStatus(t, "stale release", release(t, a, tg.Prefix+"r", "alice", l.Token), 409, lockapi.CodeNotHolder)
			// The expired holder's retry of its old request is not a grant
			// of the lock bob holds: held, or the first grant again (which
			// has ended).
			if !h.RemembersGrants {
				wantStatus(t, "stale retry", acquire(t, a, tg.Prefix+"r", "alice", "q", 5000), 409, lockapi.CodeHeld)
			} else if l3 := acquire(t, a, tg.Prefix+"r", "alice", "q", 5000).Lease(t); l3.Token != l.Token {
				t.Fatalf("stale retry: token %d, want the first grant's %d from memory", l3.Token, l.Token)
			}
		}},

		{Name: "two-instances-tokens-increase", Run: func(t T, tg Target) {
			_, a, b := tg.H, tg.URLs[0], tg.URLs[1]
			var last lockapi.Token
			for i := range 40 {
				acq, rel := a, b
				if i%2 == 1 {
					acq, rel = b, a
				}
				l := acquire(t, acq, tg.Prefix+"shared", "c"+itoa(i%3), "q"+itoa(i), 5000).Lease(t)
				if l.Token <= last {
					t.Fatalf("cycle %d: token %d after %d", i, l.Token, last)
				}
				last = l.Token
				wantStatus(t, "release on the other instance", release(t, rel, tg.Prefix+"shared", "c"+itoa(i%3), l.Token), 200, "")
			}
			// Concurrent clients on both instances, one lock: every grant a
			// distinct token, and no two holders at once.
			var mu sync.Mutex
			seen := map[lockapi.Token]bool{}
			holders := 0
			var wg sync.WaitGroup
			deadline := time.Now().Add(10 * time.Second)
			for w := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					base := []string{a, b}[w%2]
					name := "w" + itoa(w)
					for n, try := 0, 0; n < 5 && time.Now().Before(deadline); try++ {
						// A new request id per attempt, as the shipped client
						// makes after a held answer: lockd keeps a request
						// answered held held (a late copy of it must not be
						// granted).
						r := acquire(t, base, tg.Prefix+"hot", name, "q"+itoa(n)+"-"+itoa(try), 5000)
						if r.Status == 409 {
							continue
						}
						l := r.Lease(t)
						mu.Lock()
						holders++
						dup := seen[l.Token]
						seen[l.Token] = true
						if holders != 1 || dup {
							t.Errorf("token %d: holders %d, duplicate %v", l.Token, holders, dup)
						}
						holders--
						mu.Unlock()
						wantStatus(t, "release", release(t, base, tg.Prefix+"hot", name, l.Token), 200, "")
						n++
					}
				}()
			}
			wg.Wait()
			if len(seen) != 30 {
				t.Fatalf("%d grants, want 30 (deadline hit?)", len(seen))
			}
		}},

		{Name: "tokens-beyond-2^53", Run: func(t T, tg Target) {
			h, a, _ := tg.H, tg.URLs[0], tg.URLs[1]
			if h.SetFence == nil {
				bigTokensFromOffset(t, h, a, tg.Prefix)
				return
			}
			h.SetFence(tg.Prefix+"big", 1<<53)
			r := acquire(t, a, tg.Prefix+"big", "alice", "q", 5000)
			if !strings.Contains(r.Body, `"token":"9007199254740993"`) {
				t.Fatalf("acquire after 2^53: %d %s, want token \"9007199254740993\" as a string", r.Status, r.Body)
			}
			wantStatus(t, "release 2^53+1", release(t, a, tg.Prefix+"big", "alice", r.Lease(t).Token), 200, "")
			h.SetFence(tg.Prefix+"top", ^uint64(0)-1)
			r = acquire(t, a, tg.Prefix+"top", "alice", "q", 5000)
			if !strings.Contains(r.Body, `"token":"18446744073709551615"`) {
				t.Fatalf("acquire after 2^64-2: %d %s, want token \"18446744073709551615\"", r.Status, r.Body)
			}
			top := r.Lease(t).Token
			renew(t, a, tg.Prefix+"top", "alice", top, 5000).Lease(t)
			wantStatus(t, "release 2^64-1", release(t, a, tg.Prefix+"top", "alice", top), 200, "")
			// Exhausted: fail closed rather than wrap around to a token a
			// fenced resource would reject (or worse, accept).
			wantStatus(t, "acquire past 2^64-1", acquire(t, a, tg.Prefix+"top", "bob", "q", 5000), 503, lockapi.CodeUnavailable)
		}, Skip: func(tg Target) string {
			if tg.H.SetFence == nil && tg.H.TokenOffset < 1<<53 {
				return "needs a way to set a resource's fence counter, or a server whose tokens start above 2^53 (TokenOffset)"
			}
			return ""
		}},
	}
}

// bigTokensFromOffset is the tokens-beyond-2^53 case for a backend whose
// tokens start above h.TokenOffset: grants, a renewal, a release, the
// lock's state and the next grant all carry tokens past 2^53 whole, as
// decimal strings.
func bigTokensFromOffset(t T, h Harness, a, prefix string) {
	tg := Target{Prefix: prefix}
	r := acquire(t, a, tg.Prefix+"big", "alice", "q", 5000)
	tok := r.Lease(t).Token
	if uint64(tok) <= h.TokenOffset || !strings.Contains(r.Body, `"token":"`+tok.String()+`"`) {
		t.Fatalf("acquire: %d %s, want a token above %d as a decimal string", r.Status, r.Body, h.TokenOffset)
	}
	if got := renew(t, a, tg.Prefix+"big", "alice", tok, 5000).Lease(t).Token; got != tok {
		t.Fatalf("renew: token %s, want %s", got, tok)
	}
	if g := Do(t, "GET", a+"/v1/locks/"+tg.Prefix+"big", ""); !strings.Contains(g.Body, `"last_token":"`+tok.String()+`"`) || !strings.Contains(g.Body, `"token":"`+tok.String()+`"`) {
		t.Fatalf("GET: %d %s, want token and last_token %q", g.Status, g.Body, tok.String())
	}
	wantStatus(t, "release "+tok.String(), release(t, a, tg.Prefix+"big", "alice", tok), 200, "")
	next := acquire(t, a, tg.Prefix+"big", "bob", "q", 5000).Lease(t).Token
	if next <= tok {
		t.Fatalf("the next grant's token %s is not above %s", next, tok)
	}
}
