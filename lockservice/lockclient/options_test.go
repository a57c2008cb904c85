package lockclient

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/sim"
)

// The state machine's additions for clients outside the simulator
// (Options, ReceiveHint, NoAnswer, ReleaseResult), driven in a small world:
// node 0 and 1 are silent servers that record what reaches them; the test
// plays the transport, answering through ReceiveHint and NoAnswer.

type silent struct{ got *[]stamped }

type stamped struct {
	at  time.Duration
	to  process.NodeID
	msg process.Message
}

func (s silent) Start(process.Env) {}
func (s silent) Receive(env process.Env, _ process.NodeID, m process.Message) {
	*s.got = append(*s.got, stamped{env.Clock().Monotonic(), env.ID(), m})
}

type events struct{ granted, failed, released int }

func (e *events) Granted()    { e.granted++ }
func (e *events) Lost(string) {}
func (e *events) Released()   { e.released++ }
func (e *events) Failed()     { e.failed++ }

type host struct{ l *Lock }

func (h host) Start(env process.Env)                                         { h.l.Start(env) }
func (h host) Receive(_ process.Env, from process.NodeID, m process.Message) { h.l.Receive(from, m) }

type rig struct {
	w   *sim.World
	l   *Lock
	ev  *events
	got []stamped
}

func newRig(t *testing.T, o Options) *rig {
	return newRigConfig(t, o, func(cfg *lockservice.ClientConfig) {
		cfg.RequestTimeout = time.Second // longer than anything the tests wait for
	})
}

func newRigConfig(t *testing.T, o Options, edit func(*lockservice.ClientConfig)) *rig {
	r := &rig{w: simtest.NewTestWorld(t, nil), ev: &events{}}
	for _, n := range []string{"s0", "s1"} {
		simtest.AddNode(t, r.w, n, func() sim.Process { return silent{&r.got} }, fakeclock.Config{})
	}
	cfg := lockservice.DefaultClientConfig("c", []process.NodeID{0, 1}, "r")
	edit(&cfg)
	r.l = NewLock(cfg, nil, r.ev)
	r.l.SetOptions(o)
	simtest.AddNode(t, r.w, "c", func() sim.Process { return host{r.l} }, fakeclock.Config{})
	r.w.Run(0, 100)
	return r
}

// at runs f at true time at, then runs the world until until.
func (r *rig) at(at time.Duration, f func(), until time.Duration) {
	r.w.At(at, "test", f)
	r.w.Run(until, 10_000)
}

func (r *rig) acquires() []lockservice.AcquireRequest {
	var out []lockservice.AcquireRequest
	for _, s := range r.got {
		if m, ok := s.msg.(lockservice.AcquireRequest); ok {
			out = append(out, m)
		}
	}
	return out
}

// An Overloaded answer with a 300 ms hint: no retry before 300 ms, one by
// 450 ms (plus the network's delay), with the same request id when
// KeepRequestWhenOverloaded, a new one otherwise.
func TestOverloadHintAndRequestID(t *testing.T) {
	for _, keep := range []bool{true, false} {
		r := newRig(t, Options{KeepRequestWhenOverloaded: keep})
		r.at(0, r.l.Acquire, 100*time.Millisecond)
		first := r.acquires()
		if len(first) != 1 {
			t.Fatalf("%d acquires sent, want 1", len(first))
		}
		req := first[0].Request
		r.at(100*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.Overloaded}, 300*time.Millisecond)
		}, 399*time.Millisecond)
		if n := len(r.acquires()); n != 1 {
			t.Fatalf("keep=%v: retried before the 300ms hint passed (%d acquires)", keep, n)
		}
		r.w.Run(600*time.Millisecond, 10_000)
		got := r.acquires()
		if len(got) != 2 {
			t.Fatalf("keep=%v: %d acquires by 600ms, want the retry", keep, len(got))
		}
		if same := got[1].Request == req; same != keep {
			t.Fatalf("keep=%v: retry's request %d, first %d", keep, got[1].Request, req)
		}
	}
}

// TryOnce: Busy ends the acquire with Failed and nothing more is sent.
func TestTryOnceBusyFails(t *testing.T) {
	r := newRig(t, Options{TryOnce: true})
	r.at(0, r.l.Acquire, 10*time.Millisecond)
	req := r.acquires()[0].Request
	r.at(10*time.Millisecond, func() {
		r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.Busy}, 50*time.Millisecond)
	}, 5*time.Second)
	if r.ev.failed != 1 || len(r.acquires()) != 1 {
		t.Fatalf("failed %d times, %d acquires: want Failed once and no retry", r.ev.failed, len(r.acquires()))
	}
}

// NoAnswer retries the acquire at the next server after a backoff, with
// the same id, long before the request timeout.
func TestNoAnswerRetriesAtOnceElsewhere(t *testing.T) {
	r := newRig(t, Options{})
	r.at(0, r.l.Acquire, 10*time.Millisecond)
	req := r.acquires()[0].Request
	r.at(10*time.Millisecond, func() { r.l.NoAnswer(req) }, 200*time.Millisecond)
	got := r.acquires()
	if len(got) != 2 || got[1].Request != req || r.got[1].to != 1 {
		t.Fatalf("after NoAnswer: %+v, want the same request again at s1 within the backoff", r.got)
	}
}

// A release whose first attempt got no answer and whose retry hears
// NotHolder released the lock: ReleaseResult says Released. Answered
// NotHolder at once, it says NotHolder.
func TestReleaseResultAfterNoAnswer(t *testing.T) {
	for _, lostFirst := range []bool{true, false} {
		r := newRig(t, Options{})
		r.at(0, r.l.Acquire, 10*time.Millisecond)
		req := r.acquires()[0].Request
		r.at(10*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.Granted, Token: 7, TTL: time.Second}, 0)
		}, 20*time.Millisecond)
		if !r.l.Held() {
			t.Fatal("not held after Granted")
		}
		r.at(20*time.Millisecond, r.l.Release, 30*time.Millisecond)
		var rel uint64
		for _, s := range r.got {
			if m, ok := s.msg.(lockservice.ReleaseRequest); ok {
				rel = m.Request
			}
		}
		if lostFirst {
			r.at(30*time.Millisecond, func() { r.l.NoAnswer(rel) }, 200*time.Millisecond)
		}
		r.at(200*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: rel, Status: lockservice.NotHolder}, 0)
		}, 300*time.Millisecond)
		want := lockservice.NotHolder
		if lostFirst {
			want = lockservice.Released
		}
		if r.ev.released != 1 || r.l.ReleaseResult() != want {
			t.Fatalf("lostFirst=%v: released %d, result %v, want %v", lostFirst, r.ev.released, r.l.ReleaseResult(), want)
		}
	}
}

// RedirectLimit 3: three redirects to a named leader are followed at once,
// the fourth after a backoff (BackoffMin 20 ms at least).
func TestRedirectLimit(t *testing.T) {
	r := newRig(t, Options{RedirectLimit: 3})
	r.at(0, r.l.Acquire, 10*time.Millisecond)
	req := r.acquires()[0].Request
	for i := range 4 {
		at := time.Duration(10*(i+1)) * time.Millisecond
		r.at(at, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.NotLeader, Leader: process.NodeID((i + 1) % 2)}, 0)
		}, at+5*time.Millisecond) // the network's latency is at most 5ms
		sent := len(r.acquires())
		if i < 3 && sent != i+2 {
			t.Fatalf("redirect %d: %d acquires sent, want the retry at once", i+1, sent)
		}
		if i == 3 && sent != 4 {
			t.Fatalf("redirect 4: %d acquires arrived within 5ms, want it held back by a backoff (≥ 20ms)", sent)
		}
	}
	r.w.Run(200*time.Millisecond, 10_000)
	if n := len(r.acquires()); n != 5 {
		t.Fatalf("%d acquires after the backoff, want 5", n)
	}
}

// A client with a wait bound asks with it and gives the server the whole
// bound plus its request timeout before it retries elsewhere (same id).
func TestWaitBoundIsSentAndCoveredByTheTimeout(t *testing.T) {
	r := newRigConfig(t, Options{}, func(cfg *lockservice.ClientConfig) {
		cfg.RequestTimeout, cfg.Wait = 50*time.Millisecond, 2*time.Second
	})
	r.at(0, r.l.Acquire, 2049*time.Millisecond)
	got := r.acquires()
	if len(got) != 1 || got[0].Wait != 2*time.Second {
		t.Fatalf("acquires by 2.049s %+v, want one carrying the 2s wait", got)
	}
	r.w.Run(2100*time.Millisecond, 10_000)
	got = r.acquires()
	if len(got) != 2 || got[1].Request != got[0].Request || r.got[1].to != 1 {
		t.Fatalf("acquires by 2.1s %+v, want the same request retried at s1 after 2.05s", got)
	}
}

func TestWaitWithin(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ max, remaining, slack, want time.Duration }{
		{5 * time.Second, -1, 10 * ms, 5 * time.Second},             // no deadline
		{5 * time.Second, 2*time.Second + ms/2, 10 * ms, 1990 * ms}, // the deadline's, less slack, whole ms
		{5 * time.Second, 5 * ms, 10 * ms, 0},                       // no time to wait
		{0, time.Second, 10 * ms, 0},                                // waiting off
		{-1, -1, 0, 0},
	} {
		if got := WaitWithin(c.max, c.remaining, c.slack); got != c.want {
			t.Errorf("WaitWithin(%v, %v, %v) = %v, want %v", c.max, c.remaining, c.slack, got, c.want)
		}
	}
}

// RetryOverloadedRelease: a release shed as Overloaded is sent again with
// the same id after the hint, and ends Released when that is answered;
// without the option it ends at once, unanswered.
func TestOverloadedReleaseIsRetried(t *testing.T) {
	for _, retry := range []bool{true, false} {
		r := newRig(t, Options{RetryOverloadedRelease: retry})
		r.at(0, r.l.Acquire, 10*time.Millisecond)
		req := r.acquires()[0].Request
		r.at(10*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.Granted, Token: 7, TTL: time.Second}, 0)
		}, 20*time.Millisecond)
		r.at(20*time.Millisecond, r.l.Release, 30*time.Millisecond)
		releases := func() []lockservice.ReleaseRequest {
			var out []lockservice.ReleaseRequest
			for _, s := range r.got {
				if m, ok := s.msg.(lockservice.ReleaseRequest); ok {
					out = append(out, m)
				}
			}
			return out
		}
		rel := releases()[0].Request
		r.at(30*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: rel, Status: lockservice.Overloaded}, 100*time.Millisecond)
		}, 300*time.Millisecond)
		if !retry {
			if r.ev.released != 1 || len(releases()) != 1 {
				t.Fatalf("without the option: released %d, %d sends; want it ended after one", r.ev.released, len(releases()))
			}
			continue
		}
		got := releases()
		if r.ev.released != 0 || len(got) != 2 || got[1].Request != rel {
			t.Fatalf("released %d, sends %+v; want the same release sent again, not yet ended", r.ev.released, got)
		}
		r.at(300*time.Millisecond, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: rel, Status: lockservice.Released, Token: 7}, 0)
		}, 400*time.Millisecond)
		if r.ev.released != 1 || r.l.ReleaseResult() != lockservice.Released {
			t.Fatalf("released %d, result %v; want Released", r.ev.released, r.l.ReleaseResult())
		}
	}
}

// A grant that waited at the server counts the lease from the send plus
// the wait (less the drift bound), not from the send alone: the lease
// began no sooner. A wait longer than the round trip (a broken or drifting
// server) counts no further than the reply.
func TestGrantAfterWaitCountsTheLeaseFromItsStart(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		waited, want time.Duration
	}{
		{0, 1000*ms - 1*ms - 10*ms},                        // TTL·(1−ρ) − margin from the send
		{400 * ms, 400*ms - 400*time.Microsecond + 989*ms}, // from send + waited·(1−ρ)
		{900 * ms, 500*ms + 989*ms},                        // capped at the reply (500ms)
	} {
		r := newRig(t, Options{})
		r.at(0, r.l.Acquire, 10*ms)
		req := r.acquires()[0].Request
		r.at(500*ms, func() {
			r.l.ReceiveHint(lockservice.LockReply{Request: req, Status: lockservice.Granted, Token: 7, TTL: time.Second, Waited: c.waited}, 0)
		}, 510*ms)
		if got := r.l.Deadline(); got != c.want {
			t.Errorf("waited %v: watchdog deadline %v, want %v", c.waited, got, c.want)
		}
	}
}
