package nodesvc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// countAcquires counts the acquire requests a client sends.
type countAcquires struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countAcquires) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/acquire") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestWaitingAcquireOverHTTP: the Go client's Acquire of a held lock waits
// at the leader in one request (no polling) and is granted when the
// holder releases; the token is fresh.
func TestWaitingAcquireOverHTTP(t *testing.T) {
	c := newCluster(t)
	lead := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := lockclient.New(lockclient.Config{Name: "a", Endpoints: []string{c.Peers[lead].HTTP}})
	if err != nil {
		t.Fatal(err)
	}
	counter := &countAcquires{next: http.DefaultTransport}
	b, err := lockclient.New(lockclient.Config{Name: "b", Endpoints: []string{c.Peers[lead].HTTP},
		HTTP: &http.Client{Transport: counter}, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctx, "w", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *lockclient.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, "w", 10*time.Second)
		got <- result{l, err}
	}()
	// b is parked at the leader: nothing answers it while a holds.
	for end := time.Now().Add(5 * time.Second); c.Nodes[lead].Waiting() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("b is not waiting at the leader (%d waiting)", c.Nodes[lead].Waiting())
		}
	}
	select {
	case r := <-got:
		t.Fatalf("b was answered while a holds the lock: %v %v", r.l, r.err)
	default:
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("b after a released: %v", r.err)
	}
	if r.l.Token() <= la.Token() {
		t.Fatalf("b's token %d after a's %d", r.l.Token(), la.Token())
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("b sent %d acquire requests, want 1 (it waits, not polls)", n)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWaitedMs: an acquire granted after waiting at the leader says how
// long it waited (waited_ms): at least the time the test held the lock
// after the waiter was parked.
func TestWaitedMs(t *testing.T) {
	c := newCluster(t)
	lead := c.Leader()
	base := c.Peers[lead].HTTP
	a := post(t, base, "w", "acquire", `{"client":"a","ttl_ms":10000,"request_id":"q1"}`, 200)
	got := make(chan lockapitest.Reply, 1)
	go func() {
		got <- lockapitest.Do(t, "POST", base+"/v1/locks/w/acquire", `{"client":"b","ttl_ms":10000,"request_id":"q2","wait_ms":5000}`)
	}()
	for end := time.Now().Add(5 * time.Second); c.Nodes[lead].Waiting() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("b is not waiting at the leader")
		}
	}
	time.Sleep(100 * time.Millisecond)
	post(t, base, "w", "release", `{"client":"a","token":"`+a.Token.String()+`"}`, 200)
	r := <-got
	var l lockapi.LeaseResponse
	if err := json.Unmarshal([]byte(r.Body), &l); r.Status != 200 || err != nil {
		t.Fatalf("b: %d %s", r.Status, r.Body)
	}
	if l.WaitedMs < 100 || l.Token <= a.Token {
		t.Fatalf("b granted %+v after waiting over 100 ms behind token %s: want waited_ms ≥ 100", l, a.Token)
	}
}
