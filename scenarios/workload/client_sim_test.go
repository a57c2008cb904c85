package workload

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/sim"
)

// clientWorld is a server, a fenced store and the clients added to it.
type clientWorld struct {
	w             *sim.World
	rec           *simtest.Recorder
	trace         *bytes.Buffer
	server, store sim.NodeID
	clients       map[string]sim.NodeID
}

func newClientWorld(t *testing.T) *clientWorld {
	trace := &bytes.Buffer{}
	w := simtest.NewTestWorld(t, trace)
	rec := simtest.NewRecorder(w)
	cw := &clientWorld{w: w, rec: rec, trace: trace, clients: map[string]sim.NodeID{}}
	cw.server = addServer(t, w, rec, fakeclock.Config{})
	cw.store = addStore(t, w, rec)
	return cw
}

// addClient adds a client with DefaultClientConfig on resource "r", changed
// by edit.
func (cw *clientWorld) addClient(t *testing.T, name string, clock fakeclock.Config, edit func(*Config)) sim.NodeID {
	cfg := DefaultConfig(name, []sim.NodeID{cw.server}, cw.store, "r")
	cfg.Observer = cw.rec
	if edit != nil {
		edit(&cfg)
	}
	id := simtest.AddNode(t, cw.w, name, func() sim.Process { return New(cfg, nil) }, clock)
	cw.clients[name] = id
	return id
}

func (cw *clientWorld) client(name string) *Client {
	return cw.w.Process(cw.clients[name]).(*Client)
}

// logs returns the slog records of node, optionally only those named msg.
func (cw *clientWorld) logs(t *testing.T, node, msg string) []simtest.LogLine {
	var out []simtest.LogLine
	for _, l := range simtest.ParseLogs(t, cw.trace.String()) {
		if l.Node == node && (msg == "" || l.Msg == msg) {
			out = append(out, l)
		}
	}
	return out
}

// checkExclusiveGrants is simtest.CheckGrantOrder at quiescence: no grant
// may still be open. It returns the number of grants and of accepted
// writes.
func checkExclusiveGrants(t *testing.T, calls []simtest.ObsCall) (grants, accepted int) {
	t.Helper()
	grants, accepted, open := simtest.CheckGrantOrder(t, calls)
	if len(open) != 0 {
		t.Errorf("grants still active at quiescence: %+v", open)
	}
	return grants, accepted
}

// Two clients contending for one resource: at quiescence both finished,
// the grants never overlapped in true time, tokens strictly increased, and
// every accepted write was made under the writer's current grant.
func TestClientsOnOneResourceHoldExclusiveGrantsAndWriteUnderThem(t *testing.T) {
	cw := newClientWorld(t)
	const cycles = 3
	for _, name := range []string{"c1", "c2"} {
		cw.addClient(t, name, fakeclock.Config{}, func(c *Config) { c.Cycles = cycles })
	}
	simtest.RunToQuiescence(t, cw.w)

	for _, name := range []string{"c1", "c2"} {
		if !cw.client(name).Done() {
			t.Errorf("%s did not finish its workload", name)
		}
	}
	grants, accepted := checkExclusiveGrants(t, cw.rec.Calls)
	if grants != 2*cycles {
		t.Errorf("%d grants, want %d (one per cycle per client)", grants, 2*cycles)
	}
	if want := 2 * cycles * DefaultConfig("", nil, 0, "").WritesPerHold; accepted != want {
		t.Errorf("%d accepted writes, want %d", accepted, want)
	}
	for _, c := range cw.rec.Of("write-returned") {
		if !c.Accepted {
			t.Errorf("write %+v was rejected in a fault-free run", c)
		}
	}
}

// watchdogRun is one client that keeps working under its grant while its
// renewals never reach the server, so the server expires the lease after
// one TTL. It reports when the server ended the lease, when the client's
// watchdog fired (true time), whether the client still believed it held
// the lock at the server's expiry, and the store's acceptances of that
// client's writes after the expiry.
type watchdogRun struct {
	ended, watchdog time.Duration
	holdingAtEnd    bool
	lateAccepted    []simtest.ObsCall
}

func runWatchdog(t *testing.T, clientPPM int64, lostFirstReply bool) watchdogRun {
	t.Helper()
	cw := newClientWorld(t)
	a := cw.addClient(t, "a", fakeclock.Config{DriftPPM: clientPPM}, func(c *Config) {
		c.WritesPerHold, c.WorkDuration = 1000, 100*time.Millisecond // still working when the lease ends
	})
	var run watchdogRun
	if lostFirstReply {
		// The grant's reply is lost; the client's retry (same request id,
		// 50 ms later) is answered with the same grant, whose lease began
		// when the first copy arrived. Renewals are cut off after that.
		cw.w.Block(cw.server, a)
		cw.w.At(40*time.Millisecond, "heal server→a", func() { cw.w.Unblock(cw.server, a) })
		cw.w.At(60*time.Millisecond, "cut a→server", func() { cw.w.Block(a, cw.server) })
	} else {
		cw.rec.OnGranted = func(string, string, uint64) { cw.w.Block(a, cw.server) }
	}
	cw.rec.OnEnded = func(_ string, _ uint64, reason string) {
		if reason != "expired" {
			t.Errorf("lease ended %s, want expired", reason)
		}
		run.ended = cw.w.Now()
		run.holdingAtEnd = cw.client("a").Holding()
	}
	simtest.RunToQuiescence(t, cw.w)

	if g := cw.rec.Of("granted"); len(g) != 1 {
		t.Fatalf("granted %+v, want exactly one grant", g)
	}
	if run.ended == 0 {
		t.Fatalf("the server never expired the lease")
	}
	wd := cw.logs(t, "a", "watchdog.expired")
	if len(wd) != 1 {
		t.Fatalf("watchdog fired %d times, want once", len(wd))
	}
	run.watchdog = wd[0].At
	for _, c := range cw.rec.Of("applied") {
		if c.Client == "a" && c.Accepted && c.At > run.ended {
			run.lateAccepted = append(run.lateAccepted, c)
		}
	}
	return run
}

// Within its drift bound the watchdog gives the lock up before the server
// expires it, and no write of the client lands after the expiry.
func TestClientWatchdogGivesUpBeforeServerExpiry(t *testing.T) {
	r := runWatchdog(t, 0, false)
	if r.watchdog >= r.ended || r.holdingAtEnd || len(r.lateAccepted) != 0 {
		t.Errorf("watchdog fired at %v, server expired at %v, holding then %v, late writes %+v; want the watchdog first",
			r.watchdog, r.ended, r.holdingAtEnd, r.lateAccepted)
	}
}

// The grant a retried acquire is answered with may have started when the
// first copy arrived (the retry is deduplicated): the watchdog must count
// from the first send, or it outlives the server's lease.
func TestClientWatchdogCountsFromFirstSendOfRetriedAcquire(t *testing.T) {
	r := runWatchdog(t, 0, true)
	if r.watchdog >= r.ended || r.holdingAtEnd || len(r.lateAccepted) != 0 {
		t.Errorf("watchdog fired at %v, server expired at %v, holding then %v, late writes %+v; want the watchdog first",
			r.watchdog, r.ended, r.holdingAtEnd, r.lateAccepted)
	}
}

// Documents what the code does when a client's clock runs 20% slow, far
// beyond its DriftBoundPPM of 1000: the watchdog's bound no longer holds.
// The client still believes it holds the lock when the server expires it,
// its watchdog fires ~TTL/0.8 after the acquire, and its writes in between
// are accepted by the store because nobody wrote with a newer token — only
// fencing, not the watchdog, protects the data past the drift bound.
func TestClientWatchdogBeyondDriftBoundOutlivesServerLease(t *testing.T) {
	r := runWatchdog(t, -200_000, false)
	if !r.holdingAtEnd || r.watchdog <= r.ended {
		t.Errorf("watchdog fired at %v, server expired at %v, holding then %v; want the slow client to outlive the lease",
			r.watchdog, r.ended, r.holdingAtEnd)
	}
	if want := 989 * time.Millisecond * 10 / 8; r.watchdog < want {
		t.Errorf("watchdog fired at %v, want no earlier than (TTL·(1−ρ) − margin)/0.8 = %v of true time", r.watchdog, want)
	}
	if len(r.lateAccepted) == 0 {
		t.Errorf("no write of the slow client landed after the expiry; the code lets them through when no newer token was written")
	}
}

// A client paused past its TTL in the middle of a unit of work sends its
// write with its old token on resuming; the other client has meanwhile
// been granted a newer token and written, so the store rejects the write.
func TestClientPausedPastTTLHasStaleWriteRejected(t *testing.T) {
	cw := newClientWorld(t)
	cw.addClient(t, "a", fakeclock.Config{}, nil)
	cw.addClient(t, "b", fakeclock.Config{}, func(c *Config) { c.StartDelay = 5 * time.Millisecond })
	const pause = 2 * time.Second
	var paused string
	var pausedToken uint64
	var resumeAt time.Duration
	cw.rec.OnGranted = func(_, client string, token uint64) {
		if paused != "" {
			return
		}
		// The grant reaches the client within 5 ms; its first write follows
		// 20 ms of work later. Pause it in between.
		paused, pausedToken, resumeAt = client, token, cw.w.Now()+10*time.Millisecond+pause
		cw.w.At(cw.w.Now()+10*time.Millisecond, "pause "+client, func() { cw.w.Pause(cw.clients[client], pause) })
	}
	simtest.RunToQuiescence(t, cw.w)

	if paused == "" || cw.w.Stats().Pauses != 1 {
		t.Fatalf("no client was paused")
	}
	other := map[string]string{"a": "b", "b": "a"}[paused]
	var otherWrote bool
	var stale []simtest.ObsCall
	for _, c := range cw.rec.Calls {
		switch {
		case c.Kind == "applied" && c.Client == other && c.Accepted && c.Token > pausedToken:
			otherWrote = true
		case c.Kind == "applied" && c.Client == paused && c.Token == pausedToken:
			if c.Accepted {
				t.Errorf("%v: store accepted %s's write with token %d (accepted by the store before the pause? %v)",
					c.At, paused, c.Token, c.At < resumeAt)
			}
			if !otherWrote {
				t.Errorf("%v: %s's write decided before %s wrote with a newer token", c.At, paused, other)
			}
			stale = append(stale, c)
		}
	}
	if len(stale) != 1 || stale[0].At < resumeAt {
		t.Fatalf("%s's writes with token %d: %+v; want one, decided after it resumed at %v", paused, pausedToken, stale, resumeAt)
	}
	var returned []simtest.ObsCall
	for _, c := range cw.rec.Of("write-returned") {
		if c.Client == paused {
			returned = append(returned, c)
		}
	}
	if len(returned) != 1 || returned[0].Accepted {
		t.Errorf("%s saw its write returned as %+v, want rejected", paused, returned)
	}
	for _, name := range []string{"a", "b"} {
		if !cw.client(name).Done() {
			t.Errorf("%s did not finish", name)
		}
	}
}

// Every client action emits a slog record carrying client= and req=; the
// request id correlates a request with its reply and with the server's and
// store's records of it.
func TestClientActionsLogClientAndRequest(t *testing.T) {
	cw := newClientWorld(t)
	cw.addClient(t, "c1", fakeclock.Config{}, nil)
	simtest.RunToQuiescence(t, cw.w)

	logs := cw.logs(t, "c1", "")
	var events []string
	reqOf := map[string][]string{}
	for _, l := range logs {
		if l.Attrs["client"] != "c1" || l.Attrs["req"] == "" {
			t.Errorf("record %q lacks client=c1 or req=: %v", l.Msg, l.Attrs)
		}
		events = append(events, l.Msg)
		reqOf[l.Msg] = append(reqOf[l.Msg], l.Attrs["req"])
	}
	want := []string{"acquire.sent", "acquire.granted", "write.sent", "write.reply", "write.sent", "write.reply",
		"read.sent", "read.reply", "release.sent", "release.released", "client.done"}
	if !slices.Equal(events, want) {
		t.Fatalf("c1 logged %v, want %v", events, want)
	}
	pairs := [][2]string{{"acquire.sent", "acquire.granted"}, {"write.sent", "write.reply"}, {"read.sent", "read.reply"}, {"release.sent", "release.released"}}
	for _, p := range pairs {
		if !slices.Equal(reqOf[p[0]], reqOf[p[1]]) || reqOf[p[0]][0] == "0" {
			t.Errorf("%s req=%v but %s req=%v", p[0], reqOf[p[0]], p[1], reqOf[p[1]])
		}
	}
	if !slices.Equal(slices.Compact(slices.Clone(reqOf["write.sent"])), reqOf["write.sent"]) {
		t.Errorf("the two writes share a request id: %v", reqOf["write.sent"])
	}
	for node, msgs := range map[string][2]string{"server": {"server.acquire", "acquire.sent"}, "store": {"store.write", "write.sent"}} {
		var got []string
		for _, l := range cw.logs(t, node, msgs[0]) {
			if l.Attrs["client"] != "c1" {
				t.Errorf("%s record %v lacks client=c1", node, l.Attrs)
			}
			got = append(got, l.Attrs["req"])
		}
		if !slices.Equal(got, reqOf[msgs[1]]) {
			t.Errorf("%s logged %s with req=%v, client sent req=%v", node, msgs[0], got, reqOf[msgs[1]])
		}
	}
	if strings.Contains(cw.trace.String(), "level=WARN") {
		t.Errorf("warnings in the trace:\n%s", cw.trace)
	}
}

// shedsReleases is a single-node server that sheds the first n releases
// it receives (answered Overloaded, not applied), as a replica at its
// ingress bound does.
type shedsReleases struct {
	*reference.Server
	n int
}

func (s *shedsReleases) Receive(env process.Env, from process.NodeID, msg process.Message) {
	if m, ok := msg.(lockservice.ReleaseRequest); ok && s.n > 0 {
		s.n--
		env.Send(from, lockservice.LockReply{Request: m.Request, Status: lockservice.Overloaded})
		return
	}
	s.Server.Receive(env, from, msg)
}

// TestClientRetriesShedRelease: a release answered Overloaded is sent
// again after a backoff, as the shipped HTTP client sends it, and the
// lock is released then, not left to expire a TTL later (swarm seed 8803
// failed liveness when the simulated client gave its release up).
func TestClientRetriesShedRelease(t *testing.T) {
	trace := &bytes.Buffer{}
	w := simtest.NewTestWorld(t, trace)
	rec := simtest.NewRecorder(w)
	server := simtest.AddNode(t, w, "server", func() sim.Process {
		return &shedsReleases{Server: reference.NewServer(reference.ServerConfig{Limits: lockservice.DefaultLimits(), Observer: rec}), n: 2}
	}, fakeclock.Config{})
	store := addStore(t, w, rec)
	cfg := DefaultConfig("c1", []sim.NodeID{server}, store, "r")
	cfg.Observer = rec
	simtest.AddNode(t, w, "c1", func() sim.Process { return New(cfg, nil) }, fakeclock.Config{})
	simtest.RunToQuiescence(t, w)

	released := 0
	for _, c := range rec.Calls {
		if c.Kind == "ended" {
			if c.Reason != "released" {
				t.Errorf("the grant ended %q, want released by the client's third send", c.Reason)
			}
			released++
		}
	}
	if released != 1 {
		t.Fatalf("%d grants ended, want 1: %+v", released, rec.Calls)
	}
}
