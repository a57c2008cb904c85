package redlock

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// redlockProbe sends node requests when told and records the replies.
type redlockProbe struct {
	w       *sim.World
	env     sim.Env
	replies map[uint64]RedlockReply // by attempt
}

func (p *redlockProbe) Start(env sim.Env) { p.env = env }
func (p *redlockProbe) Receive(_ sim.Env, _ sim.NodeID, msg sim.Message) {
	if m, ok := msg.(RedlockReply); ok {
		p.replies[m.Attempt] = m
	}
}
func (p *redlockProbe) sendAt(at time.Duration, to sim.NodeID, msg sim.Message) {
	p.w.At(at, fmt.Sprintf("probe sends %T", msg), func() { p.env.Send(to, msg) })
}

// A node is SET NX PX, compare-and-extend and compare-and-delete on one
// key, expired by the node's wall clock: a wall step forward ends a key
// early although little time passed; a crash forgets every key.
func TestRedlockNodeSemantics(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	n := simtest.AddNode(t, w, "n1", func() sim.Process { return NewRedlockNode(lockservice.DefaultLimits()) }, fakeclock.Config{})
	p := &redlockProbe{w: w, replies: map[uint64]RedlockReply{}}
	simtest.AddNode(t, w, "p", func() sim.Process { return p }, fakeclock.Config{})
	ms := time.Millisecond
	p.sendAt(1*ms, n, RedlockSet{Resource: "r", Value: 7, TTL: time.Second, Attempt: 1})
	p.sendAt(50*ms, n, RedlockSet{Resource: "r", Value: 8, TTL: time.Second, Attempt: 2})
	p.sendAt(100*ms, n, RedlockDel{Resource: "r", Value: 8, Attempt: 3})
	p.sendAt(150*ms, n, RedlockExtend{Resource: "r", Value: 8, TTL: time.Second, Attempt: 4})
	p.sendAt(200*ms, n, RedlockExtend{Resource: "r", Value: 7, TTL: time.Second, Attempt: 5})
	w.At(300*ms, "jump n1", func() { w.Clock(n).JumpWall(2 * time.Second) })
	p.sendAt(400*ms, n, RedlockSet{Resource: "r", Value: 9, TTL: time.Second, Attempt: 6}) // 7 expired early
	p.sendAt(500*ms, n, RedlockDel{Resource: "r", Value: 9, Attempt: 7})
	p.sendAt(600*ms, n, RedlockSet{Resource: "r", Value: 10, TTL: time.Second, Attempt: 8})
	w.At(700*ms, "crash n1", func() { w.Crash(n) })
	w.At(750*ms, "restart n1", func() { w.Restart(n) })
	p.sendAt(800*ms, n, RedlockSet{Resource: "r", Value: 11, TTL: time.Second, Attempt: 9}) // 10 forgotten
	p.sendAt(900*ms, n, RedlockSet{Resource: "", Value: 12, TTL: time.Second, Attempt: 10})
	simtest.RunToQuiescence(t, w)

	want := map[uint64]RedlockReply{
		1:  {Attempt: 1, OK: true},
		2:  {Attempt: 2, Holder: 7},
		3:  {Attempt: 3, Holder: 7},
		4:  {Attempt: 4, Holder: 7},
		5:  {Attempt: 5, OK: true},
		6:  {Attempt: 6, OK: true},
		7:  {Attempt: 7, OK: true},
		8:  {Attempt: 8, OK: true},
		9:  {Attempt: 9, OK: true},
		10: {Attempt: 10},
	}
	for a, rep := range want { //detlint:sorted a test's checks, order irrelevant
		if got, ok := p.replies[a]; !ok || got != rep {
			t.Errorf("attempt %d: got %+v (replied %v), want %+v", a, got, ok, rep)
		}
	}
}

// redlockWorld is nodes n1…nN, a store and one Redlock workload client.
type redlockWorld struct {
	w      *sim.World
	nodes  []sim.NodeID
	store  sim.NodeID
	client sim.NodeID
	events []simtest.Stamped[lockservice.Event]
}

func (r *redlockWorld) Observe(e lockservice.Event) {
	r.events = append(r.events, simtest.Stamped[lockservice.Event]{At: r.w.Now(), Msg: e})
}

func (r *redlockWorld) of(kind lockservice.EventKind) []lockservice.Event {
	var out []lockservice.Event
	for _, e := range r.events {
		if e.Msg.Kind == kind {
			out = append(out, e.Msg)
		}
	}
	return out
}

func newRedlockWorld(t *testing.T, n int, cycles int, startDelay time.Duration) *redlockWorld {
	r := &redlockWorld{w: simtest.NewTestWorld(t, nil)}
	d := RedlockDesign{}
	names, err := d.Nodes(n)
	if err != nil {
		t.Fatal(err)
	}
	run := lockservice.DesignRun{Limits: lockservice.DefaultLimits(), Observer: r, Store: sim.NodeID(n)}
	for i := range names {
		run.Servers = append(run.Servers, sim.NodeID(i))
	}
	for i, name := range names {
		r.nodes = append(r.nodes, simtest.AddNode(t, r.w, name, func() sim.Process { return d.NewServer(i, run) }, fakeclock.Config{}))
	}
	r.store = simtest.AddNode(t, r.w, "store", func() sim.Process {
		return fencedstore.NewFencedStore(fencedstore.StoreConfig{Limits: run.Limits, IgnoreTokens: d.Info().UnfencedStore, Observer: r})
	}, fakeclock.Config{})
	cfg := workload.DefaultConfig("a", run.Servers, r.store, "r")
	cfg.Cycles, cfg.Observer, cfg.StartDelay = cycles, r, startDelay
	r.client = simtest.AddNode(t, r.w, "a", func() sim.Process { return workload.New(cfg, d.ClientProtocol(cfg.ClientConfig, run)) }, fakeclock.Config{})
	return r
}

// holds returns the value node i holds for "r" (0: none).
func (r *redlockWorld) holds(i int) uint64 {
	return r.w.Process(r.nodes[i]).(*RedlockNode).keys["r"].value
}

// With two of five nodes unreachable the client still gets a majority: the
// grant, its writes and the release all carry its random value, the grant
// is reported from the client's belief, and the release deletes the value
// wherever it was set.
func TestRedlockClientMajority(t *testing.T) {
	r := newRedlockWorld(t, 5, 1, 0)
	r.w.Block(r.client, r.nodes[3])
	r.w.Block(r.client, r.nodes[4])
	simtest.RunToQuiescence(t, r.w)

	granted := r.of(lockservice.EvGranted)
	if len(granted) != 1 || granted[0].Token == 0 || granted[0].Client != "a" || granted[0].Resource != "r" {
		t.Fatalf("granted events %+v, want one for a on r with a non-zero value", granted)
	}
	v := granted[0].Token
	var acquired bool
	for _, e := range r.of(lockservice.EvReturn) {
		if e.Op == lockservice.OpAcquire && e.Status == lockservice.Granted && e.Token == v {
			acquired = true
		}
	}
	applies := r.of(lockservice.EvApplied)
	if !acquired || len(applies) != 2 || applies[0].Token != v || applies[1].Token != v {
		t.Fatalf("acquire returned %v with %d, applies %+v: want the writes fenced by the value", acquired, v, applies)
	}
	ended := r.of(lockservice.EvEnded)
	if len(ended) != 1 || ended[0].Token != v || ended[0].Reason != "released" {
		t.Fatalf("ended events %+v, want the grant released", ended)
	}
	for i := range r.nodes {
		if got := r.holds(i); got != 0 {
			t.Errorf("node n%d still holds %d after the release", i+1, got)
		}
	}
	var released bool
	for _, e := range r.of(lockservice.EvReturn) {
		released = released || e.Op == lockservice.OpRelease && e.Status == lockservice.Released
	}
	if !released {
		t.Errorf("the release was not answered released")
	}
}

// Three nodes hold another value: the client's first attempt gets two OKs,
// is answered Busy (a majority names another holder), and deletes its value
// from the two nodes that took it; once the other value expires by the
// nodes' clocks the client retries with a new value and gets the lock.
func TestRedlockClientReleasesOnFailure(t *testing.T) {
	r := newRedlockWorld(t, 5, 1, 10*time.Millisecond)
	p := &redlockProbe{w: r.w, replies: map[uint64]RedlockReply{}}
	simtest.AddNode(t, r.w, "p", func() sim.Process { return p }, fakeclock.Config{})
	for i := range 3 {
		p.sendAt(0, r.nodes[i], RedlockSet{Resource: "r", Value: 99, TTL: 500 * time.Millisecond, Attempt: uint64(i + 1)})
	}
	var afterFirst [5]uint64
	r.w.At(40*time.Millisecond, "look", func() {
		for i := range afterFirst {
			afterFirst[i] = r.holds(i)
		}
	})
	simtest.RunToQuiescence(t, r.w)

	if afterFirst != [5]uint64{99, 99, 99, 0, 0} {
		t.Fatalf("after the first attempt the nodes hold %v, want the other value on n1-n3 and nothing on n4, n5", afterFirst)
	}
	var busy, granted int
	for _, e := range r.events {
		if e.Msg.Kind == lockservice.EvReturn && e.Msg.Op == lockservice.OpAcquire {
			switch e.Msg.Status {
			case lockservice.Busy:
				busy++
			case lockservice.Granted:
				granted++
				if e.At < 500*time.Millisecond {
					t.Errorf("granted at %v, before the other value expired", e.At)
				}
			}
		}
	}
	if busy == 0 || granted != 1 {
		t.Fatalf("%d busy and %d granted acquires, want some busy then one grant", busy, granted)
	}
}

// Validity: a grant needs a majority within TTL − elapsed − drift. Nodes
// paused past the TTL answer too late: the first attempt is no grant (an
// unknown outcome, and its value is deleted again); a later one, answered
// in time, is.
func TestRedlockValidity(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := &redlockWorld{w: w}
	var nodes []sim.NodeID
	for i := range 3 {
		nodes = append(nodes, simtest.AddNode(t, w, fmt.Sprintf("n%d", i+1), func() sim.Process { return NewRedlockNode(lockservice.DefaultLimits()) }, fakeclock.Config{}))
	}
	store := simtest.AddNode(t, w, "store", func() sim.Process {
		return fencedstore.NewFencedStore(fencedstore.StoreConfig{Limits: lockservice.DefaultLimits(), IgnoreTokens: true})
	}, fakeclock.Config{})
	cfg := workload.DefaultConfig("a", nodes, store, "r")
	cfg.TTL, cfg.Observer = 100*time.Millisecond, rec
	simtest.AddNode(t, w, "a", func() sim.Process {
		return workload.New(cfg, NewRedlockProtocol(RedlockConfig{Wait: time.Second}))
	}, fakeclock.Config{})
	for _, n := range nodes {
		w.Pause(n, 200*time.Millisecond)
	}
	simtest.RunToQuiescence(t, w)

	var statuses []lockservice.Status
	for _, e := range rec.events {
		if e.Msg.Kind == lockservice.EvReturn && e.Msg.Op == lockservice.OpAcquire {
			statuses = append(statuses, e.Msg.Status)
			if e.Msg.Status == lockservice.Granted && e.At < 200*time.Millisecond {
				t.Errorf("granted at %v, while the nodes were paused", e.At)
			}
		}
	}
	if len(statuses) < 2 || statuses[0] != lockservice.Overloaded || statuses[len(statuses)-1] != lockservice.Granted {
		t.Fatalf("acquire answers %v, want overloaded (majority past validity) first and granted last", statuses)
	}
	if g := rec.of(lockservice.EvGranted); len(g) != 1 {
		t.Fatalf("granted events %+v, want exactly one", g)
	}
}
