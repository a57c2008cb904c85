package inject

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

// recorder counts what a node receives.
type recorder struct{ got *[]int }

type ping struct{ n int }

func (p ping) Fingerprint() uint64 { return uint64(p.n) }

func (r recorder) Start(env sim.Env) {}
func (r recorder) Receive(env sim.Env, _ sim.NodeID, m sim.Message) {
	*r.got = append(*r.got, m.(ping).n)
}

type sender struct{ to sim.NodeID }

func (s sender) Start(env sim.Env) {
	for i := range 10 {
		env.Clock().AfterFunc(time.Duration(i)*100*time.Millisecond, func() { env.Send(s.to, ping{i}) })
	}
}
func (s sender) Receive(sim.Env, sim.NodeID, sim.Message) {}

// TestInstallAppliesFaultsAtTheirTimes: isolating the receiver between 250 ms
// and 650 ms drops exactly the pings sent in that window.
func TestInstallAppliesFaultsAtTheirTimes(t *testing.T) {
	w, err := sim.New(sim.Config{Seed: 1, Network: sim.NetworkConfig{Latency: sim.Latency{Min: time.Millisecond, Max: time.Millisecond}}})
	require.NoError(t, err)
	var got []int
	rx, _ := w.AddNode("rx", func() sim.Process { return recorder{&got} }, fakeclock.Config{})
	w.AddNode("tx", func() sim.Process { return sender{rx} }, fakeclock.Config{})
	s := nemesis.Schedule{
		{At: nemesis.Duration(650 * time.Millisecond), Kind: nemesis.Heal}, // out of order on purpose: Install sorts
		{At: nemesis.Duration(250 * time.Millisecond), Kind: nemesis.Isolate, Node: "rx"},
	}
	require.NoError(t, s.Validate([]string{"rx", "tx"}))
	Install(s, w, func(n string) (sim.NodeID, bool) { id, ok := map[string]sim.NodeID{"rx": 0, "tx": 1}[n]; return id, ok })
	w.Run(2*time.Second, 1000)
	require.Equal(t, []int{0, 1, 2, 7, 8, 9}, got)
}

// TestWatchFiresOncePerTriggerInItsWindow: a trigger fires at the first
// moment of its kind inside [At, At+Within], aimed at the moment's
// subject, After later, and never again; moments of another kind or
// outside the window do nothing.
func TestWatchFiresOncePerTriggerInItsWindow(t *testing.T) {
	w, _ := newChatWorld(t)
	s := nemesis.Schedule{
		{At: nemesis.Duration(100 * ms), Kind: nemesis.Crash, Node: nemesis.Subject, Duration: nemesis.Duration(50 * ms), When: nemesis.MomentVoted, Within: nemesis.Duration(100 * ms), After: nemesis.Duration(5 * ms)},
		{At: nemesis.Duration(100 * ms), Kind: nemesis.Pause, Node: "c", Duration: nemesis.Duration(10 * ms), When: nemesis.MomentGranted, Within: nemesis.Duration(10 * ms)},
	}
	if err := s.Validate(chatNodes); err != nil {
		t.Fatal(err)
	}
	watch := Install(s, w, chatResolve)
	notice := func(at time.Duration, m nemesis.Moment) { w.At(at, "moment", func() { watch.Notice(m) }) }
	notice(50*ms, nemesis.Moment{Kind: nemesis.MomentVoted, Subject: "a"})     // before the window
	notice(120*ms, nemesis.Moment{Kind: nemesis.MomentAcquired, Subject: "a"}) // another kind
	notice(130*ms, nemesis.Moment{Kind: nemesis.MomentVoted, Subject: "b"})    // fires: crash b at 135ms
	notice(140*ms, nemesis.Moment{Kind: nemesis.MomentVoted, Subject: "a"})    // already fired
	notice(150*ms, nemesis.Moment{Kind: nemesis.MomentGranted, Subject: "a"})  // after the pause's window
	w.At(136*ms, "check", func() {
		if w.State(1) != sim.Crashed || w.State(0) == sim.Crashed {
			t.Errorf("at 136ms: a %v, b %v; want only b crashed", w.State(0), w.State(1))
		}
	})
	w.At(186*ms, "check", func() {
		if w.State(1) == sim.Crashed {
			t.Error("b still crashed after the trigger's 50ms downtime")
		}
	})
	w.Run(400*ms, 100_000)
	if len(watch.Fired) != 1 {
		t.Fatalf("fired %v, want the one crash", watch.Fired)
	}
	want := nemesis.Op{At: nemesis.Duration(135 * ms), Kind: nemesis.Crash, Node: "b", Duration: nemesis.Duration(50 * ms)}
	if got := watch.Fired[0]; got.String() != want.String() || got.At != want.At {
		t.Errorf("fired %v at %v, want %v at %v", got, time.Duration(got.At), want, time.Duration(want.At))
	}
}

// TestGeneratedSchedulesLeaveTheWorldClean installs generated schedules in
// a world of chatty nodes and checks that at the end of the safety phase
// nothing is left: no blocked link, the network as configured, every node
// up with a true clock and a fast disk.
func TestGeneratedSchedulesLeaveTheWorldClean(t *testing.T) {
	c := tiny
	for seed := range uint64(60) {
		o := allOn(c)
		if seed%2 == 1 {
			o = nemesis.DrawOptions(rng(seed), c)
		}
		s := nemesis.Generate(rng(seed), o, c, 3*time.Second)
		w := chatWorld(t, c, seed)
		base := w.Network()
		Install(s, w, clusterResolver(c, w))
		w.Run(3*time.Second, 10_000_000)
		checkClean(t, w, base, seed)
	}
}

// TestHealAllLeavesTheWorldClean: permanent faults of every kind, some
// still on, are all undone by HealAll.
func TestHealAllLeavesTheWorldClean(t *testing.T) {
	c := tiny
	s := nemesis.Schedule{
		{At: nemesis.Duration(10 * ms), Kind: nemesis.Crash, Node: "n1", Mode: nemesis.CrashTorn, Keep: 0.3},
		{At: nemesis.Duration(10 * ms), Kind: nemesis.Crash, Node: nemesis.Leader},
		{At: nemesis.Duration(20 * ms), Kind: nemesis.Partition, Group: []string{"n2", "a"}},
		{At: nemesis.Duration(20 * ms), Kind: nemesis.Block, Node: "store", To: "b"},
		{At: nemesis.Duration(30 * ms), Kind: nemesis.Loss, Probability: 0.9},
		{At: nemesis.Duration(30 * ms), Kind: nemesis.Delay, Delay: nemesis.Duration(time.Second), Mean: nemesis.Duration(100 * ms), Duration: nemesis.Duration(time.Hour)},
		{At: nemesis.Duration(40 * ms), Kind: nemesis.Drift, Node: "a", PPM: -300_000},
		{At: nemesis.Duration(40 * ms), Kind: nemesis.Jump, Node: "b", By: nemesis.Duration(time.Minute)},
		{At: nemesis.Duration(40 * ms), Kind: nemesis.Jump, Node: nemesis.Leader, By: nemesis.Duration(time.Minute), Duration: nemesis.Duration(time.Hour)},
		{At: nemesis.Duration(50 * ms), Kind: nemesis.SlowDisk, Node: "store", Delay: nemesis.Duration(20 * ms)},
	}
	if err := s.CheckUndone(time.Second); err == nil {
		t.Fatalf("CheckUndone of open faults: got nil, want an error")
	}
	healed := s.HealAll(500*ms, c)
	if err := healed.Validate(c.Names()); err != nil {
		t.Fatal(err)
	}
	// The timed jump on the leader lasts an hour: HealAll resets it (the
	// world is clean) but CheckUndone, which cannot know which node led,
	// still reports it.
	if err := healed.CheckUndone(500 * ms); err == nil || !strings.Contains(err.Error(), "jump @leader") {
		t.Errorf("CheckUndone after HealAll: got %v, want the hour-long jump reported", err)
	}
	if err := slices.Delete(slices.Clone(healed), 8, 9).CheckUndone(500 * ms); err != nil {
		t.Errorf("CheckUndone after HealAll without it: %v", err)
	}
	w := chatWorld(t, c, 1)
	base := w.Network()
	Install(healed, w, clusterResolver(c, w))
	w.Run(time.Second, 10_000_000)
	checkClean(t, w, base, 1)
}

func chatWorld(t *testing.T, c nemesis.Cluster, seed uint64) *sim.World {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: seed, Network: sim.DefaultNetwork()})
	if err != nil {
		t.Fatal(err)
	}
	log := &chatLog{w: w, nodes: len(c.Nodes())}
	for _, n := range c.Nodes() {
		if _, err := w.AddNode(n, func() sim.Process { return &chatter{log: log} }, fakeclock.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// clusterResolver resolves names to ids in the cluster's order; the leader
// is the first server that is up.
func clusterResolver(c nemesis.Cluster, w *sim.World) Resolver {
	nodes := c.Nodes()
	return func(name string) (sim.NodeID, bool) {
		if name == nemesis.Leader {
			for i := range c.Servers {
				if w.State(sim.NodeID(i)) != sim.Crashed {
					return sim.NodeID(i), true
				}
			}
			return 0, false
		}
		i := slices.Index(nodes, name)
		return sim.NodeID(i), i >= 0
	}
}

func checkClean(t *testing.T, w *sim.World, base sim.NetworkConfig, seed uint64) {
	t.Helper()
	if got := w.Network(); got != base {
		t.Errorf("seed %d: network at the end %+v, want %+v", seed, got, base)
	}
	for i := range w.Nodes() {
		id := sim.NodeID(i)
		if w.State(id) != sim.Up || w.Clock(id).DriftPPM() != 0 || w.Clock(id).WallOffset() != 0 || w.SyncDelay(id) != 0 {
			t.Errorf("seed %d: node %s at the end: %v, drift %d, wall offset %v, sync delay %v; want up, 0, 0, 0",
				seed, w.Name(id), w.State(id), w.Clock(id).DriftPPM(), w.Clock(id).WallOffset(), w.SyncDelay(id))
		}
		for j := range w.Nodes() {
			if w.Blocked(id, sim.NodeID(j)) {
				t.Errorf("seed %d: link %s → %s still blocked", seed, w.Name(id), w.Name(sim.NodeID(j)))
			}
		}
	}
}

// FuzzParse: Parse never panics; what it accepts survives a JSON round
// trip and installs and runs in a world without panicking.
func FuzzParse(f *testing.F) {
	b, _ := json.Marshal(everyKind)
	f.Add(b)
	f.Add([]byte(`[{"at":"1s","kind":"pause","node":"a","duration":"1s"}]`))
	f.Add([]byte(`[{"at":"1s","kind":"crash","node":"a","mode":"torn","keep":0.999}]`))
	f.Add([]byte(`[{"at":"1s","kind":"partition","group":["a","@leader"]}]`))
	f.Add([]byte(`[{"at":"0s","kind":"drift","node":"a","ppm":-999999,"duration":"1ns"}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{"at":"9223372036s","kind":"heal"}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := nemesis.Parse(in)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error message")
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of a parsed schedule: %v", err)
		}
		back, err := nemesis.Parse(out)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip: %v\n in  %s\n out %s", err, in, out)
		}
		w, _ := sim.New(sim.Config{Seed: 1, Network: fixed1ms})
		log := &chatLog{w: w, nodes: 2}
		for _, n := range []string{"a", "b"} {
			w.AddNode(n, func() sim.Process { return &chatter{log: log} }, fakeclock.Config{})
		}
		Install(s, w, func(name string) (sim.NodeID, bool) { return sim.NodeID(len(name) % 2), true })
		w.Run(2*time.Second, 100_000)
	})
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)) }

var tiny = nemesis.Cluster{Servers: []string{"n1", "n2", "n3"}, Store: []string{"store"}, Clients: []string{"a", "b"}, LeaderSelector: true, TTL: 300 * ms, DriftBoundPPM: 500}

// allOn turns every kind on with every target, shape and aim and a brisk
// rate (nemesis's own tests have the same, from the inside).
func allOn(c nemesis.Cluster) nemesis.Options {
	o := nemesis.DrawOptions(rng(1), c)
	roles := []string{nemesis.RoleServers, nemesis.RoleStore, nemesis.RoleClients, nemesis.RoleLeader}
	for _, f := range []*nemesis.Fault{&o.Pause, &o.Crash, &o.Partition, &o.Loss, &o.Duplicate, &o.Delay, &o.Reorder, &o.Drift, &o.Jump, &o.SlowDisk, &o.Aimed} {
		f.Enabled, f.Probability = true, 0.05
		if f.Targets != nil {
			f.Targets = roles
		}
	}
	o.PartitionShapes = []string{nemesis.ShapeHalves, nemesis.ShapeIsolate, nemesis.ShapeBlock}
	o.Aims = []string{nemesis.AimPauseHolder, nemesis.AimCrashVoter, nemesis.AimCrashAppender, nemesis.AimCrashMajority, nemesis.AimLostReply, nemesis.AimJump, nemesis.AimStorePaused, nemesis.AimIsolateLeader}
	o.TornProbability = 0.5
	if err := o.Validate(); err != nil {
		panic(err)
	}
	return o
}

var everyKind = nemesis.Schedule{
	{At: nemesis.Duration(10 * ms), Kind: nemesis.Pause, Node: "a", Duration: nemesis.Duration(3 * time.Second)},
	{At: nemesis.Duration(20 * ms), Kind: nemesis.Crash, Node: "n1"},
	{At: nemesis.Duration(20 * ms), Kind: nemesis.Crash, Node: "n2", Mode: nemesis.CrashTorn, Keep: 0.25},
	{At: nemesis.Duration(20 * ms), Kind: nemesis.Crash, Node: "n3", Mode: nemesis.CrashLose},
	{At: nemesis.Duration(30 * ms), Kind: nemesis.Restart, Node: nemesis.Crashed},
	{At: nemesis.Duration(40 * ms), Kind: nemesis.Isolate, Node: nemesis.Leader},
	{At: nemesis.Duration(40 * ms), Kind: nemesis.Partition, Group: []string{"n1", "a"}},
	{At: nemesis.Duration(40 * ms), Kind: nemesis.Block, Node: "n1", To: "store"},
	{At: nemesis.Duration(50 * ms), Kind: nemesis.Heal},
	{At: nemesis.Duration(60 * ms), Kind: nemesis.Loss, Probability: 0.3, Duration: nemesis.Duration(time.Second)},
	{At: nemesis.Duration(60 * ms), Kind: nemesis.Duplicate, Probability: 0.1},
	{At: nemesis.Duration(60 * ms), Kind: nemesis.Delay, Delay: nemesis.Duration(time.Second), Mean: nemesis.Duration(200 * ms), Duration: nemesis.Duration(time.Second)},
	{At: nemesis.Duration(60 * ms), Kind: nemesis.Reorder, Probability: 1, Delay: nemesis.Duration(20 * ms), Duration: nemesis.Duration(time.Second)},
	{At: nemesis.Duration(70 * ms), Kind: nemesis.NetworkReset},
	{At: nemesis.Duration(80 * ms), Kind: nemesis.Drift, Node: "b", PPM: -2500, Duration: nemesis.Duration(time.Second)},
	{At: nemesis.Duration(80 * ms), Kind: nemesis.Jump, Node: "b", By: nemesis.Duration(-1500 * ms), Duration: nemesis.Duration(time.Second)},
	{At: nemesis.Duration(90 * ms), Kind: nemesis.ClockReset, Node: "b"},
	{At: nemesis.Duration(90 * ms), Kind: nemesis.SlowDisk, Node: "store", Delay: nemesis.Duration(40 * ms), Duration: nemesis.Duration(time.Second)},
}

// TestSimulatorCoversEveryKind: the simulator carries out every fault kind
// the vocabulary has (a kind added without its applier fails here).
func TestSimulatorCoversEveryKind(t *testing.T) {
	if err := nemesis.Uncovered(New(nil, nil)); err != nil {
		t.Fatal(err)
	}
}
