package lockclient_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// events collects what Config.Observe hears.
type events struct {
	mu sync.Mutex
	ev []lockclient.Event
}

func (e *events) observe(ev lockclient.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func (e *events) list() []lockclient.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ev)
}

// TestObserveHearsCallsAndServiceAnswers: Observe hears each operation's
// call once and the answer that ended it — a release whose first reply
// was lost is one call, answered (the retry, same request id) released —
// and an automatic renewal as a call and an answer of its own.
func TestObserveHearsCallsAndServiceAnswers(t *testing.T) {
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
	var ev events
	c, err := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "tester", Observe: ev.observe,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctxT(t, 5*time.Second), "r", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // one renewal at TTL/3
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("release: %v", err)
	}
	got := ev.list()
	var renewals int
	for i, e := range got {
		if e.Resource != "r" {
			t.Errorf("event %d: resource %q", i, e.Resource)
		}
		if e.Op == "renew" && e.Answer && e.Status == "renewed" && e.Token == l.Token() {
			renewals++
		}
	}
	if renewals == 0 {
		t.Errorf("no answered renewal heard: %+v", got)
	}
	if len(got) < 4 || got[0] != (lockclient.Event{Resource: "r", Op: "acquire", Request: got[0].Request}) ||
		got[1] != (lockclient.Event{Resource: "r", Op: "acquire", Request: got[0].Request, Answer: true, Status: "granted", Token: l.Token()}) {
		t.Fatalf("events %+v: want the acquire's call, then its grant", got)
	}
	rel := got[len(got)-2:]
	want := []lockclient.Event{
		{Resource: "r", Op: "release", Request: rel[0].Request, Token: l.Token()},
		{Resource: "r", Op: "release", Request: rel[0].Request, Answer: true, Status: "released", Token: l.Token()},
	}
	if !slices.Equal(rel, want) || !cut.Load() {
		t.Fatalf("release events %+v (cut %v), want %+v", rel, cut.Load(), want)
	}
}

// TestStayOnEndpoints: with StayOnEndpoints a redirect to an address
// outside Endpoints is not followed; the client moves to its next
// endpoint instead, at once (not after a backoff: a leader exists).
// Without it, the client follows it.
func TestStayOnEndpoints(t *testing.T) {
	for _, stay := range []bool{false, true} {
		var outside atomic.Int32
		leaderMem := lockapitest.NewMem()
		leader := serveWrapped(t, leaderMem, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { outside.Add(1); h.ServeHTTP(w, req) })
		})
		follower := lockapitest.NewMem()
		follower.SetHook(func(context.Context, string) error { return &lockapi.NotLeaderError{Leader: leader} })
		fbase := serveWrapped(t, follower, func(h http.Handler) http.Handler { return h })
		// The client's own way to the leader: a second endpoint serving
		// the leader's state.
		proxy := serveWrapped(t, leaderMem, func(h http.Handler) http.Handler { return h })
		c, err := lockclient.New(lockclient.Config{Endpoints: []string{fbase, proxy}, Name: "tester", StayOnEndpoints: stay,
			BackoffMin: 2 * time.Second, BackoffMax: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := c.TryAcquire(ctxT(t, 5*time.Second), "r", 5*time.Second)
		if err != nil {
			t.Fatalf("stay %v: %v", stay, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("stay %v: granted after %v: a backoff before the next endpoint", stay, d)
		}
		l.Release(ctxT(t, 5*time.Second))
		if n := outside.Load(); stay && n != 0 || !stay && n == 0 {
			t.Errorf("stay %v: %d requests reached the address outside Endpoints", stay, n)
		}
	}
}
