package inject

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

const ms = time.Millisecond

// The fault tests run a tiny world of three chatty nodes, a, b and c
// (ids 0, 1, 2), on a network that delivers every message after exactly
// 1ms. Every 10ms each node syncs its disk and sends a numbered ping to the
// two others; every arrival is logged with its true send and arrival times.
// The harness snapshots the world at fixed instants, so each fault can be
// checked by what it visibly did.

type chatPing struct {
	From, Seq int
	Sent      time.Duration // true time of the Send
}

func (p chatPing) Fingerprint() uint64 { return sim.Mix(uint64(p.From), uint64(p.Seq)) }

type arrival struct {
	from, to, seq int
	sent, at      time.Duration
}

type chatLog struct {
	w        *sim.World
	arrivals []arrival
	starts   [8]int
	nodes    int // how many nodes to ping; 0 means 3
}

type chatter struct {
	log *chatLog
	seq int
}

func (c *chatter) Start(env sim.Env) {
	c.log.starts[env.ID()]++
	var tick func()
	tick = func() {
		env.Disk().Sync()
		c.seq++
		n := c.log.nodes
		if n == 0 {
			n = 3
		}
		for to := range n {
			if sim.NodeID(to) != env.ID() {
				env.Send(sim.NodeID(to), chatPing{From: int(env.ID()), Seq: c.seq, Sent: c.log.w.Now()})
			}
		}
		env.Clock().AfterFunc(10*ms, tick)
	}
	env.Clock().AfterFunc(10*ms, tick)
}

func (c *chatter) Receive(env sim.Env, from sim.NodeID, m sim.Message) {
	p := m.(chatPing)
	c.log.arrivals = append(c.log.arrivals, arrival{from: p.From, to: int(env.ID()), seq: p.Seq, sent: p.Sent, at: c.log.w.Now()})
}

// snapshot is what the harness sees of the world at one instant.
type snapshot struct {
	state   [3]sim.NodeState
	blocked [3][3]bool
	net     sim.NetworkConfig
	drift   [3]int64
	wall    [3]time.Duration
	mono    [3]time.Duration
	sync    [3]time.Duration
	stats   sim.Stats
}

var snapTimes = []time.Duration{40 * ms, 100 * ms, 120 * ms, 200 * ms, 300 * ms}

type chatRun struct {
	w     *sim.World
	log   *chatLog
	snaps map[time.Duration]snapshot
}

func (r chatRun) at(t *testing.T, d time.Duration) snapshot {
	t.Helper()
	s, ok := r.snaps[d]
	if !ok {
		t.Fatalf("no snapshot at %v (have %v)", d, snapTimes)
	}
	return s
}

// between returns the arrivals from → to of pings sent in [lo, hi).
func (r chatRun) between(from, to int, lo, hi time.Duration) []arrival {
	var out []arrival
	for _, a := range r.log.arrivals {
		if a.from == from && a.to == to && a.sent >= lo && a.sent < hi {
			out = append(out, a)
		}
	}
	return out
}

var chatIDs = map[string]sim.NodeID{"a": 0, "b": 1, "c": 2}

func chatResolve(name string) (sim.NodeID, bool) {
	if name == nemesis.Leader {
		return 1, true // b leads in these tests
	}
	id, ok := chatIDs[name]
	return id, ok
}

var chatNodes = []string{"a", "b", "c", nemesis.Leader}

// newChatWorld is a world of three chatters a, b and c, 1ms apart.
func newChatWorld(t *testing.T) (*sim.World, *chatLog) {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: 7, Network: sim.NetworkConfig{Latency: sim.Latency{Min: ms, Max: ms}}})
	if err != nil {
		t.Fatal(err)
	}
	log := &chatLog{w: w}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := w.AddNode(name, func() sim.Process { return &chatter{log: log} }, fakeclock.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	return w, log
}

// runChat installs s (and before, the harness actions) in a fresh chat
// world and runs it for 400ms.
func runChat(t *testing.T, s nemesis.Schedule, before func(w *sim.World)) chatRun {
	t.Helper()
	if err := s.Validate(chatNodes); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	w, log := newChatWorld(t)
	if before != nil {
		before(w)
	}
	Install(s, w, chatResolve)
	r := chatRun{w: w, log: log, snaps: map[time.Duration]snapshot{}}
	for _, at := range snapTimes {
		w.At(at, "snapshot", func() {
			var s snapshot
			for i := range 3 {
				id := sim.NodeID(i)
				s.state[i] = w.State(id)
				s.drift[i] = w.Clock(id).DriftPPM()
				s.wall[i] = w.Clock(id).WallOffset()
				s.mono[i] = w.Clock(id).Monotonic()
				s.sync[i] = w.SyncDelay(id)
				for j := range 3 {
					s.blocked[i][j] = w.Blocked(id, sim.NodeID(j))
				}
			}
			s.net, s.stats = w.Network(), w.Stats()
			r.snaps[at] = s
		})
	}
	w.Run(400*ms, 1_000_000)
	return r
}

func op(at time.Duration, k nemesis.Kind, node string, d time.Duration) nemesis.Op {
	return nemesis.Op{At: nemesis.Duration(at), Kind: k, Node: node, Duration: nemesis.Duration(d)}
}

var fixed1ms = sim.NetworkConfig{Latency: sim.Latency{Min: ms, Max: ms}}

// TestFaultEffects applies each fault kind to the chat world and checks
// what it visibly did, and that it was undone.
func TestFaultEffects(t *testing.T) {
	tests := []struct {
		name   string
		ops    nemesis.Schedule
		before func(w *sim.World)
		check  func(t *testing.T, r chatRun)
	}{
		{"pause holds a node's events until it resumes", nemesis.Schedule{op(50*ms, nemesis.Pause, "b", 100*ms)}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.state[1] != sim.Paused || s.state[0] != sim.Up {
				t.Errorf("states during the pause: got %v, want b paused, a up", s.state)
			}
			for _, a := range r.between(0, 1, 50*ms, 150*ms) {
				if a.at != 150*ms {
					t.Errorf("a ping to b sent at %v arrived at %v, want at the resume, 150ms", a.sent, a.at)
				}
			}
			if got := r.between(1, 0, 51*ms, 150*ms); len(got) != 0 {
				t.Errorf("b sent %d pings while paused, want 0", len(got))
			}
			if s := r.at(t, 200*ms); s.state[1] != sim.Up || s.stats.Pauses != 1 {
				t.Errorf("after the pause: state %v, %d pauses; want up, 1", s.state[1], s.stats.Pauses)
			}
		}},
		{"crash loses unsynced writes and restart boots again", nemesis.Schedule{op(48*ms, nemesis.Crash, "b", 0), op(100*ms, nemesis.Restart, "b", 0)},
			func(w *sim.World) { w.At(47*ms, "write", func() { w.Disk(1).Write("k", []byte("abcdefgh")) }) },
			func(t *testing.T, r chatRun) {
				if s := r.at(t, 100*ms); s.state[1] != sim.Up { // restarted at this very instant
					t.Errorf("state at the restart: got %v, want up", s.state[1])
				}
				if _, ok := r.w.Disk(1).Read("k"); ok {
					t.Errorf("the unsynced write survived the crash")
				}
				if got := r.between(0, 1, 50*ms, 99*ms); len(got) != 0 {
					t.Errorf("a crashed b received %d pings, want 0", len(got))
				}
				if r.log.starts[1] != 2 || len(r.between(1, 0, 110*ms, 400*ms)) == 0 {
					t.Errorf("b started %d times and sent %d pings after the restart; want 2 starts and some pings", r.log.starts[1], len(r.between(1, 0, 110*ms, 400*ms)))
				}
			}},
		{"torn crash keeps a prefix of the last write", nemesis.Schedule{{At: nemesis.Duration(48 * ms), Kind: nemesis.Crash, Node: "b", Mode: nemesis.CrashTorn, Keep: 0.5}, {At: nemesis.Duration(100 * ms), Kind: nemesis.Restart, Node: nemesis.Crashed}},
			func(w *sim.World) { w.At(47*ms, "write", func() { w.Disk(1).Write("k", []byte("abcdefgh")) }) },
			func(t *testing.T, r chatRun) {
				if v, ok := r.w.Disk(1).Read("k"); !ok || string(v) != "abcd" {
					t.Errorf("after the torn crash: got %q (%v), want \"abcd\"", v, ok)
				}
				if r.log.starts[1] != 2 {
					t.Errorf("restart @crashed: b started %d times, want 2", r.log.starts[1])
				}
			}},
		{"isolate cuts a node off both ways until heal", nemesis.Schedule{op(50*ms, nemesis.Isolate, "@leader", 0), op(150*ms, nemesis.Heal, "", 0)}, nil, func(t *testing.T, r chatRun) {
			s := r.at(t, 100*ms)
			if !s.blocked[0][1] || !s.blocked[1][0] || !s.blocked[2][1] || s.blocked[0][2] {
				t.Errorf("links during isolation: got %v, want b cut off from a and c only", s.blocked)
			}
			if n := len(r.between(0, 1, 50*ms, 150*ms)) + len(r.between(1, 2, 50*ms, 150*ms)); n != 0 {
				t.Errorf("%d pings crossed the isolation, want 0", n)
			}
			if len(r.between(0, 2, 50*ms, 150*ms)) == 0 {
				t.Errorf("a and c stopped talking, want them unaffected")
			}
			if s := r.at(t, 200*ms); s.blocked != [3][3]bool{} || len(r.between(0, 1, 150*ms, 400*ms)) == 0 {
				t.Errorf("after heal: links %v; want all open and pings flowing", s.blocked)
			}
		}},
		{"partition splits a group from the rest", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Partition, Group: []string{"a"}}, op(150*ms, nemesis.Heal, "", 0)}, nil, func(t *testing.T, r chatRun) {
			s := r.at(t, 100*ms)
			want := [3][3]bool{{false, true, true}, {true, false, false}, {true, false, false}}
			if s.blocked != want {
				t.Errorf("links: got %v, want %v", s.blocked, want)
			}
			if len(r.between(0, 1, 50*ms, 150*ms))+len(r.between(2, 0, 50*ms, 150*ms)) != 0 || len(r.between(1, 2, 50*ms, 150*ms)) == 0 {
				t.Errorf("pings across the partition got through, or b and c stopped talking")
			}
		}},
		{"block drops one direction only", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Block, Node: "a", To: "b"}, op(150*ms, nemesis.Heal, "", 0)}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); !s.blocked[0][1] || s.blocked[1][0] {
				t.Errorf("links: a→b %v, b→a %v; want true, false", s.blocked[0][1], s.blocked[1][0])
			}
			if len(r.between(0, 1, 50*ms, 150*ms)) != 0 || len(r.between(1, 0, 50*ms, 150*ms)) == 0 {
				t.Errorf("a→b pings got through, or b→a pings stopped")
			}
		}},
		{"loss drops messages for its duration", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Loss, Probability: 1, Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.net.LossProbability != 1 {
				t.Errorf("loss during: got %v, want 1", s.net.LossProbability)
			}
			if s := r.at(t, 200*ms); s.net != fixed1ms {
				t.Errorf("network after: got %+v, want it restored", s.net)
			}
			if len(r.between(0, 1, 50*ms, 150*ms)) != 0 || len(r.between(0, 1, 150*ms, 400*ms)) == 0 {
				t.Errorf("pings survived total loss, or did not resume after it")
			}
		}},
		{"duplicate delivers twice", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Duplicate, Probability: 1, Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			in, out := r.between(0, 1, 50*ms, 150*ms), r.between(0, 1, 150*ms, 300*ms)
			if len(in) != 20 || len(out) != 15 { // 10 pings sent in the window, each twice; 15 after, once
				t.Errorf("arrivals: %d during, %d after; want 20, 15", len(in), len(out))
			}
			if s := r.at(t, 200*ms); s.net != fixed1ms {
				t.Errorf("network after: got %+v, want it restored", s.net)
			}
		}},
		{"delay raises latency", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Delay, Delay: nemesis.Duration(200 * ms), Mean: nemesis.Duration(50 * ms), Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			s := r.at(t, 100*ms)
			if l := s.net.Latency; l.Shape != sim.Exponential || l.Max != 200*ms || l.Mean != 50*ms || l.Min != ms {
				t.Errorf("latency during: got %+v, want exponential 1ms + mean 50ms, max 200ms", l)
			}
			slow := 0
			for _, a := range r.between(0, 1, 50*ms, 150*ms) {
				if a.at-a.sent > 5*ms {
					slow++
				}
			}
			if slow < 5 {
				t.Errorf("%d of 10 pings sent during the spike were slower than 5ms, want most", slow)
			}
			if s := r.at(t, 200*ms); s.net != fixed1ms {
				t.Errorf("network after: got %+v, want it restored", s.net)
			}
		}},
		{"reorder holds messages back", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Reorder, Probability: 1, Delay: nemesis.Duration(30 * ms), Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.net.ReorderProbability != 1 || s.net.ReorderDelayMax != 30*ms {
				t.Errorf("during: got %+v, want reorder 1 by up to 30ms", s.net)
			}
			inversions := 0
			var last arrival
			for _, a := range r.log.arrivals {
				if a.from == 0 && a.to == 1 {
					if a.seq < last.seq {
						inversions++
					}
					last = a
				}
			}
			if inversions == 0 {
				t.Errorf("no ping from a to b arrived out of order")
			}
			if s := r.at(t, 200*ms); s.net != fixed1ms {
				t.Errorf("network after: got %+v, want it restored", s.net)
			}
		}},
		{"overlapping network faults restore in layers", nemesis.Schedule{
			{At: nemesis.Duration(50 * ms), Kind: nemesis.Loss, Probability: 0.5, Duration: nemesis.Duration(200 * ms)},
			{At: nemesis.Duration(100 * ms), Kind: nemesis.Loss, Probability: 1, Duration: nemesis.Duration(50 * ms)},
			{At: nemesis.Duration(110 * ms), Kind: nemesis.Duplicate, Probability: 0.25, Duration: nemesis.Duration(200 * ms)},
		}, nil, func(t *testing.T, r chatRun) {
			for _, c := range []struct {
				at        time.Duration
				loss, dup float64
			}{{40 * ms, 0, 0}, {120 * ms, 1, 0.25}, {200 * ms, 0.5, 0.25}, {300 * ms, 0, 0.25}} {
				if s := r.at(t, c.at); s.net.LossProbability != c.loss || s.net.DuplicateProbability != c.dup {
					t.Errorf("at %v: loss %v dup %v, want %v %v", c.at, s.net.LossProbability, s.net.DuplicateProbability, c.loss, c.dup)
				}
			}
		}},
		{"network-reset ends open network faults", nemesis.Schedule{
			{At: nemesis.Duration(50 * ms), Kind: nemesis.Loss, Probability: 1},
			{At: nemesis.Duration(60 * ms), Kind: nemesis.Reorder, Probability: 0.5, Delay: nemesis.Duration(time.Second), Duration: nemesis.Duration(time.Hour)},
			{At: nemesis.Duration(150 * ms), Kind: nemesis.NetworkReset},
		}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.net.LossProbability != 1 || s.net.ReorderProbability != 0.5 {
				t.Errorf("during: got %+v", s.net)
			}
			if s := r.at(t, 200*ms); s.net != fixed1ms {
				t.Errorf("after the reset: got %+v, want the network as before", s.net)
			}
		}},
		{"drift changes the clock rate for a while", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Drift, Node: "b", PPM: 500_000, Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.drift[1] != 500_000 || s.drift[0] != 0 {
				t.Errorf("drift during: got %v, want b at 500000", s.drift)
			}
			s := r.at(t, 300*ms)
			if s.drift[1] != 0 || s.mono[1] != 350*ms || s.mono[0] != 300*ms {
				t.Errorf("after: drift %v, monotonic %v; want 0 and b 50ms ahead", s.drift, s.mono)
			}
		}},
		{"jump steps the wall clock and back", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.Jump, Node: "c", By: nemesis.Duration(-2 * time.Second), Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.wall[2] != -2*time.Second || s.mono[2] != 100*ms {
				t.Errorf("during: wall offset %v, monotonic %v; want -2s and untouched", s.wall[2], s.mono[2])
			}
			if s := r.at(t, 200*ms); s.wall[2] != 0 {
				t.Errorf("wall offset after: got %v, want 0", s.wall[2])
			}
		}},
		{"clock-reset ends drift and jumps", nemesis.Schedule{
			{At: nemesis.Duration(50 * ms), Kind: nemesis.Drift, Node: "a", PPM: 1000},
			{At: nemesis.Duration(50 * ms), Kind: nemesis.Jump, Node: "a", By: nemesis.Duration(5 * time.Second)},
			{At: nemesis.Duration(60 * ms), Kind: nemesis.Jump, Node: "a", By: nemesis.Duration(time.Second), Duration: nemesis.Duration(time.Second)},
			{At: nemesis.Duration(150 * ms), Kind: nemesis.ClockReset, Node: "a"},
		}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.drift[0] != 1000 || s.wall[0] != 6*time.Second {
				t.Errorf("during: drift %d, wall %v; want 1000, 6s", s.drift[0], s.wall[0])
			}
			if s := r.at(t, 200*ms); s.drift[0] != 0 || s.wall[0] != 0 {
				t.Errorf("after the reset: drift %d, wall %v; want 0, 0", s.drift[0], s.wall[0])
			}
		}},
		{"slow disk stalls a node that syncs", nemesis.Schedule{{At: nemesis.Duration(50 * ms), Kind: nemesis.SlowDisk, Node: "b", Delay: nemesis.Duration(30 * ms), Duration: nemesis.Duration(100 * ms)}}, nil, func(t *testing.T, r chatRun) {
			if s := r.at(t, 100*ms); s.sync[1] != 30*ms {
				t.Errorf("sync delay during: got %v, want 30ms", s.sync[1])
			}
			late := r.between(1, 0, 50*ms, 150*ms)
			if len(late) == 0 {
				t.Fatalf("b sent nothing while its disk was slow")
			}
			for _, a := range late {
				if a.at-a.sent != 31*ms {
					t.Errorf("a ping b sent at %v after a slow sync took %v, want 31ms", a.sent, a.at-a.sent)
				}
			}
			if s := r.at(t, 200*ms); s.sync[1] != 0 || s.stats.Stalls == 0 {
				t.Errorf("after: sync delay %v, %d stalls; want 0 and some", s.sync[1], s.stats.Stalls)
			}
			if got := r.between(0, 2, 50*ms, 150*ms); len(got) == 0 || got[0].at-got[0].sent != ms {
				t.Errorf("a's pings were slowed too, want only b's")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runChat(t, tt.ops, tt.before)
			if s := r.at(t, 40*ms); s.blocked != [3][3]bool{} || s.net != fixed1ms || s.state != [3]sim.NodeState{} {
				t.Fatalf("the world was not quiet before the faults: %+v", s)
			}
			tt.check(t, r)
		})
	}
}

// TestUnresolvedSelectorSkipsTheFault: a fault aimed at a leader that does
// not exist at that instant does nothing.
func TestUnresolvedSelectorSkipsTheFault(t *testing.T) {
	w, _ := sim.New(sim.Config{Seed: 1, Network: fixed1ms})
	log := &chatLog{w: w, nodes: 1}
	w.AddNode("a", func() sim.Process { return &chatter{log: log} }, fakeclock.Config{})
	Install(nemesis.Schedule{op(10*ms, nemesis.Crash, nemesis.Leader, 0), op(10*ms, nemesis.Isolate, nemesis.Leader, 0), {At: nemesis.Duration(10 * ms), Kind: nemesis.Drift, Node: nemesis.Leader, PPM: 5, Duration: nemesis.Duration(ms)}},
		w, func(string) (sim.NodeID, bool) { return 0, false })
	w.Run(50*ms, 1000)
	if w.State(0) != sim.Up || w.Clock(0).DriftPPM() != 0 {
		t.Errorf("a fault aimed at no one changed the world")
	}
}

// TestInstallSkipsMalformedOps: Install never carries out an operation that
// fails Check, so a bad schedule cannot reach the simulator's assertions.
func TestInstallSkipsMalformedOps(t *testing.T) {
	w, _ := sim.New(sim.Config{Seed: 1, Network: fixed1ms})
	log := &chatLog{w: w, nodes: 1}
	w.AddNode("a", func() sim.Process { return &chatter{log: log} }, fakeclock.Config{})
	bad := nemesis.Schedule{
		{At: nemesis.Duration(ms), Kind: nemesis.Crash, Node: "a", Mode: nemesis.CrashTorn, Keep: 1.5},
		{At: nemesis.Duration(ms), Kind: nemesis.SlowDisk, Node: "a", Delay: nemesis.Duration(-ms)},
		{At: nemesis.Duration(ms), Kind: nemesis.Drift, Node: "a", PPM: 2_000_000},
		{At: nemesis.Duration(ms), Kind: nemesis.Loss, Probability: 3},
		{At: nemesis.Duration(ms), Kind: "meteor"},
	}
	for i, op := range bad {
		if err := (nemesis.Schedule{op}).Check(); err == nil {
			t.Errorf("op %d %v: Check passed, want an error", i, op)
		}
	}
	Install(bad, w, func(string) (sim.NodeID, bool) { return 0, true })
	w.Run(50*ms, 1000)
	if w.State(0) != sim.Up || w.Network() != fixed1ms || w.SyncDelay(0) != 0 {
		t.Errorf("a malformed op changed the world")
	}
	_ = fmt.Sprint(bad)
}
