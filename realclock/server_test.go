package realclock_test

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realclock"
)

// realEnv is a process.Env on the machine's clock and a file disk, for one
// node whose process runs on an executor: the least a real runtime
// provides. Its replies go to a channel.
type realEnv struct {
	clock   *realclock.Clock
	disk    *filedisk.Disk
	rng     *rand.Rand
	replies chan lockservice.LockReply
}

func (e *realEnv) ID() process.NodeID   { return 0 }
func (e *realEnv) Name() string         { return "lock" }
func (e *realEnv) Clock() process.Clock { return e.clock }
func (e *realEnv) Disk() process.Disk   { return e.disk }
func (e *realEnv) Rand() *rand.Rand     { return e.rng }
func (e *realEnv) Log() *slog.Logger    { return slog.New(slog.DiscardHandler) }
func (e *realEnv) Send(_ process.NodeID, m process.Message) {
	e.replies <- m.(lockservice.LockReply)
}

// events records what the server reports, on the executor.
type events []lockservice.Event

func (ev *events) Observe(e lockservice.Event) { *ev = append(*ev, e) }

// incarnation is one run of the lock server process on a real node: its
// executor, its clock and its disk, opened on the node's data directory.
type incarnation struct {
	e   *executor
	env *realEnv
	srv *reference.Server
}

// boot starts a server on dir, as a node's runtime does at every (re)start.
func boot(t *testing.T, dir string, obs lockservice.Observer) *incarnation {
	t.Helper()
	disk, err := filedisk.Open(dir, filedisk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t)
	in := &incarnation{
		e: e,
		env: &realEnv{
			clock:   realclock.New(e.post),
			disk:    disk,
			rng:     rand.New(rand.NewPCG(1, 2)),
			replies: make(chan lockservice.LockReply, 16),
		},
		srv: reference.NewServer(reference.ServerConfig{Limits: lockservice.DefaultLimits(), Observer: obs}),
	}
	t.Cleanup(in.stop)
	e.do(func() { in.srv.Start(in.env) })
	return in
}

// stop ends the incarnation: its executor first, so that none of its
// timers runs any more, then its disk.
func (in *incarnation) stop() {
	in.e.stop()
	in.env.disk.Close()
}

// TestServerOnTheRealClock runs the single-node lock server, the same code
// the simulator runs, on the machine's clock and a file disk: it grants,
// refuses a second client, renews, releases, lets a lease expire by a real
// timer, and restarted on its data directory it still refuses the holder's
// rival.
func TestServerOnTheRealClock(t *testing.T) {
	const ttl = 100 * time.Millisecond
	dir := t.TempDir()
	var seen events
	in := boot(t, dir, &seen)

	var req uint64
	ask := func(m process.Message) lockservice.LockReply {
		t.Helper()
		in.e.do(func() { in.srv.Receive(in.env, 1, m) })
		return within(t, in.env.replies, "the server's reply")
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

	// Read before b's acquire is sent: the lease cannot start earlier, so
	// it must not end less than ttl after this (a reading taken after the
	// reply came back could be late by a loaded machine's scheduling).
	var granted time.Duration
	in.e.do(func() { granted = in.env.clock.Monotonic() })
	b := acquire("b")
	expect("b acquires after a released", b, lockservice.Granted)
	var expired bool
	for end := time.Now().Add(10 * time.Second); !expired && time.Now().Before(end); time.Sleep(ttl / 10) {
		in.e.do(func() { expired = seen[len(seen)-1].Kind == lockservice.EvEnded })
	}
	if !expired {
		t.Fatalf("b's lease did not expire within 10s; events %v", seen)
	}
	var at time.Duration
	in.e.do(func() { at = in.env.clock.Monotonic() })
	if at-granted < ttl {
		t.Fatalf("b's lease ended %v after its grant, before its TTL of %v", at-granted, ttl)
	}

	c := acquire("c")
	expect("c acquires after b's lease expired", c, lockservice.Granted)
	in.stop()
	in = boot(t, dir, &seen)
	expect("a acquires after the restart while c holds", acquire("a"), lockservice.Busy)

	var got []string
	in.e.do(func() {
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
