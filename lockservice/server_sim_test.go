package lockservice

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

func addServer(t *testing.T, w *sim.World, obs Observer, clock fakeclock.Config) sim.NodeID {
	return addNode(t, w, "server", func() sim.Process {
		return NewServer(ServerConfig{Limits: DefaultLimits(), Observer: obs})
	}, clock)
}

// A crash right after a grant loses nothing: the grant and the token
// counter were synced before the reply, the lease restarts at its full TTL
// on restart, and the next token is larger.
func TestServerGrantSurvivesCrashRightAfterReply(t *testing.T) {
	w := newTestWorld(t, nil)
	rec := newRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	a, _ := addProbe(t, w, "a")
	b, _ := addProbe(t, w, "b")
	const restartAt = 500 * time.Millisecond
	crashed := false
	rec.onGranted = func(string, string, uint64) {
		if !crashed {
			crashed = true
			w.At(w.Now(), "crash server", func() { w.Crash(srv) }) // right after this event, reply in flight
			w.At(restartAt, "restart server", func() { w.Restart(srv) })
		}
	}
	a.sendAt(time.Millisecond, srv, AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 1})
	// The lease began at ~1 ms: it would be over by ~1.006 s without the
	// crash, but the restart at 0.5 s restarted it until 1.5 s.
	b.sendAt(1200*time.Millisecond, srv, AcquireRequest{Resource: "r", Client: "b", TTL: time.Second, Request: 1})
	b.sendAt(1600*time.Millisecond, srv, AcquireRequest{Resource: "r", Client: "b", TTL: time.Second, Request: 2})
	runToQuiescence(t, w)

	if !crashed || w.Stats().Crashes != 1 {
		t.Fatalf("the server did not crash after the grant (crashes %d)", w.Stats().Crashes)
	}
	first := a.onlyLockReply(t, 1)
	if first.Status != Granted || first.Token != 1 {
		t.Fatalf("a's acquire: %+v, want granted with token 1", first)
	}
	if busy := b.onlyLockReply(t, 1); busy.Status != Busy {
		t.Errorf("b's acquire at 1.2 s, within the TTL run again after the restart: %+v, want busy", busy)
	}
	next := b.onlyLockReply(t, 2)
	if next.Status != Granted || next.Token <= first.Token {
		t.Errorf("b's acquire at 1.6 s: %+v, want granted with a token above %d", next, first.Token)
	}
	ended := rec.of("ended")
	if len(ended) == 0 || ended[0].token != 1 || ended[0].reason != "expired" || ended[0].at != restartAt+time.Second {
		t.Errorf("ended calls %+v, want token 1 expired at exactly restart + TTL = %v", ended, restartAt+time.Second)
	}
}

// leaseTrueDuration grants a 1 s lease on a server whose clock drifts by
// ppm and returns the true time from the grant to the Observer's Ended.
func leaseTrueDuration(t *testing.T, ppm int64) time.Duration {
	t.Helper()
	w := newTestWorld(t, nil)
	rec := newRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{DriftPPM: ppm})
	a, _ := addProbe(t, w, "a")
	a.sendAt(time.Millisecond, srv, AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 1})
	runToQuiescence(t, w)
	g, e := rec.of("granted"), rec.of("ended")
	if len(g) != 1 || len(e) != 1 || e[0].reason != "expired" || e[0].token != g[0].token {
		t.Fatalf("drift %d ppm: granted %+v, ended %+v; want one grant that expired", ppm, g, e)
	}
	return e[0].at - g[0].at
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
	w := newTestWorld(t, nil)
	rec := newRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	a, _ := addProbe(t, w, "a")
	req := AcquireRequest{Resource: "r", Client: "a", TTL: time.Second, Request: 7}
	a.sendAt(time.Millisecond, srv, req)
	a.sendAt(time.Millisecond, srv, req)
	a.sendAt(300*time.Millisecond, srv, req) // long after the grant
	runToQuiescence(t, w)

	got := a.lockReplies(7)
	if len(got) != 3 {
		t.Fatalf("got %d replies %+v, want 3", len(got), got)
	}
	if got[0].Status != Granted || got[0].Token != 1 || got[0].TTL != time.Second {
		t.Errorf("first reply %+v, want granted with token 1 for 1s", got[0])
	}
	for _, r := range got[1:] {
		if r != got[0] {
			t.Errorf("duplicate's reply %+v differs from the first %+v", r, got[0])
		}
	}
	g, e := rec.of("granted"), rec.of("ended")
	if len(g) != 1 {
		t.Fatalf("granted %d times (%+v), want once", len(g), g)
	}
	if len(e) != 1 || e[0].at != g[0].at+time.Second {
		t.Errorf("ended %+v, want one expiry at grant + 1s = %v (the late copy must not restart the lease)", e, g[0].at+time.Second)
	}
	if s := w.Process(srv).(*Server); s.Table().LastToken() != 1 {
		t.Errorf("server issued up to token %d, want 1", s.Table().LastToken())
	}
}

// Requests outside the Limits are answered Invalid with the reason; the
// server neither panics nor changes its table.
func TestServerAnswersInvalidRequestsWithoutChangingState(t *testing.T) {
	w := newTestWorld(t, nil)
	rec := newRecorder(w)
	srv := addServer(t, w, rec, fakeclock.Config{})
	p, _ := addProbe(t, w, "p")
	long := strings.Repeat("n", 129)
	cases := []struct {
		msg  sim.Message
		want string
	}{
		{AcquireRequest{Resource: "", Client: "p", TTL: time.Second, Request: 1}, "empty resource name"},
		{AcquireRequest{Resource: long, Client: "p", TTL: time.Second, Request: 2}, "resource name of 129 bytes"},
		{AcquireRequest{Resource: "r", Client: "p", TTL: 0, Request: 3}, "must be positive"},
		{AcquireRequest{Resource: "r", Client: "p", TTL: -time.Second, Request: 4}, "must be positive"},
		{AcquireRequest{Resource: "r", Client: "p", TTL: time.Millisecond, Request: 5}, "below the minimum"},
		{AcquireRequest{Resource: "r", Client: "p", TTL: time.Hour, Request: 6}, "exceeds the maximum"},
		{RenewRequest{Resource: "r", Client: "p", Token: 0, Request: 7}, "token 0 is never granted"},
		{RenewRequest{Resource: "r", Client: "", Token: 1, Request: 8}, "empty client name"},
		{ReleaseRequest{Resource: "r", Client: long, Token: 1, Request: 9}, "client name of 129 bytes"},
		{ReleaseRequest{Resource: "r", Client: "p", Token: 0, Request: 10}, "token 0 is never granted"},
	}
	for i, c := range cases {
		p.sendAt(time.Duration(i+1)*10*time.Millisecond, srv, c.msg)
	}
	runToQuiescence(t, w)

	for i, c := range cases {
		rep := p.onlyLockReply(t, uint64(i+1))
		if rep.Status != Invalid || !strings.HasPrefix(rep.Err, "lockservice: ") || !strings.Contains(rep.Err, c.want) {
			t.Errorf("%+v: reply %+v, want invalid naming %q", c.msg, rep, c.want)
		}
	}
	s := w.Process(srv).(*Server)
	if s.Table().LastToken() != 0 || len(s.Table().Leases()) != 0 || len(rec.calls) != 0 {
		t.Errorf("invalid requests changed the server: last token %d, leases %+v, observer %+v",
			s.Table().LastToken(), s.Table().Leases(), rec.calls)
	}
}
