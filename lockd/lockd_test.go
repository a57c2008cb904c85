package lockd_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockd"
)

func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// harness returns two lockd backends, each with its own Redis connection
// pool like two processes, over one Redis at addr.
func harness(t *testing.T, addr string, advance func(time.Duration)) lockapitest.Harness {
	a, b := newClient(t, addr), newClient(t, addr)
	if err := a.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return lockapitest.Harness{
		Backends: [2]lockapi.Backend{lockd.New(a, lockd.Options{}), lockd.New(b, lockd.Options{})},
		Advance:  advance,
		// A request id is remembered past its lease (scripts.Memory).
		RemembersGrants: true,
		SetFence: func(resource string, tok uint64) {
			if err := a.Set(context.Background(), "fencesim:{"+resource+"}:fence", strconv.FormatUint(tok, 10), 0).Err(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func TestSuiteMiniredis(t *testing.T) {
	lockapitest.Suite(t, func(t *testing.T) lockapitest.Harness {
		m := miniredis.RunT(t)
		return harness(t, m.Addr(), m.FastForward)
	})
}

func TestSuiteRealRedis(t *testing.T) {
	addr := redistest.Start(t).Addr
	lockapitest.Suite(t, func(t *testing.T) lockapitest.Harness {
		return harness(t, addr, time.Sleep)
	})
}

// TestKeysAndDurability pins the Redis layout (the lease expires with the
// TTL, the fence counter never) and the durability check: a Redis with
// appendfsync always passes, anything less is reported on /readyz.
func TestKeysAndDurability(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, redistest.Start(t).Addr)
	b := lockd.New(rdb, lockd.Options{Prefix: "p:"})
	l, err := b.Acquire(ctx, "res", "alice", 5*time.Second, 0, "q")
	if err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, "p:{res}:lock").Val(); v != "alice q "+strconv.FormatUint(l.Token, 10) {
		t.Fatalf("lease value %q", v)
	}
	if d := rdb.PTTL(ctx, "p:{res}:lock").Val(); d <= 4*time.Second || d > 5*time.Second {
		t.Fatalf("lease PTTL %v, want about 5s", d)
	}
	if d := rdb.PTTL(ctx, "p:{res}:fence").Val(); d != -1 {
		t.Fatalf("fence PTTL %v, want none (-1): a counter that expires goes backwards", d)
	}
	if err := b.CheckDurability(ctx); err != nil || len(b.Warnings()) != 0 {
		t.Fatalf("appendfsync always: %v %v", err, b.Warnings())
	}
	rdb.ConfigSet(ctx, "appendfsync", "everysec")
	if err := b.CheckDurability(ctx); err == nil || !strings.Contains(err.Error(), "NOT durable") {
		t.Fatalf("appendfsync everysec: %v, want a NOT durable error", err)
	}
	_, base := lockapitest.Serve(t, b, lockapi.Config{})
	if r := lockapitest.Do(t, "GET", base+"/readyz", ""); r.Status != 200 || !strings.Contains(r.Body, "NOT durable") {
		t.Fatalf("readyz: %d %s, want ready with the durability warning", r.Status, r.Body)
	}
	if r := lockapitest.Do(t, "GET", base+"/metrics", ""); !strings.Contains(r.Body, "fencesim_lockd_redis_durable 0") {
		t.Fatalf("metrics lack fencesim_lockd_redis_durable 0")
	}
}

// TestLateRequestIsNotGrantedTwice is lockd's double grant, found by the
// live runner: an instance paused with alice's acquire queued; alice
// retried the same request id on the other instance, was granted and
// released; then the paused instance ran the queued script. With the
// request remembered past its lease, the late copy answers the first
// grant (ended); without (the planted bug lockd-forgets-request), it is
// granted a second time, with a new token.
func TestLateRequestIsNotGrantedTwice(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t).Addr
	for _, forget := range []bool{false, true} {
		rdb := newClient(t, addr)
		rdb.FlushAll(ctx)
		b := lockd.New(rdb, lockd.Options{UnsafeForgetRequests: forget})
		first, err := b.Acquire(ctx, "res", "alice", 5*time.Second, 0, "q")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, "res", "alice", first.Token, "rel"); err != nil {
			t.Fatal(err)
		}
		late, err := b.Acquire(ctx, "res", "alice", 5*time.Second, 0, "q")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !forget && (late.Token != first.Token || late.TTL != 0):
			t.Fatalf("late copy: token %d ttl %v, want the first grant %d, ended (ttl 0)", late.Token, late.TTL, first.Token)
		case forget && late.Token == first.Token:
			t.Fatalf("forgetting requests: late copy got token %d again, want a second grant (the bug)", late.Token)
		}
		if st, _ := b.Get(ctx, "res"); st.Held != forget {
			t.Fatalf("forget=%v: held after the late copy = %v", forget, st.Held)
		}
	}
}

// TestMiniredisIsNotDurable: the embedded Redis keeps nothing across a
// restart, and the check says so.
func TestMiniredisIsNotDurable(t *testing.T) {
	m := miniredis.RunT(t)
	b := lockd.New(newClient(t, m.Addr()), lockd.Options{})
	if err := b.CheckDurability(context.Background()); err == nil {
		t.Fatal("miniredis reported durable")
	}
}

// TestRedisDownFailsClosed: with Redis unreachable every lock request is a
// 503 with Retry-After and readyz is 503; nothing is granted.
func TestRedisDownFailsClosed(t *testing.T) {
	m := miniredis.RunT(t)
	b := lockd.New(newClient(t, m.Addr()), lockd.Options{})
	_, base := lockapitest.Serve(t, b, lockapi.Config{})
	m.Close()
	r := lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("acquire with Redis down: %d %s", r.Status, r.Body)
	}
	if r := lockapitest.Do(t, "GET", base+"/readyz", ""); r.Status != 503 {
		t.Fatalf("readyz with Redis down: %d %s", r.Status, r.Body)
	}
}

// TestFenceSurvivesRedisCrash: with appendfsync always, a Redis killed
// with SIGKILL and restarted from its directory issues tokens above every
// token lockd acknowledged before the crash.
func TestFenceSurvivesRedisCrash(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr)
	b := lockd.New(rdb, lockd.Options{})
	var last uint64
	for i := range 20 {
		l, err := b.Acquire(ctx, "r", "a", time.Minute, 0, "q"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, "r", "a", l.Token, ""); err != nil {
			t.Fatal(err)
		}
		last = l.Token
	}
	held, err := b.Acquire(ctx, "r", "a", time.Minute, 0, "held")
	if err != nil {
		t.Fatal(err)
	}
	srv.Crash()
	var l lockapi.Lease
	for try, deadline := 0, time.Now().Add(5*time.Second); ; try++ {
		time.Sleep(20 * time.Millisecond)
		// The lease survived too, so the first acquire is "held" (and that
		// request id stays held: each attempt is a new one).
		if l, err = b.Acquire(ctx, "r", "b", time.Minute, 0, "after"+strconv.Itoa(try)); err == nil || time.Now().After(deadline) {
			break
		}
		if _, ok := err.(*lockapi.HeldError); ok {
			if err := b.Release(ctx, "r", "a", held.Token, ""); err != nil {
				t.Fatalf("release of the pre-crash lease: %v", err)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= held.Token || held.Token <= last {
		t.Fatalf("token after the crash %d, before %d (then %d): the counter went backwards", l.Token, held.Token, last)
	}
}

// TestCorruptFenceFailsClosed: a fence counter that is not a decimal
// string stops grants for that resource rather than restarting at 1.
func TestCorruptFenceFailsClosed(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := newClient(t, m.Addr())
	b := lockd.New(rdb, lockd.Options{})
	m.Set("fencesim:{r}:fence", "12abc")
	if _, err := b.Acquire(context.Background(), "r", "a", time.Second, 0, "q"); err == nil || !strings.Contains(err.Error(), "not a decimal") {
		t.Fatalf("acquire over a corrupt counter: %v", err)
	}
	if m.Exists("fencesim:{r}:lock") {
		t.Fatal("a lease was written despite the corrupt counter")
	}
}

// acquireN acquires and releases r n times and returns the last token.
// acquireSeq numbers acquireN's requests.
var acquireSeq atomic.Uint64

func acquireN(t *testing.T, b *lockd.Backend, n int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		// A request id of its own per acquire: lockd remembers a request
		// past its lease, and answers a reused one with its old grant.
		l, err := b.Acquire(context.Background(), "r", "a", time.Minute, 0, "n"+strconv.FormatUint(acquireSeq.Add(1), 10))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(context.Background(), "r", "a", l.Token, ""); err != nil {
			t.Fatal(err)
		}
		last = l.Token
	}
	return last
}

// refuses checks that b grants nothing over a lost fence: every acquire
// fails with ErrFenceLost (never a token at or below acked) and Ready
// says why.
func refuses(t *testing.T, b *lockd.Backend, acked uint64) {
	t.Helper()
	for i := range 5 {
		l, err := b.Acquire(context.Background(), "r", "b", time.Minute, 0, "after"+strconv.Itoa(i))
		if err == nil {
			t.Fatalf("granted token %d over a lost fence (acknowledged up to %d)", l.Token, acked)
		}
		if !errors.Is(err, lockd.ErrFenceLost) {
			t.Fatalf("acquire over a lost fence: %v, want ErrFenceLost", err)
		}
	}
	if err := b.Ready(context.Background()); !errors.Is(err, lockd.ErrFenceLost) {
		t.Fatalf("Ready over a lost fence: %v", err)
	}
}

// TestRedisLosingDataNeverReissues: a real redis-server restarted empty
// (no AOF, a new directory), flushed, or rewound (its grant sequence set
// back, as a stale replica's would be) makes lockd refuse every grant
// instead of issuing tokens 1, 2, … again: the running instance (the
// acquire script finds the epoch gone), one started afterwards with
// FENCESIM_REQUIRE_DURABLE (RequireEpoch: no epoch, no grant), and the
// watcher without any acquire. Re-initialised with a floor above the
// acknowledged tokens, grants go on above them.
func TestRedisLosingDataNeverReissues(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr)

	b := lockd.New(rdb, lockd.Options{})
	acked := acquireN(t, b, 4)
	srv.RestartEmpty()
	for end := time.Now().Add(5 * time.Second); rdb.Ping(ctx).Err() != nil && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
	}
	refuses(t, b, acked)
	refuses(t, lockd.New(rdb, lockd.Options{RequireEpoch: true}), acked)

	// Re-initialised above every acknowledged token: grants resume above.
	re := lockd.New(rdb, lockd.Options{TokenFloor: acked})
	if got := acquireN(t, re, 1); got <= acked {
		t.Fatalf("after re-initialising with floor %d: token %d", acked, got)
	}

	// Flushed, seen by the watcher alone.
	w := lockd.New(rdb, lockd.Options{})
	acked = acquireN(t, w, 2)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.Watch(wctx, 20*time.Millisecond)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); w.Ready(ctx) == nil && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
	}
	refuses(t, w, acked)

	// Rewound: the grant sequence is behind what the instance saw.
	rdb.FlushAll(ctx)
	r := lockd.New(rdb, lockd.Options{})
	acked = acquireN(t, r, 3)
	if err := rdb.Set(ctx, "fencesim:grants", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	refuses(t, r, acked)
}

// TestPausedRedisOutcomeUnknown: an acquire whose script Redis has not
// answered (paused mid-call) fails saying the outcome is unknown, since
// Redis runs the script when it resumes.
func TestPausedRedisOutcomeUnknown(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr)
	b := lockd.New(rdb, lockd.Options{})
	acquireN(t, b, 1)
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := b.Acquire(ctx, "r", "a", time.Minute, 0, "paused")
	if err == nil || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("acquire against a paused Redis: %v, want outcome unknown", err)
	}
}
