package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// noRedirect is a client that shows a 307 instead of following it, so a
// test can tell the leader (200) from the followers.
var noRedirect = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startDev runs a -dev-cluster 3 with env and the extra flags args and
// returns its lock API URLs; the cluster drains when the test ends.
func startDev(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan []string, 1)
	done := make(chan int, 1)
	var stdout, logs syncBuffer
	go func() {
		done <- run(ctx, append([]string{"-dev-cluster", "3"}, args...), env, &stdout, &logs, func(u []string) { urls <- u })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the dev cluster did not drain")
		}
	})
	select {
	case us := <-urls:
		return us
	case code := <-done:
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("never served")
	}
	return nil
}

// TestFastClockEndsALeaseEarly: with FENCESIM_TEST_HOOKS=1, POST
// /test/clock on the leader makes its clock run fast, and the lease it
// times ends before its TTL has passed in real time (another client gets
// the lock). On a correct clock that is impossible: the leader's timer
// starts after the grant's request was sent, so the lock is never free
// again before start + TTL.
func TestFastClockEndsALeaseEarly(t *testing.T) {
	urls := startDev(t, map[string]string{"FENCESIM_TEST_HOOKS": "1"})
	const ttl = 4 * time.Second
	acquire := func(url, client string, req int) (int, string) {
		return post(t, url+"/v1/locks/r/acquire", fmt.Sprintf(`{"client":%q,"ttl_ms":%d,"request_id":"%d"}`, client, ttl.Milliseconds(), req))
	}
	var leader string
	var start time.Time
	deadline := time.Now().Add(10 * time.Second)
	for leader == "" && time.Now().Before(deadline) {
		for _, u := range urls {
			start = time.Now()
			if code, _ := acquire(u, "a", 1); code == http.StatusOK {
				leader = u
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if leader == "" {
		t.Fatal("no replica granted the lock within 10s")
	}
	if code, body := post(t, leader+"/test/clock", `{"drift_ppm":900000}`); code != http.StatusOK || !strings.Contains(body, `"drift_ppm":900000`) {
		t.Fatalf("POST /test/clock = %d %s", code, body)
	}
	if code, body := post(t, leader+"/test/clock", `{"drift_ppm":1000000}`); code != http.StatusBadRequest || !strings.Contains(body, `"field":"drift_ppm"`) {
		t.Errorf("POST /test/clock out of range = %d %s, want 400 naming drift_ppm", code, body)
	}
	for req := 1; time.Since(start) < 2*ttl; req++ {
		code, body := acquire(leader, "b", req)
		if code == http.StatusOK {
			if took := time.Since(start); took >= ttl {
				t.Fatalf("the lease ended %v after its acquire was sent, not before its TTL of %v: the fast clock did not shorten it", took, ttl)
			}
			return
		}
		if code != http.StatusConflict {
			t.Fatalf("acquire by b = %d %s, want 409 until the lease ends", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the lock was still held %v after a %v lease", 2*ttl, ttl)
}

// TestDiskHookSlowsTheReplica: POST /test/disk on every replica slows
// each fsync, so an acquire (committed by fsyncs on a quorum) takes at
// least the delay. The delay stays well under the 100 ms election
// timeout: fsyncs slower than that keep a group from holding a leader
// (votes and appends are synced), which is a fault to inject, not to
// test the hook with.
func TestDiskHookSlowsTheReplica(t *testing.T) {
	urls := startDev(t, map[string]string{"FENCESIM_TEST_HOOKS": "1"})
	cl := newClient(t, "slow", urls)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := cl.Acquire(ctx, "r", 5*time.Second) // a leader exists
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const delay = 30 * time.Millisecond
	for _, u := range urls {
		if code, body := post(t, u+"/test/disk", `{"sync_delay_ms":30}`); code != http.StatusOK {
			t.Fatalf("POST /test/disk = %d %s", code, body)
		}
	}
	begin := time.Now()
	if l, err = cl.Acquire(ctx, "r", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < delay {
		t.Errorf("an acquire with every fsync delayed %v took %v", delay, took)
	}
	l.Release(ctx)
}

// TestTestHooksAbsentByDefault: without FENCESIM_TEST_HOOKS the routes do
// not exist.
func TestTestHooksAbsentByDefault(t *testing.T) {
	urls := startDev(t, nil)
	for _, p := range []string{"/test/clock", "/test/disk"} {
		if code, body := post(t, urls[0]+p, `{"drift_ppm":1,"sync_delay_ms":1}`); code != http.StatusNotFound {
			t.Errorf("POST %s without test hooks = %d %s, want 404", p, code, body)
		}
	}
}
