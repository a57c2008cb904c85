package reference

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

func addServer(t *testing.T, w *sim.World, obs lockservice.Observer, clock fakeclock.Config) sim.NodeID {
	return simtest.AddNode(t, w, "server", func() sim.Process {
		return NewServer(ServerConfig{Limits: lockservice.DefaultLimits(), Observer: obs})
	}, clock)
}

// A crash right after a grant loses nothing: the grant and the token
// counter were synced before the reply, the lease restarts at its full TTL
// on restart, and the next token is larger.
func TestServerGrantSurvivesCrashRightAfterReply(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	a, _ := simtest.AddProbe(t, w, "a")
	b, _ := simtest.AddProbe(t, w, "b")
	const restartAt = 500 * time.Millisecond
	crashed := false
	rec.OnGranted = func(string, string, uint64) {
		if !crashed {
			crashed = true
			w.At(w.Now(), "crash server", func() { w.Crash(srv) }) // right after this event, reply in flight
			w.At(restartAt, "restart server", func() { w.Restart(srv) })
		}
	}
	a.SendAt(time.Millisecond, srv, lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 1})
	// The lease began at ~1 ms: it would be over by ~1.006 s without the
	// crash, but the restart at 0.5 s restarted it until 1.5 s.
	b.SendAt(1200*time.Millisecond, srv, lockservice.AcquireRequest{Resource: "r", Client: "b", TTL: time.Second, Request: 1})
	b.SendAt(1600*time.Millisecond, srv, lockservice.AcquireRequest{Resource: "r", Client: "b", TTL: time.Second, Request: 2})
	simtest.RunToQuiescence(t, w)

	if !crashed || w.Stats().Crashes != 1 {
		t.Fatalf("the server did not crash after the grant (crashes %d)", w.Stats().Crashes)
	}
	first := a.OnlyLockReply(t, 1)
	if first.Status != lockservice.Granted || first.Token != 1 {
		t.Fatalf("a's acquire: %+v, want granted with token 1", first)
	}
	if busy := b.OnlyLockReply(t, 1); busy.Status != lockservice.Busy {
		t.Errorf("b's acquire at 1.2 s, within the TTL run again after the restart: %+v, want busy", busy)
	}
	next := b.OnlyLockReply(t, 2)
	if next.Status != lockservice.Granted || next.Token <= first.Token {
		t.Errorf("b's acquire at 1.6 s: %+v, want granted with a token above %d", next, first.Token)
	}
	ended := rec.Of("ended")
	if len(ended) == 0 || ended[0].Token != 1 || ended[0].Reason != "expired" || ended[0].At != restartAt+time.Second {
		t.Errorf("ended calls %+v, want token 1 expired at exactly restart + TTL = %v", ended, restartAt+time.Second)
	}
}

// leaseTrueDuration grants a 1 s lease on a server whose clock drifts by
// ppm and returns the true time from the grant to the Observer's Ended.
func leaseTrueDuration(t *testing.T, ppm int64) time.Duration {
	t.Helper()
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{DriftPPM: ppm})
	a, _ := simtest.AddProbe(t, w, "a")
	a.SendAt(time.Millisecond, srv, lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 1})
	simtest.RunToQuiescence(t, w)
	g, e := rec.Of("granted"), rec.Of("ended")
	if len(g) != 1 || len(e) != 1 || e[0].Reason != "expired" || e[0].Token != g[0].Token {
		t.Fatalf("drift %d ppm: granted %+v, ended %+v; want one grant that expired", ppm, g, e)
	}
	return e[0].At - g[0].At
}

// Leases expire by the server's own monotonic clock: a server clock running
// 10% fast ends a lease after TTL/1.1 of true time.
func TestServerExpiresLeaseByItsMonotonicClock(t *testing.T) {
	exact := leaseTrueDuration(t, 0)
	fast := leaseTrueDuration(t, 100_000)
	if exact != time.Second {
		t.Errorf("drift 0: lease lasted %v of true time, want exactly 1s", exact)
	}
	want := time.Second * 1_000_000 / 1_100_000
	if fast >= exact || fast < want-time.Microsecond || fast > want+time.Microsecond {
		t.Errorf("drift +100000 ppm: lease lasted %v of true time, want ≈%v (and below %v)", fast, want, exact)
	}
}

// The same acquire sent twice (a retry or a network duplicate) is granted
// once; every copy gets the identical reply, and a late copy does not
// restart the lease.
func TestServerDuplicatedAcquireGrantsOnce(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	a, _ := simtest.AddProbe(t, w, "a")
	req := lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 7}
	a.SendAt(time.Millisecond, srv, req)
	a.SendAt(time.Millisecond, srv, req)
	a.SendAt(300*time.Millisecond, srv, req) // long after the grant
	simtest.RunToQuiescence(t, w)

	got := a.LockReplies(7)
	if len(got) != 3 {
		t.Fatalf("got %d replies %+v, want 3", len(got), got)
	}
	if got[0].Status != lockservice.Granted || got[0].Token != 1 || got[0].TTL != time.Second {
		t.Errorf("first reply %+v, want granted with token 1 for 1s", got[0])
	}
	for _, r := range got[1:] {
		if r != got[0] {
			t.Errorf("duplicate's reply %+v differs from the first %+v", r, got[0])
		}
	}
	g, e := rec.Of("granted"), rec.Of("ended")
	if len(g) != 1 {
		t.Fatalf("granted %d times (%+v), want once", len(g), g)
	}
	if len(e) != 1 || e[0].At != g[0].At+time.Second {
		t.Errorf("ended %+v, want one expiry at grant + 1s = %v (the late copy must not restart the lease)", e, g[0].At+time.Second)
	}
	if s := w.Process(srv).(*Server); s.Table().LastToken() != 1 {
		t.Errorf("server issued up to token %d, want 1", s.Table().LastToken())
	}
}

// Requests outside the Limits are answered Invalid with the reason; the
// server neither panics nor changes its table.
func TestServerAnswersInvalidRequestsWithoutChangingState(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	p, _ := simtest.AddProbe(t, w, "p")
	long := strings.Repeat("n", 129)
	cases := []struct {
		msg  sim.Message
		want string
	}{
		{lockservice.AcquireRequest{Resource: "", Client: "p", TTL: time.Second, Request: 1}, "empty resource name"},
		{lockservice.AcquireRequest{Resource: long, Client: "p", TTL: time.Second, Request: 2}, "resource name of 129 bytes"},
		{lockservice.AcquireRequest{Resource: "r", Client: "p", TTL: 0, Request: 3}, "must be positive"},
		{lockservice.AcquireRequest{Resource: "r", Client: "p", TTL: -time.Second, Request: 4}, "must be positive"},
		{lockservice.AcquireRequest{Resource: "r", Client: "p", TTL: time.Millisecond, Request: 5}, "below the minimum"},
		{lockservice.AcquireRequest{Resource: "r", Client: "p", TTL: time.Hour, Request: 6}, "exceeds the maximum"},
		{lockservice.RenewRequest{Resource: "r", Client: "p", Token: 0, Request: 7}, "token 0 is never granted"},
		{lockservice.RenewRequest{Resource: "r", Client: "", Token: 1, Request: 8}, "empty client name"},
		{lockservice.ReleaseRequest{Resource: "r", Client: long, Token: 1, Request: 9}, "client name of 129 bytes"},
		{lockservice.ReleaseRequest{Resource: "r", Client: "p", Token: 0, Request: 10}, "token 0 is never granted"},
	}
	for i, c := range cases {
		p.SendAt(time.Duration(i+1)*10*time.Millisecond, srv, c.msg)
	}
	simtest.RunToQuiescence(t, w)

	for i, c := range cases {
		rep := p.OnlyLockReply(t, uint64(i+1))
		if rep.Status != lockservice.Invalid || !strings.HasPrefix(rep.Err, "lockservice: ") || !strings.Contains(rep.Err, c.want) {
			t.Errorf("%+v: reply %+v, want invalid naming %q", c.msg, rep, c.want)
		}
	}
	s := w.Process(srv).(*Server)
	if s.Table().LastToken() != 0 || len(s.Table().Leases()) != 0 || len(rec.Calls) != 0 {
		t.Errorf("invalid requests changed the server: last token %d, leases %+v, observer %+v",
			s.Table().LastToken(), s.Table().Leases(), rec.Calls)
	}
}
