package realclock_test

import (
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realclock"
)

// realEnv is a process.Env on the machine's clock, for one node whose
// process runs on an executor: the least a real runtime provides. Its
// replies go to a channel; its disk is memDisk.
type realEnv struct {
	clock   *realclock.Clock
	disk    *memDisk
	rng     *rand.Rand
	replies chan lockservice.LockReply
}

func (e *realEnv) ID() process.NodeID   { return 0 }
func (e *realEnv) Name() string         { return "lock" }
func (e *realEnv) Clock() process.Clock { return e.clock }
func (e *realEnv) Disk() process.Disk   { return e.disk }
func (e *realEnv) Rand() *rand.Rand     { return e.rng }
func (e *realEnv) Log() *slog.Logger    { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (e *realEnv) Send(_ process.NodeID, m process.Message) {
	e.replies <- m.(lockservice.LockReply)
}

// memDisk is a process.Disk in memory whose Sync keeps what a crash would.
// The file-backed disk replaces it for real; here it lets a restarted
// server find what its predecessor synced.
type memDisk struct{ cur, synced map[string][]byte }

func newMemDisk() *memDisk { return &memDisk{cur: map[string][]byte{}, synced: map[string][]byte{}} }

func (d *memDisk) Write(key string, value []byte) { d.cur[key] = slices.Clone(value) }
func (d *memDisk) Append(key string, data []byte) {
	d.cur[key] = append(slices.Clip(d.cur[key]), data...)
}
func (d *memDisk) Delete(key string) { delete(d.cur, key) }
func (d *memDisk) Read(key string) ([]byte, bool) {
	v, ok := d.cur[key]
	return v, ok
}
func (d *memDisk) Keys(prefix string) []string {
	var keys []string
	for k := range d.cur {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
func (d *memDisk) Sync() { d.synced = maps.Clone(d.cur) }

// crash forgets every write since the last Sync.
func (d *memDisk) crash() { d.cur = maps.Clone(d.synced) }

// events records what the server reports, on the executor.
type events []lockservice.Event

func (ev *events) Observe(e lockservice.Event) { *ev = append(*ev, e) }

// TestServerOnTheRealClock runs the single-node lock server, the same code
// the simulator runs, on the machine's clock: it grants, refuses a second
// client, renews, releases, lets a lease expire by a real timer, and after
// a crash and restart from what it synced refuses the holder's rival and
// grants a larger token than before.
func TestServerOnTheRealClock(t *testing.T) {
	const ttl = 100 * time.Millisecond
	e := newExecutor(t)
	env := &realEnv{
		clock:   realclock.New(e.post),
		disk:    newMemDisk(),
		rng:     rand.New(rand.NewPCG(1, 2)),
		replies: make(chan lockservice.LockReply, 16),
	}
	var seen events
	srv := lockservice.NewServer(lockservice.ServerConfig{Limits: lockservice.DefaultLimits(), Observer: &seen})
	e.do(func() { srv.Start(env) })

	var req uint64
	ask := func(m process.Message) lockservice.LockReply {
		t.Helper()
		e.do(func() { srv.Receive(env, 1, m) })
		return within(t, env.replies, "the server's reply")
	}
	acquire := func(client string) lockservice.LockReply {
		req++
		return ask(lockservice.AcquireRequest{Resource: "r", Client: client, TTL: ttl, Request: req})
	}
	expect := func(what string, got lockservice.LockReply, want lockservice.Status) {
		t.Helper()
		if got.Status != want {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}

	a := acquire("a")
	expect("a acquires", a, lockservice.Granted)
	expect("b acquires while a holds", acquire("b"), lockservice.Busy)
	req++
	expect("a renews", ask(lockservice.RenewRequest{Resource: "r", Client: "a", Token: a.Token, Request: req}), lockservice.Renewed)
	req++
	expect("a releases", ask(lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: a.Token, Request: req}), lockservice.Released)

	b := acquire("b")
	expect("b acquires after a released", b, lockservice.Granted)
	var granted time.Duration
	e.do(func() { granted = env.clock.Monotonic() })
	var expired bool
	for end := time.Now().Add(10 * time.Second); !expired && time.Now().Before(end); time.Sleep(ttl / 10) {
		e.do(func() { expired = seen[len(seen)-1].Kind == lockservice.EvEnded })
	}
	if !expired {
		t.Fatalf("b's lease did not expire within 10s; events %v", seen)
	}
	var at time.Duration
	e.do(func() { at = env.clock.Monotonic() })
	if at-granted < ttl {
		t.Fatalf("b's lease ended %v after its grant, before its TTL of %v", at-granted, ttl)
	}

	c := acquire("c")
	expect("c acquires after b's lease expired", c, lockservice.Granted)
	e.do(env.disk.crash)
	srv = lockservice.NewServer(lockservice.ServerConfig{Limits: lockservice.DefaultLimits(), Observer: &seen})
	e.do(func() { srv.Start(env) })
	expect("a acquires after the restart while c holds", acquire("a"), lockservice.Busy)

	var got []string
	e.do(func() {
		for _, ev := range seen {
			got = append(got, ev.Kind.String()+" "+ev.Client+" "+ev.Reason)
		}
	})
	want := []string{"granted a ", "renewed a ", "ended a released", "granted b ", "ended b expired", "granted c "}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if !(a.Token < b.Token && b.Token < c.Token) {
		t.Errorf("tokens a %d, b %d, c %d: want them growing", a.Token, b.Token, c.Token)
	}
}
