package lockd_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockd"
	"github.com/fencesim/fencesim/lockd/scripts"
)

// servers are the Redis servers the queue's tests run on: the embedded
// default (miniredis) and a real redis-server.
var servers = []struct {
	name string
	addr func(t *testing.T) string
}{
	{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{"redis-server", func(t *testing.T) string { return redistest.Start(t).Addr }},
}

// onEachServer runs f on a fresh Redis of each of servers, with a client
// of it.
func onEachServer(t *testing.T, f func(t *testing.T, addr string, rdb *redis.Client)) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			addr := srv.addr(t)
			f(t, addr, newClient(t, addr))
		})
	}
}

// instance is a lockd instance over addr with a pool of its own, like a
// process, closed when the test ends.
func instance(t *testing.T, addr string, opts lockd.Options) *lockd.Backend {
	b := lockd.New(newClient(t, addr), opts)
	t.Cleanup(func() { b.Close() })
	return b
}

// hold has "holder" acquire resource r through b, without waiting.
func hold(t *testing.T, b *lockd.Backend) lockapi.Lease {
	t.Helper()
	l, err := b.Acquire(context.Background(), "r", "holder", time.Minute, 0, "h1")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// queued waits (at most 2 s) until resource's wait queue holds n entries.
func queued(t *testing.T, rdb *redis.Client, resource string, n int64) {
	t.Helper()
	key := "fencesim:{" + resource + "}:queue"
	var got int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		got = rdb.ZCard(context.Background(), key).Val()
		if got == n {
			return
		}
	}
	t.Fatalf("%s holds %d waiters, want %d", key, got, n)
}

type grant struct {
	who   int
	token uint64
	err   error
}

// TestQueueGrantsInArrivalOrder: waiters queued one after another, on two
// instances sharing one Redis, are granted in the order they came, each
// handed the lock by the previous holder's release, with tokens rising.
// The retry loop the queue replaced granted whichever attempt came first
// after a release, so the order was a matter of luck (1 in 120 for five).
func TestQueueGrantsInArrivalOrder(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		bs := [2]*lockd.Backend{instance(t, addr, lockd.Options{}), instance(t, addr, lockd.Options{})}
		first := hold(t, bs[0])
		const n = 5
		grants := make(chan grant, n)
		for i := range n {
			b := bs[i%2]
			go func() {
				client := "w" + strconv.Itoa(i)
				l, err := b.Acquire(ctx, "r", client, time.Minute, 10*time.Second, "q")
				if err == nil {
					// Hold it a little, so that the next waiters
					// cannot pass for lack of a holder.
					time.Sleep(5 * time.Millisecond)
					err = b.Release(ctx, "r", client, l.Token, "")
				}
				grants <- grant{i, l.Token, err}
			}()
			queued(t, rdb, "r", int64(i+1))
		}
		if err := bs[1].Release(ctx, "r", "holder", first.Token, ""); err != nil {
			t.Fatal(err)
		}
		last := first.Token
		for want := range n {
			select {
			case g := <-grants:
				if g.err != nil {
					t.Fatalf("waiter %d: %v", g.who, g.err)
				}
				if g.who != want || g.token <= last {
					t.Fatalf("grant %d went to waiter %d with token %d (previous %d), want waiter %d with a higher token", want, g.who, g.token, last, want)
				}
				last = g.token
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter %d not granted within 5s", want)
			}
		}
		queued(t, rdb, "r", 0)
	})
}

// TestQueueWaiterWhoGivesUpLeaves: a waiter whose wait passes, and one
// whose request is cancelled, leave the queue at once, so the waiter
// behind them is granted as soon as the lock is released — not a queue
// lease (a minute here) later, when their entries would lapse.
func TestQueueWaiterWhoGivesUpLeaves(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		b := instance(t, addr, lockd.Options{QueueLease: time.Minute})
		held := hold(t, b)
		gaveUp := make(chan error, 1)
		go func() {
			_, err := b.Acquire(ctx, "r", "impatient", time.Minute, 150*time.Millisecond, "q")
			gaveUp <- err
		}()
		queued(t, rdb, "r", 1)
		cctx, cancel := context.WithCancel(ctx)
		cancelled := make(chan error, 1)
		go func() {
			_, err := b.Acquire(cctx, "r", "cancelled", time.Minute, time.Minute, "q")
			cancelled <- err
		}()
		queued(t, rdb, "r", 2)
		next := make(chan grant, 1)
		go func() {
			l, err := b.Acquire(ctx, "r", "patient", time.Minute, time.Minute, "q")
			next <- grant{token: l.Token, err: err}
		}()
		queued(t, rdb, "r", 3)
		var he *lockapi.HeldError
		if err := <-gaveUp; !errors.As(err, &he) {
			t.Fatalf("a waiter whose wait passed: %v, want held", err)
		}
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled waiter: %v, want context.Canceled", err)
		}
		queued(t, rdb, "r", 1)
		start := time.Now()
		if err := b.Release(ctx, "r", "holder", held.Token, ""); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-next:
			if g.err != nil || g.token <= held.Token {
				t.Fatalf("the waiter behind: token %d, %v; want one above %d", g.token, g.err, held.Token)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the waiter behind two that gave up was not granted within 2s of the release")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("granted %v after the release", d)
		}
	})
}

// TestQueueAbandonedEntryLapses: an entry its instance left behind (it died
// while waiting: nobody refreshes the entry, nobody takes it out) keeps the
// free lock for itself only until its queue lease passes: before, an
// acquire without wait is refused (it does not jump the line); after, it
// is granted, and the dead entry is gone.
func TestQueueAbandonedEntryLapses(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		b := instance(t, addr, lockd.Options{QueueLease: time.Minute})
		held := hold(t, b)
		// The dead instance's waiter: queued with a 300 ms lease, as
		// its instance's acquire queued it, and never heard of again.
		const lease = 300 * time.Millisecond
		queueGhost(t, rdb, time.Minute, lease)
		// The lock freed by its lease's end, not by a release (which
		// would hand it to the ghost): nobody is told, and nobody asks
		// until the ghost's entry has lapsed.
		if err := rdb.Del(ctx, "fencesim:{r}:lock").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease + 50*time.Millisecond)
		l, err := b.Acquire(ctx, "r", "barger", time.Minute, 0, "b2")
		if err != nil || l.Token <= held.Token {
			t.Fatalf("once the dead entry lapsed: token %d, %v; want granted above %d", l.Token, err, held.Token)
		}
		queued(t, rdb, "r", 0)
	})
}

// TestQueueFreeLockGoesToTheHead: an acquire that finds the lock free
// with a live head in line (the lease ended without a release, the head
// not yet back) hands the lock to the head there and then, as a release
// would, so its held answer names a client that holds the lease: a held
// answer about a lock nobody holds is not one a mutex gives. The head,
// here an instance that died, holds it for its ttl, as a grant whose
// reply was lost does; then the lock is the asker's.
func TestQueueFreeLockGoesToTheHead(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		b := instance(t, addr, lockd.Options{QueueLease: time.Minute})
		held := hold(t, b)
		const ttl = 300 * time.Millisecond
		queueGhost(t, rdb, ttl, time.Minute)
		if err := rdb.Del(ctx, "fencesim:{r}:lock").Err(); err != nil {
			t.Fatal(err)
		}
		var he *lockapi.HeldError
		if _, err := b.Acquire(ctx, "r", "barger", time.Minute, 0, "b1"); !errors.As(err, &he) || he.Holder != "ghost" {
			t.Fatalf("an acquire without wait of a free lock with ghost in line: %v, want held for ghost", err)
		}
		if v := rdb.Get(ctx, "fencesim:{r}:lock").Val(); !strings.HasPrefix(v, "ghost q ") {
			t.Fatalf("the lock after the held answer: %q, want ghost's lease (the answer named a holder that does not hold it)", v)
		}
		queued(t, rdb, "r", 0)
		// Ghost's lease ends (miniredis expires keys only when told to).
		if err := rdb.Del(ctx, "fencesim:{r}:lock").Err(); err != nil {
			t.Fatal(err)
		}
		l, err := b.Acquire(ctx, "r", "barger", time.Minute, 0, "b2")
		if err != nil || l.Token <= held.Token+1 {
			t.Fatalf("once ghost's lease ended: token %d, %v; want granted above ghost's %d", l.Token, err, held.Token+1)
		}
	})
}

// TestQueueAnsweredHeadLeavesTheLine: the queue's head is a request
// answered already (a copy of it granted outside the line: its memory
// holds the answer). An acquire finding the lock free drops it from the
// line and, the line empty, is granted, instead of answering held with
// the lock free for a head that can never take it.
func TestQueueAnsweredHeadLeavesTheLine(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		b := instance(t, addr, lockd.Options{QueueLease: time.Minute})
		held := hold(t, b)
		queueGhost(t, rdb, 300*time.Millisecond, time.Minute)
		if err := rdb.Set(ctx, "fencesim:{r}:req:ghost q", "7", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, "fencesim:{r}:lock").Err(); err != nil {
			t.Fatal(err)
		}
		l, err := b.Acquire(ctx, "r", "barger", time.Minute, 0, "b1")
		if err != nil || l.Token <= held.Token {
			t.Fatalf("an acquire of a free lock behind an answered head: token %d, %v; want granted above %d", l.Token, err, held.Token)
		}
		queued(t, rdb, "r", 0)
	})
}

// queueGhost queues, for resource "r", the waiter of an instance that
// died: client ghost's request q for a lease of ttl, its entry's queue
// lease given, as its instance's acquire queued it.
func queueGhost(t *testing.T, rdb *redis.Client, ttl, lease time.Duration) {
	t.Helper()
	ctx := context.Background()
	ghost := scripts.Queue{Prefix: "fencesim:"}.Acquire(
		scripts.AcquireCall("fencesim:", "r", "ghost", "q", ttl, scripts.Memory).WithFence("fencesim:epoch", "fencesim:grants", rdb.Get(ctx, "fencesim:epoch").Val(), 0),
		"r", lease, time.Minute)
	if err := rdb.Eval(ctx, ghost.Script, ghost.Keys, toAny(ghost.Args)...).Err(); err != nil {
		t.Fatal(err)
	}
	queued(t, rdb, "r", 1)
}

// TestQueueCopiesOfOneRequestShareAGrant: two copies of one request (its
// client retried on a second instance while the first still waited) take
// one place in line and are answered one grant, the same token.
func TestQueueCopiesOfOneRequestShareAGrant(t *testing.T) {
	onEachServer(t, func(t *testing.T, addr string, rdb *redis.Client) {
		ctx := context.Background()
		bs := [2]*lockd.Backend{instance(t, addr, lockd.Options{}), instance(t, addr, lockd.Options{})}
		held := hold(t, bs[0])
		grants := make(chan grant, 2)
		deadlines := "fencesim:{r}:deadlines"
		for i, b := range bs {
			time.Sleep(5 * time.Millisecond) // the copies' deadlines differ
			before := rdb.ZScore(ctx, deadlines, "c q1 60000 60000").Val()
			go func() {
				l, err := b.Acquire(ctx, "r", "c", time.Minute, 10*time.Second, "q1")
				grants <- grant{i, l.Token, err}
			}()
			// Each copy's attempt pushes the one entry's deadline on.
			for end := time.Now().Add(2 * time.Second); rdb.ZScore(ctx, deadlines, "c q1 60000 60000").Val() <= before; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("copy %d did not queue within 2s", i)
				}
			}
			queued(t, rdb, "r", 1)
		}
		if err := bs[0].Release(ctx, "r", "holder", held.Token, ""); err != nil {
			t.Fatal(err)
		}
		var toks []uint64
		for range 2 {
			select {
			case g := <-grants:
				if g.err != nil {
					t.Fatalf("copy on instance %d: %v", g.who, g.err)
				}
				toks = append(toks, g.token)
			case <-time.After(5 * time.Second):
				t.Fatal("a copy was not answered within 5s")
			}
		}
		if toks[0] != toks[1] || toks[0] != held.Token+1 {
			t.Fatalf("the two copies got tokens %v, want one grant, token %d", toks, held.Token+1)
		}
	})
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// TestQueueLostWakeCostsARefresh: a waiter that hears nothing (its
// instance has no subscription: here closed before it waits) still gets
// the lock handed to it, at its next refresh (a quarter queue lease).
func TestQueueLostWakeCostsARefresh(t *testing.T) {
	ctx := context.Background()
	addr := miniredis.RunT(t).Addr()
	rdb := newClient(t, addr)
	deaf := instance(t, addr, lockd.Options{QueueLease: 400 * time.Millisecond})
	deaf.Close()
	b := instance(t, addr, lockd.Options{})
	held := hold(t, b)
	got := make(chan grant, 1)
	go func() {
		l, err := deaf.Acquire(ctx, "r", "deaf", time.Minute, 10*time.Second, "q")
		got <- grant{token: l.Token, err: err}
	}()
	queued(t, rdb, "r", 1)
	if err := b.Release(ctx, "r", "holder", held.Token, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g.err != nil || g.token != held.Token+1 {
			t.Fatalf("the deaf waiter: token %d, %v; want %d", g.token, g.err, held.Token+1)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a waiter that missed its hand-over was not granted within 2s (its refresh is 100ms)")
	}
}
