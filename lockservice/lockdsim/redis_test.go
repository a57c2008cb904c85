package lockdsim_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockd/scripts"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/sim"
)

// step is one script call, after a pause.
type step struct {
	after time.Duration
	call  scripts.Call
}

// raw is a script of the test's own (the Redis process runs any script).
func raw(src string, keys []string, args ...string) scripts.Call {
	return scripts.Call{Script: src, Keys: keys, Args: args}
}

const (
	p        = "t:"
	ttl      = 200 * time.Millisecond
	setFence = "return redis.call('SET', KEYS[1], ARGV[1])"
)

// story exercises every script of lockd, every branch of acquire, and
// Redis's conversions of script results.
func story() []step {
	mem := scripts.Memory
	k := scripts.KeysOf(p, "r")
	held := func(client, id string) scripts.Call { c, _ := scripts.HeldCall(p, "r", client, id, mem); return c }
	return []step{
		{0, scripts.AcquireCall(p, "r", "alice", "q1", ttl, mem)},          // granted 1
		{0, scripts.AcquireCall(p, "r", "bob", "q2", ttl, mem)},            // held by alice
		{0, scripts.AcquireCall(p, "r", "alice", "q1", ttl, mem)},          // the same request: 1 again
		{0, scripts.RenewCall(p, "r", "alice", 1, ttl, mem)},               // 1
		{0, scripts.RenewCall(p, "r", "bob", 1, ttl, mem)},                 // 0
		{0, scripts.ReleaseCall(p, "r", "alice", 1, "rel1")},               // 1
		{0, scripts.ReleaseCall(p, "r", "alice", 1, "rel1")},               // its retry: 1
		{0, scripts.ReleaseCall(p, "r", "alice", 1, "rel2")},               // another release: 0
		{0, scripts.AcquireCall(p, "r", "alice", "q1", ttl, mem)},          // a late copy: 1, ended
		{0, held("bob", "q2")},                                             // settled held: 0
		{0, scripts.AcquireCall(p, "r", "bob", "q2", ttl, mem)},            // a late copy: held
		{0, scripts.AcquireCall(p, "r", "bob", "q3", ttl, mem)},            // granted 2
		{0, held("bob", "q3")},                                             // granted meanwhile: "2"
		{0, scripts.GetCall(p, "r")},                                       // bob 2
		{3 * ttl / 2, scripts.GetCall(p, "r")},                             // expired
		{0, scripts.AcquireCall(p, "r", "carol", "q4", ttl, 0)},            // granted 3, no memory
		{0, scripts.ReleaseCall(p, "r", "carol", 3, "")},                   // 1
		{0, scripts.AcquireCall(p, "r", "carol", "q4", ttl, 0)},            // forgotten: granted 4
		{0, raw(setFence, []string{k.Fence}, "18446744073709551614")},      // OK
		{0, scripts.ReleaseCall(p, "r", "carol", 4, "")},                   // 1
		{0, scripts.AcquireCall(p, "r", "dave", "q5", ttl, mem)},           // the last token
		{0, scripts.ReleaseCall(p, "r", "dave", 18446744073709551615, "")}, // 1
		{0, scripts.AcquireCall(p, "r", "dave", "q6", ttl, mem)},           // exhausted
		{0, raw(setFence, []string{k.Fence}, "12x")},                       // OK
		{0, scripts.AcquireCall(p, "r", "erin", "q7", ttl, mem)},           // not a decimal
		{0, raw("return {1.9, true, false, 'x', {2, 'y'}, -3}", nil)},      // conversions
		{0, raw("return {1, nil, 3}", nil)},                                // cut at the nil
		{0, raw("return redis.call('SET', KEYS[1], 'v', 'NX', 'PX', '5000')", []string{"t:x"})},
		{0, raw("return redis.call('SET', KEYS[1], 'v', 'NX')", []string{"t:x"})}, // nil
		{0, raw("return redis.call('PTTL', KEYS[1])", []string{"t:none"})},        // -2
		{0, raw("return redis.pcall('PEXPIRE', KEYS[1], 'soon')", []string{"t:x"})},
		{0, raw("return redis.call('DEL', KEYS[1], KEYS[2])", []string{"t:x", "t:none"})}, // 1
	}
}

// normal makes replies of the two worlds comparable: times left (any
// integer above 1) are "ms", and an error is known by what it says.
func normal(v any, err error) any {
	if err != nil {
		for _, w := range []string{"exhausted", "decimal", "not an integer"} {
			if strings.Contains(err.Error(), w) {
				return "error: " + w
			}
		}
		return "error: " + err.Error()
	}
	switch v := v.(type) {
	case int64:
		if v > 1 {
			return "ms"
		}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normal(e, nil)
		}
		return out
	}
	return v
}

// driver sends the story's calls to the Redis process and keeps the
// replies.
type driver struct {
	env     sim.Env
	replies map[uint64]lockdsim.EvalReply
}

func (d *driver) Start(env sim.Env) { d.env = env }
func (d *driver) Receive(_ sim.Env, _ sim.NodeID, msg sim.Message) {
	if r, ok := msg.(lockdsim.EvalReply); ok {
		d.replies[r.ID] = r
	}
}

// runSim runs steps on the simulated Redis, one at a time.
func runSim(t *testing.T, steps []step) []any {
	w := simtest.NewTestWorld(t, nil)
	redis := simtest.AddNode(t, w, "redis", func() sim.Process { return lockdsim.NewRedis(lockdsim.RedisConfig{}) }, fakeclock.Config{})
	d := &driver{replies: map[uint64]lockdsim.EvalReply{}}
	simtest.AddNode(t, w, "driver", func() sim.Process { return d }, fakeclock.Config{})
	var out []any
	for i, s := range steps {
		at := w.Now() + s.after
		id := uint64(i + 1)
		w.At(at, "send", func() {
			d.env.Send(redis, lockdsim.Eval{ID: id, Script: s.call.Script, Keys: s.call.Keys, Args: s.call.Args})
		})
		w.Run(at+20*time.Millisecond, 1_000_000) // the reply, not the expiry timers
		r, ok := d.replies[id]
		if !ok {
			t.Fatalf("step %d: no reply", i)
		}
		var err error
		if r.Err != "" {
			err = fmt.Errorf("%s", r.Err)
		}
		out = append(out, normal(r.Value, err))
	}
	return out
}

// runReal runs steps on a real redis-server.
func runReal(t *testing.T, steps []step) []any {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	var out []any
	for _, s := range steps {
		time.Sleep(s.after)
		args := make([]any, len(s.call.Args))
		for i, a := range s.call.Args {
			args[i] = a
		}
		keys := s.call.Keys
		if keys == nil {
			keys = []string{}
		}
		v, err := rdb.Eval(ctx, s.call.Script, keys, args...).Result()
		if err == redis.Nil {
			v, err = nil, nil
		}
		out = append(out, normal(v, err))
	}
	return out
}

// TestScriptsAgreeWithRealRedis runs lockd's scripts — and a few of the
// test's own, for Redis's conversions — on a real redis-server and on the
// simulated Redis: every reply is the same (times left only as "ms").
func TestScriptsAgreeWithRealRedis(t *testing.T) { agree(t, story()) }

// agree runs steps on the simulated Redis and on a real one and compares
// every reply.
func agree(t *testing.T, steps []step) {
	got := runSim(t, steps)
	want := runReal(t, steps)
	for i := range steps {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("step %d (%s %v %v): simulated Redis %#v, real Redis %#v", i, scripts.Name(steps[i].call.Script), steps[i].call.Keys, steps[i].call.Args, got[i], want[i])
		}
	}
}

// world is a Redis process and a driver in a small world; call runs one
// script and returns its reply.
type world struct {
	t     *testing.T
	w     *sim.World
	redis sim.NodeID
	d     *driver
	next  uint64
}

func newWorld(t *testing.T, cfg lockdsim.RedisConfig) *world {
	w := simtest.NewTestWorld(t, nil)
	x := &world{t: t, w: w, d: &driver{replies: map[uint64]lockdsim.EvalReply{}}}
	x.redis = simtest.AddNode(t, w, "redis", func() sim.Process { return lockdsim.NewRedis(cfg) }, fakeclock.Config{})
	simtest.AddNode(t, w, "driver", func() sim.Process { return x.d }, fakeclock.Config{})
	return x
}

func (x *world) call(c scripts.Call) lockdsim.EvalReply {
	x.next++
	id, at := x.next, x.w.Now()
	x.w.At(at, "send", func() {
		x.d.env.Send(x.redis, lockdsim.Eval{ID: id, Script: c.Script, Keys: c.Keys, Args: c.Args})
	})
	x.w.Run(at+20*time.Millisecond, 1_000_000)
	r, ok := x.d.replies[id]
	if !ok {
		x.t.Fatalf("no reply to %s", scripts.Name(c.Script))
	}
	return r
}

func (x *world) token(c scripts.Call) string {
	v, _ := x.call(c).Value.([]any)
	if len(v) != 4 || v[0] != int64(1) {
		x.t.Fatalf("acquire: %v, want granted", v)
	}
	return v[1].(string)
}

// TestAOFKeepsWhatWasAcknowledged: with appendfsync always a crash keeps
// every acknowledged grant and token; with everysec it loses the last
// second's, and the token is issued again — lockd-aof-everysec's story.
func TestAOFKeepsWhatWasAcknowledged(t *testing.T) {
	for _, fsync := range []lockdsim.Fsync{lockdsim.FsyncAlways, lockdsim.FsyncEverySec} {
		x := newWorld(t, lockdsim.RedisConfig{Fsync: fsync})
		if tok := x.token(scripts.AcquireCall(p, "r", "a", "q1", time.Minute, scripts.Memory)); tok != "1" {
			t.Fatalf("first token %s", tok)
		}
		x.w.Crash(x.redis)
		x.w.Restart(x.redis)
		x.w.Run(x.w.Now()+time.Millisecond, 1000)
		v, _ := x.call(scripts.GetCall(p, "r")).Value.([]any)
		lost := v[2] != "1"
		if lost != (fsync == lockdsim.FsyncEverySec) {
			t.Errorf("fsync %v: after the crash %v (lost: %v)", fsync, v, lost)
		}
		b := scripts.AcquireCall(p, "r", "b", "q2", time.Minute, scripts.Memory)
		if fsync == lockdsim.FsyncAlways {
			if v, _ := x.call(b).Value.([]any); v[0] != int64(0) || v[1] != "a" {
				t.Errorf("always: another client's acquire after the crash %v, want held by a", v)
			}
		} else if tok := x.token(b); tok != "1" {
			t.Errorf("everysec: token after the crash %s, want 1 issued again", tok)
		}
	}
}

// TestExpiryByWallClock: Redis expires a key at an absolute wall time, so
// a wall jump on its node ends a lease early (as a real Redis does).
func TestExpiryByWallClock(t *testing.T) {
	var ended []string
	x := newWorld(t, lockdsim.RedisConfig{Watch: func(c lockdsim.Change) { ended = append(ended, c.Op+" "+c.Key) }})
	x.token(scripts.AcquireCall(p, "r", "a", "q1", time.Minute, 0))
	x.w.Clock(x.redis).JumpWall(2 * time.Minute)
	v, _ := x.call(scripts.GetCall(p, "r")).Value.([]any)
	if v[0] != "" {
		t.Fatalf("after a wall jump past the lease: %v, want it expired", v)
	}
	if want := []string{"set t:{r}:fence", "set t:{r}:lock", "expired t:{r}:lock"}; !reflect.DeepEqual(ended, want) {
		t.Fatalf("changes %q, want %q", ended, want)
	}
}

// TestTornAOFTailIsDropped: a crash that tears the last record keeps the
// records before it, and the Redis process starts (aof-load-truncated).
func TestTornAOFTailIsDropped(t *testing.T) {
	x := newWorld(t, lockdsim.RedisConfig{Fsync: lockdsim.FsyncEverySec})
	x.token(scripts.AcquireCall(p, "r", "a", "q1", time.Minute, 0))
	x.w.Run(x.w.Now()+1100*time.Millisecond, 1_000_000) // the second's sync
	x.token(scripts.AcquireCall(p, "s", "a", "q2", time.Minute, 0))
	x.w.CrashTorn(x.redis, 0.5)
	x.w.Restart(x.redis)
	x.w.Run(x.w.Now()+time.Millisecond, 1000)
	r, _ := x.call(scripts.GetCall(p, "r")).Value.([]any)
	s, _ := x.call(scripts.GetCall(p, "s")).Value.([]any)
	if r[2] != "1" || s[2] != "0" {
		t.Fatalf("after a torn crash: r %v, s %v; want r's synced grant kept and s's torn one dropped", r, s)
	}
}

// TestAOFCutSurvivesATornCrash: Redis restarts on a slow disk with a torn
// AOF tail and cuts it, and a torn crash comes while the cut is being
// synced. The synced records before the tail stay: the cut is a
// truncation, never a rewrite of the good prefix (which the crash could
// tear, losing acknowledged grants).
func TestAOFCutSurvivesATornCrash(t *testing.T) {
	for _, keep := range []float64{0, 0.5, 0.9} {
		x := newWorld(t, lockdsim.RedisConfig{Fsync: lockdsim.FsyncEverySec})
		x.token(scripts.AcquireCall(p, "r", "a", "q1", time.Minute, 0))
		x.w.Run(x.w.Now()+1100*time.Millisecond, 1_000_000) // the second's sync
		x.token(scripts.AcquireCall(p, "s", "a", "q2", time.Minute, 0))
		x.w.CrashTorn(x.redis, 0.5) // a torn tail
		x.w.SetSyncDelay(x.redis, 50*time.Millisecond)
		x.w.Restart(x.redis)
		x.w.Run(x.w.Now()+10*time.Millisecond, 1000) // the cut's sync is in flight
		if _, ok := x.w.Disk(x.redis).SyncDone(); !ok {
			t.Fatalf("keep %v: the restart's cut is not in flight", keep)
		}
		x.w.CrashTorn(x.redis, keep)
		x.w.SetSyncDelay(x.redis, 0)
		x.w.Restart(x.redis)
		x.w.Run(x.w.Now()+time.Millisecond, 1000)
		if r, _ := x.call(scripts.GetCall(p, "r")).Value.([]any); r[2] != "1" {
			t.Fatalf("keep %v: after a torn crash during the AOF cut: r %v, want its synced grant kept", keep, r)
		}
	}
}

// queueStory exercises lockd's wait-queue scripts (scripts.Queue) and the
// commands they call: sorted sets, TIME, EXISTS, INCR, PUBLISH.
func queueStory() []step {
	mem := scripts.Memory
	q := scripts.Queue{Prefix: p}
	acq := func(client, id string, lease, left time.Duration) scripts.Call {
		c := scripts.AcquireCall(p, "q", client, id, ttl, mem).WithFence(p+"epoch", p+"grants", "e1 0", 0)
		return q.Acquire(c, "q", lease, left)
	}
	rel := func(client string, token uint64) scripts.Call {
		return q.Release(scripts.ReleaseCall(p, "q", client, token, ""), "q", p+"epoch", p+"grants", "e1 0", 0)
	}
	queue := []string{p + "{q}:queue"}
	wait := 2 * time.Second
	return []step{
		{0, raw("return redis.call('SET', KEYS[1], 'e1 0')", []string{p + "epoch"})}, // OK
		{0, acq("alice", "a1", 0, 0)},                                                 // granted 1, not queued
		{0, acq("bob", "b1", wait, time.Second)},                                      // held, place 1
		{0, acq("carol", "c1", wait, time.Second)},                                    // held, place 2
		{0, acq("dave", "d1", 0, 0)},                                                  // held, not queued
		{0, acq("bob", "b1", wait, time.Second)},                                      // keeps place 1
		{0, raw("return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", queue)},  // bob 1, carol 2
		{0, raw("return redis.call('ZSCORE', KEYS[1], 'carol c1 200 60000')", queue)}, // "2"
		{0, raw("return {redis.call('ZRANK', KEYS[1], 'carol c1 200 60000'), redis.call('ZRANK', KEYS[1], 'x')}", queue)}, // 1, cut at nil
		{0, rel("alice", 1)},                     // 1, handed to bob
		{0, scripts.GetCall(p, "q")},             // bob b1 2
		{0, acq("bob", "b1", wait, time.Second)}, // granted 2 (the hand-over)
		{0, q.Leave("q", "carol c1 200 60000")},  // 1
		{0, raw("return redis.call('EXISTS', KEYS[1], KEYS[2])", append(queue, p+"{q}:deadlines"))}, // 0: emptied sets are deleted
		{0, acq("erin", "e1", wait, time.Millisecond)},                                              // held, place 1, dead in 1 ms
		{20 * time.Millisecond, rel("bob", 2)},                                                      // 1; erin's entry dropped, nobody handed
		{0, scripts.GetCall(p, "q")},                                                                // free
		{0, raw("return redis.call('INCR', KEYS[1])", []string{p + "grants"})},                      // 3
		{0, raw("local t = redis.call('TIME') return {#t, tonumber(t[2]) < 1000000}", nil)},
		{0, raw("redis.call('ZADD', KEYS[1], 1, 'a', 2, 'c', 2, 'b', 3, 'd') return redis.call('ZRANGEBYSCORE', KEYS[1], '(1', '+inf')", []string{"t:z"})}, // b c d
		{0, raw("return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', 2, 'WITHSCORES')", []string{"t:z"})},
		{0, raw("return redis.call('ZRANGE', KEYS[1], -2, 10)", []string{"t:z"})},                         // c d
		{0, raw("return redis.call('ZADD', KEYS[1], 5, 'a', 6, 'e')", []string{"t:z"})},                   // 1 added
		{0, raw("local r = redis.pcall('GET', KEYS[1]) return string.sub(r.err, 1, 9)", []string{"t:z"})}, // WRONGTYPE
		{0, raw("redis.call('PEXPIRE', KEYS[1], 5000) return redis.call('PTTL', KEYS[1])", []string{"t:z"})},
		{0, raw("return {redis.call('ZREM', KEYS[1], 'a', 'b', 'c', 'd', 'e', 'x'), redis.call('EXISTS', KEYS[1])}", []string{"t:z"})}, // 5, 0
		{0, raw("return redis.call('PUBLISH', 'nobody', 'x')", nil)},                                                                   // 0 subscribers
	}
}

// TestQueueScriptsAgreeWithRealRedis runs the wait queue's scripts on a
// real redis-server and on the simulated Redis: every reply is the same.
func TestQueueScriptsAgreeWithRealRedis(t *testing.T) { agree(t, queueStory()) }

// subscriber is a driver that also hears the Redis process's
// publications.
type subscriber struct {
	driver
	pubs []lockdsim.Published
	runs []uint64
}

func (s *subscriber) Receive(env sim.Env, from sim.NodeID, msg sim.Message) {
	switch m := msg.(type) {
	case lockdsim.Published:
		s.pubs = append(s.pubs, m)
	case lockdsim.Subscribed:
		s.runs = append(s.runs, m.Run)
	default:
		s.driver.Receive(env, from, msg)
	}
}

// TestQueueSurvivesACrashAndPublishes: a release hands the lock to the
// queue's head and publishes the grant to the subscribed session; the
// queue's sorted sets are in the AOF, so a crash keeps the line, and the
// restarted Redis has no subscribers (PUBLISH reaches nobody, replies
// name a new run) until the session subscribes again.
func TestQueueSurvivesACrashAndPublishes(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	redisNode := simtest.AddNode(t, w, "redis", func() sim.Process { return lockdsim.NewRedis(lockdsim.RedisConfig{}) }, fakeclock.Config{})
	s := &subscriber{driver: driver{replies: map[uint64]lockdsim.EvalReply{}}}
	simtest.AddNode(t, w, "sub", func() sim.Process { return s }, fakeclock.Config{})
	var next uint64
	run := func(c scripts.Call) lockdsim.EvalReply {
		next++
		id, at := next, w.Now()
		w.At(at, "send", func() { s.env.Send(redisNode, lockdsim.Eval{ID: id, Script: c.Script, Keys: c.Keys, Args: c.Args}) })
		w.Run(at+20*time.Millisecond, 1_000_000)
		return s.replies[id]
	}
	subscribe := func() {
		at := w.Now()
		w.At(at, "subscribe", func() { s.env.Send(redisNode, lockdsim.Subscribe{Channel: p + "wake", Session: 7}) })
		w.Run(at+20*time.Millisecond, 1_000_000)
	}
	q := scripts.Queue{Prefix: p}
	acq := func(client, id string, lease time.Duration) scripts.Call {
		c := scripts.AcquireCall(p, "q", client, id, time.Minute, scripts.Memory).WithFence(p+"epoch", p+"grants", "e1 0", 0)
		return q.Acquire(c, "q", lease, 10*time.Second)
	}
	subscribe()
	run(raw("return redis.call('SET', KEYS[1], 'e1 0')", []string{p + "epoch"}))
	run(acq("alice", "a1", 0))
	run(acq("bob", "b1", 10*time.Second))
	run(acq("carol", "c1", 10*time.Second))
	before := run(raw("return redis.call('ZRANGE', KEYS[1], 0, -1)", []string{p + "{q}:queue"}))
	w.Crash(redisNode)
	w.Restart(redisNode)
	w.Run(w.Now()+time.Millisecond, 1000)
	after := run(raw("return redis.call('ZRANGE', KEYS[1], 0, -1)", []string{p + "{q}:queue"}))
	if want := []any{"bob b1 60000 60000", "carol c1 60000 60000"}; !reflect.DeepEqual(before.Value, want) || !reflect.DeepEqual(after.Value, before.Value) {
		t.Fatalf("queue before the crash %v, after %v; want %v both", before.Value, after.Value, want)
	}
	if before.Run == after.Run || before.Run == 0 {
		t.Fatalf("runs %d before and %d after a restart: want two different ones", before.Run, after.Run)
	}
	if n := run(raw("return redis.call('PUBLISH', KEYS[1], 'x')", []string{p + "wake"})).Value; n != int64(0) {
		t.Fatalf("PUBLISH after a restart reached %v subscribers, want 0", n)
	}
	subscribe()
	if r := run(q.Release(scripts.ReleaseCall(p, "q", "alice", 1, ""), "q", p+"epoch", p+"grants", "e1 0", 0)); r.Value != int64(1) {
		t.Fatalf("release: %+v", r)
	}
	if len(s.pubs) != 1 || len(s.runs) != 2 || s.runs[1] != after.Run {
		t.Fatalf("publications %+v, subscriptions in runs %v: want one grant, after subscribing in run %d", s.pubs, s.runs, after.Run)
	}
	key, rest := scripts.SplitWake(s.pubs[0].Payload)
	h, ok := scripts.ParseHandOver(rest)
	if key != scripts.Wake("q", "bob b1 60000 60000") || !ok || h.Token != 2 || h.TTL != time.Minute || s.pubs[0].Session != 7 {
		t.Fatalf("publication %+v: want bob's grant of token 2 to session 7", s.pubs[0])
	}
}
