package lockdsim_test

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/sim"
)

// queueWorld is a Redis process, one lockd instance and a probe client.
type queueWorld struct {
	w               *sim.World
	redis, instance sim.NodeID
	probe           *simtest.Probe
	marks           *coverage.Counts
	rdb             *lockdsim.Redis
}

func newQueueWorld(t *testing.T) *queueWorld {
	x := &queueWorld{w: simtest.NewTestWorld(t, nil), marks: &coverage.Counts{}}
	x.redis = simtest.AddNode(t, x.w, "redis", func() sim.Process { x.rdb = lockdsim.NewRedis(lockdsim.RedisConfig{}); return x.rdb }, fakeclock.Config{})
	x.instance = simtest.AddNode(t, x.w, "n1", func() sim.Process {
		return lockdsim.NewInstance(lockdsim.InstanceConfig{Redis: x.redis, Prefix: lockdsim.Prefix, Limits: lockservice.DefaultLimits(), Marks: x.marks})
	}, fakeclock.Config{})
	x.probe, _ = simtest.AddProbe(t, x.w, "client")
	return x
}

func (x *queueWorld) send(m sim.Message) {
	x.probe.SendAt(x.w.Now(), x.instance, m)
	x.w.Run(x.w.Now()+50*time.Millisecond, 1_000_000)
}

// holdAndQueue has a hold r (request 1, token 1) and b wait for it up to
// wait (request 2), and checks that b is in the queue.
func (x *queueWorld) holdAndQueue(t *testing.T, wait time.Duration) {
	t.Helper()
	x.send(acquire("a", 1, 0))
	x.send(acquire("b", 2, wait))
	if _, ok := x.rdb.Get(lockdsim.Prefix + "{r}:queue"); !ok {
		t.Fatal("b is not in the queue")
	}
}

func acquire(client string, req uint64, wait time.Duration) lockservice.AcquireRequest {
	return lockservice.AcquireRequest{Resource: "r", Client: client, TTL: time.Minute, Request: req, Wait: wait}
}

// TestWaiterIsHandedTheLock: a waiting acquire queues; the holder's
// release hands the lock over in the release script, and the waiter is
// answered from the published grant (lockd.queue-hand-over), with the
// next token and the time it waited — after a Redis restart too, once the
// instance has subscribed again.
func TestWaiterIsHandedTheLock(t *testing.T) {
	x := newQueueWorld(t)
	tok := uint64(0)
	for round, redisRestart := range []bool{false, true} {
		if redisRestart {
			x.w.Crash(x.redis)
			x.w.Restart(x.redis)
			x.w.Run(x.w.Now()+time.Millisecond, 1000)
		}
		base := uint64(10 * (round + 1))
		x.send(acquire("a", base+1, 0))
		if r := x.probe.OnlyLockReply(t, base+1); r.Status != lockservice.Granted || r.Token != tok+1 {
			t.Fatalf("round %d: a's acquire %+v, want token %d", round, r, tok+1)
		}
		x.send(acquire("b", base+2, 5*time.Second))
		if got := x.probe.LockReplies(base + 2); len(got) != 0 {
			t.Fatalf("round %d: b answered %+v while a holds", round, got)
		}
		x.w.Run(x.w.Now()+300*time.Millisecond, 1_000_000) // b refreshes its entry meanwhile
		before := x.marks.Get(coverage.LockdQueueHandOver)
		x.send(lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: tok + 1, Request: base + 3})
		if r := x.probe.OnlyLockReply(t, base+3); r.Status != lockservice.Released {
			t.Fatalf("round %d: release %+v", round, r)
		}
		r := x.probe.OnlyLockReply(t, base+2)
		if r.Status != lockservice.Granted || r.Token != tok+2 || r.Waited < 300*time.Millisecond {
			t.Fatalf("round %d: b's wait answered %+v, want token %d after 300ms or more", round, r, tok+2)
		}
		if x.marks.Get(coverage.LockdQueueHandOver) != before+1 {
			t.Fatalf("round %d: b was not answered from the hand-over's publication", round)
		}
		x.send(lockservice.ReleaseRequest{Resource: "r", Client: "b", Token: tok + 2, Request: base + 4})
		tok += 2
	}
}

// TestWaiterLeavesWhenItsWaitPasses: a waiter whose wait passes leaves
// the queue (the queue's key is gone at once, not a lease later) and is
// answered busy; the next acquire is not kept out by it.
func TestWaiterLeavesWhenItsWaitPasses(t *testing.T) {
	x := newQueueWorld(t)
	x.holdAndQueue(t, 200*time.Millisecond)
	x.w.Run(x.w.Now()+400*time.Millisecond, 1_000_000)
	if r := x.probe.OnlyLockReply(t, 2); r.Status != lockservice.Busy {
		t.Fatalf("b's wait answered %+v, want busy", r)
	}
	if _, ok := x.rdb.Get(lockdsim.Prefix + "{r}:queue"); ok {
		t.Fatal("b's entry is still queued after its wait passed")
	}
	x.send(lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: 1, Request: 3})
	x.send(acquire("c", 4, 0))
	if r := x.probe.OnlyLockReply(t, 4); r.Status != lockservice.Granted || r.Token != 2 {
		t.Fatalf("c's acquire %+v, want token 2", r)
	}
}

// TestWaiterWhoseCallTimesOutLeaves: a queued waiter whose refresh of
// its entry gets no answer from Redis within the timeout leaves the line
// (as lockd leaves it when a call fails) and answers nothing; the entry
// does not hold the line up for its lease.
func TestWaiterWhoseCallTimesOutLeaves(t *testing.T) {
	x := newQueueWorld(t)
	x.holdAndQueue(t, 30*time.Second)
	x.w.Block(x.redis, x.instance) // Redis's replies are lost; the instance's calls arrive
	// A refresh every quarter queue lease (0.5 s), given up after the
	// 1 s timeout; the entry itself would lapse 2 s after the last
	// refresh that reached Redis.
	x.w.Run(x.w.Now()+1700*time.Millisecond, 1_000_000)
	if got := x.probe.LockReplies(2); len(got) != 0 {
		t.Fatalf("b answered %+v, want nothing", got)
	}
	if _, ok := x.rdb.Get(lockdsim.Prefix + "{r}:queue"); ok {
		t.Fatal("b's entry is still queued after its call to Redis timed out")
	}
}
