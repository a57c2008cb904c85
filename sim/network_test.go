package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

// twoNodes builds a world with nodes a and b and runs their Start events.
func twoNodes(t *testing.T, net NetworkConfig, seed uint64) (w *World, a, b NodeID, pa, pb *probe) {
	t.Helper()
	w = newWorld(t, Config{Seed: seed, Network: net})
	a, pa = addProbe(t, w, "a")
	b, pb = addProbe(t, w, "b")
	runAll(t, w)
	return w, a, b, pa, pb
}

func TestLatencyStaysWithinBounds(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		net      NetworkConfig
		min, max time.Duration // allowed one-way latency
		spread   bool          // the draws must not all be equal
	}{
		{"uniform", NetworkConfig{Latency: Latency{Shape: Uniform, Min: ms, Max: 3 * ms}}, ms, 3 * ms, true},
		{"uniform from zero", NetworkConfig{Latency: Latency{Shape: Uniform, Min: 0, Max: 10}}, 0, 10, true},
		{"uniform fixed", fixedLatency(2 * ms), 2 * ms, 2 * ms, false},
		{"exponential", NetworkConfig{Latency: Latency{Shape: Exponential, Min: ms, Mean: ms, Max: 5 * ms}}, ms, 5 * ms, true},
		{"exponential mostly capped", NetworkConfig{Latency: Latency{Shape: Exponential, Min: ms, Mean: time.Hour, Max: 2 * ms}}, ms, 2 * ms, false},
		{"exponential absurd mean", NetworkConfig{Latency: Latency{Shape: Exponential, Min: 0, Mean: math.MaxInt64, Max: ms}}, 0, ms, false},
		{"default", DefaultNetwork(), 500 * time.Microsecond, 5 * ms, true},
		{"reorder adds at most ReorderDelayMax", NetworkConfig{Latency: Latency{Shape: Uniform, Min: ms, Max: ms}, ReorderProbability: 1, ReorderDelayMax: ms}, ms, 2 * ms, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a, b, _, pb := twoNodes(t, tt.net, 7)
			sentAt := w.Clock(b).Monotonic() // b's clock is perfect: it reads true time
			const n = 2000
			for i := range n {
				send(t, w, a, b, testMsg{N: uint64(i)})
			}
			runAll(t, w)
			got := pb.recvs()
			if len(got) != n {
				t.Fatalf("received %d messages, want %d", len(got), n)
			}
			lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
			for _, r := range got {
				d := r.Mono - sentAt
				if d < tt.min || d > tt.max {
					t.Fatalf("latency %v of message %v: want within [%v, %v]", d, r.Msg, tt.min, tt.max)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			if tt.spread && lo == hi {
				t.Errorf("all %d latencies are %v: want a spread within [%v, %v]", n, lo, tt.min, tt.max)
			}
		})
	}
}

// TestExponentialLatencyIsMostlyFast checks the shape, not only the bounds:
// with the cap far away, the median of Min + Exp(Mean) is Min + Mean·ln 2.
func TestExponentialLatencyIsMostlyFast(t *testing.T) {
	ms := time.Millisecond
	nw := network{cfg: NetworkConfig{Latency: Latency{Shape: Exponential, Min: ms, Mean: ms, Max: time.Second}}}
	w := newWorld(t, Config{Seed: 3})
	nw.rng = w.Stream()
	const n = 20000
	below := 0
	median := ms + time.Duration(float64(ms)*math.Ln2)
	for range n {
		if nw.decide().latency[0] < median {
			below++
		}
	}
	if frac := float64(below) / n; frac < 0.47 || frac > 0.53 {
		t.Errorf("fraction below the theoretical median %v: got %.3f, want ≈ 0.5", median, frac)
	}
}

func TestLossAndDuplication(t *testing.T) {
	tests := []struct {
		name               string
		loss, dup          float64
		wantPerMsg         int // copies delivered per message sent
		wantDropped, wantD int // per message sent: dropped, duplicated
	}{
		{"no faults", 0, 0, 1, 0, 0},
		{"loss 1 drops everything", 1, 0, 0, 1, 0},
		{"loss 1 wins over duplication", 1, 1, 0, 1, 0},
		{"duplicate 1 delivers two copies", 0, 1, 2, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			net := NetworkConfig{Latency: Latency{Shape: Uniform, Min: time.Millisecond, Max: 2 * time.Millisecond}, LossProbability: tt.loss, DuplicateProbability: tt.dup}
			w, a, b, _, pb := twoNodes(t, net, 11)
			const n = 500
			for i := range n {
				send(t, w, a, b, testMsg{N: uint64(i)})
			}
			runAll(t, w)
			counts := map[uint64]int{}
			for _, r := range pb.recvs() {
				counts[r.Msg.(testMsg).N]++
			}
			for i := range uint64(n) {
				if counts[i] != tt.wantPerMsg {
					t.Fatalf("message %d delivered %d times, want %d", i, counts[i], tt.wantPerMsg)
				}
			}
			want := NetworkStats{Sent: n, Delivered: n * tt.wantPerMsg, Dropped: n * tt.wantDropped, Duplicated: n * tt.wantD}
			if got := w.Stats().Network; got != want {
				t.Errorf("stats: got %+v, want %+v", got, want)
			}
		})
	}
}

// TestNetworkStatsBalance: at quiescence every copy created has been either
// delivered or dropped.
func TestNetworkStatsBalance(t *testing.T) {
	net := NetworkConfig{Latency: Latency{Shape: Uniform, Min: time.Millisecond, Max: 5 * time.Millisecond}, LossProbability: 0.3, DuplicateProbability: 0.3, ReorderProbability: 0.3, ReorderDelayMax: time.Millisecond}
	w, a, b, _, pb := twoNodes(t, net, 5)
	for i := range 1000 {
		send(t, w, a, b, testMsg{N: uint64(i)})
	}
	runAll(t, w)
	s := w.Stats().Network
	if s.Sent+s.Duplicated != s.Delivered+s.Dropped {
		t.Errorf("sent %d + duplicated %d != delivered %d + dropped %d", s.Sent, s.Duplicated, s.Delivered, s.Dropped)
	}
	if s.Delivered != len(pb.recvs()) {
		t.Errorf("Delivered = %d, but the process received %d", s.Delivered, len(pb.recvs()))
	}
	if s.Dropped == 0 || s.Duplicated == 0 {
		t.Errorf("with loss and duplication 0.3 over 1000 messages: got %+v, want some of each", s)
	}
}

func TestBlockedLinks(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		at time.Duration
		do func(w *World, a, b NodeID)
	}
	block := func(w *World, a, b NodeID) { w.Block(a, b) }
	tests := []struct {
		name   string
		steps  []step
		sendAt time.Duration // a→b and b→a both sent then, arriving 10ms later
		wantAB bool          // a's message reaches b
		wantBA bool          // b's message reaches a
	}{
		{"open", nil, 0, true, true},
		{"blocked a→b is directed", []step{{0, block}}, ms, false, true},
		{"blocked b→a is directed", []step{{0, func(w *World, a, b NodeID) { w.Block(b, a) }}}, ms, true, false},
		{"blocked while in flight: dropped on arrival", []step{{5 * ms, block}}, 0, false, true},
		{"blocked and unblocked while in flight: delivered", []step{{2 * ms, block}, {5 * ms, func(w *World, a, b NodeID) { w.Unblock(a, b) }}}, 0, true, true},
		{"sent while blocked stays lost after unblock", []step{{0, block}, {5 * ms, func(w *World, a, b NodeID) { w.Unblock(a, b) }}}, ms, false, true},
		{"unblock reopens", []step{{0, block}, {ms, func(w *World, a, b NodeID) { w.Unblock(a, b) }}}, 2 * ms, true, true},
		{"heal reopens", []step{{0, block}, {0, func(w *World, a, b NodeID) { w.Block(b, a) }}, {ms, func(w *World, a, b NodeID) { w.Heal() }}}, 2 * ms, true, true},
		{"partition blocks both ways", []step{{0, func(w *World, a, b NodeID) { w.Partition([]NodeID{a}, []NodeID{b}) }}}, ms, false, false},
		{"partition in flight", []step{{5 * ms, func(w *World, a, b NodeID) { w.Partition([]NodeID{b}, []NodeID{a}) }}}, 0, false, false},
		{"heal after partition", []step{{0, func(w *World, a, b NodeID) { w.Partition([]NodeID{a}, []NodeID{b}) }}, {ms, func(w *World, a, b NodeID) { w.Heal() }}}, 2 * ms, true, true},
		{"heal while in flight", []step{{2 * ms, func(w *World, a, b NodeID) { w.Partition([]NodeID{a}, []NodeID{b}) }}, {5 * ms, func(w *World, a, b NodeID) { w.Heal() }}}, 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a, b, pa, pb := twoNodes(t, fixedLatency(10*ms), 1)
			for _, s := range tt.steps {
				w.At(s.at, "fault", func() { s.do(w, a, b) })
			}
			sendAt(t, w, tt.sendAt, a, b, testMsg{N: 1})
			sendAt(t, w, tt.sendAt, b, a, testMsg{N: 2})
			runAll(t, w)
			if got := len(pb.recvs()) == 1; got != tt.wantAB {
				t.Errorf("a→b delivered: got %v (%d copies), want %v", got, len(pb.recvs()), tt.wantAB)
			}
			if got := len(pa.recvs()) == 1; got != tt.wantBA {
				t.Errorf("b→a delivered: got %v (%d copies), want %v", got, len(pa.recvs()), tt.wantBA)
			}
			for _, r := range append(pa.recvs(), pb.recvs()...) {
				if want := tt.sendAt + 10*ms; r.Mono != want {
					t.Errorf("message %v arrived at %v, want %v", r.Msg, r.Mono, want)
				}
			}
			s := w.Stats().Network
			if want := 2; s.Delivered+s.Dropped != want || s.Sent != want {
				t.Errorf("stats %+v: want 2 sent, each delivered or dropped", s)
			}
		})
	}
}

// TestPartitionLeavesOtherLinksOpen: a partition {a} | {b, c} cuts a off
// from both, both ways, but b and c still talk.
func TestPartitionLeavesOtherLinksOpen(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(time.Millisecond)})
	ids := make([]NodeID, 3)
	probes := make([]*probe, 3)
	for i, name := range []string{"a", "b", "c"} {
		ids[i], probes[i] = addProbe(t, w, name)
	}
	runAll(t, w)
	w.Partition(ids[:1], ids[1:])
	for _, from := range ids {
		for _, to := range ids {
			if from != to {
				send(t, w, from, to, testMsg{N: uint64(from)*10 + uint64(to)})
			}
		}
	}
	runAll(t, w)
	for i, p := range probes {
		var got []uint64
		for _, r := range p.recvs() {
			got = append(got, r.Msg.(testMsg).N)
		}
		want := map[int][]uint64{0: nil, 1: {21}, 2: {12}}[i]
		if len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) {
			t.Errorf("node %d received %v, want %v", i, got, want)
		}
	}
}

// TestBlockSurvivesAddNode: growing the link matrix keeps existing blocks.
func TestBlockSurvivesAddNode(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(time.Millisecond)})
	a, _ := addProbe(t, w, "a")
	b, pb := addProbe(t, w, "b")
	w.Block(a, b)
	c, pc := addProbe(t, w, "c")
	runAll(t, w)
	send(t, w, a, b, testMsg{N: 1})
	send(t, w, a, c, testMsg{N: 2})
	runAll(t, w)
	if len(pb.recvs()) != 0 {
		t.Errorf("a→b still blocked after AddNode: got %d deliveries, want 0", len(pb.recvs()))
	}
	if len(pc.recvs()) != 1 {
		t.Errorf("a→c (new node) open: got %d deliveries, want 1", len(pc.recvs()))
	}
}

func TestNetworkConfigValidate(t *testing.T) {
	ok := NetworkConfig{Latency: Latency{Shape: Uniform, Min: 1, Max: 2}}
	with := func(f func(c *NetworkConfig)) NetworkConfig { c := ok; f(&c); return c }
	tests := []struct {
		name    string
		cfg     NetworkConfig
		wantErr string // substring naming the field; "" = valid
	}{
		{"zero value", NetworkConfig{}, ""},
		{"default", DefaultNetwork(), ""},
		{"uniform ignores mean", with(func(c *NetworkConfig) { c.Latency.Mean = -1 }), ""},
		{"min equals max", with(func(c *NetworkConfig) { c.Latency.Max = 1 }), ""},
		{"probabilities at the bounds", with(func(c *NetworkConfig) { c.LossProbability, c.DuplicateProbability, c.ReorderProbability = 0, 1, 1 }), ""},
		{"unknown shape", with(func(c *NetworkConfig) { c.Latency.Shape = 7 }), "shape"},
		{"negative min", with(func(c *NetworkConfig) { c.Latency.Min = -1 }), "min"},
		{"max below min", with(func(c *NetworkConfig) { c.Latency.Max = 0 }), "max"},
		{"exponential without mean", with(func(c *NetworkConfig) { c.Latency.Shape = Exponential }), "mean"},
		{"exponential negative mean", with(func(c *NetworkConfig) { c.Latency.Shape, c.Latency.Mean = Exponential, -1 }), "mean"},
		{"negative reorder delay", with(func(c *NetworkConfig) { c.ReorderDelayMax = -1 }), "reorder delay"},
		{"negative loss", with(func(c *NetworkConfig) { c.LossProbability = -0.1 }), "loss"},
		{"loss above 1", with(func(c *NetworkConfig) { c.LossProbability = 1.5 }), "loss"},
		{"loss NaN", with(func(c *NetworkConfig) { c.LossProbability = math.NaN() }), "loss"},
		{"duplicate above 1", with(func(c *NetworkConfig) { c.DuplicateProbability = 2 }), "duplicate"},
		{"duplicate NaN", with(func(c *NetworkConfig) { c.DuplicateProbability = math.NaN() }), "duplicate"},
		{"reorder negative", with(func(c *NetworkConfig) { c.ReorderProbability = -1 }), "reorder probability"},
		{"reorder infinite", with(func(c *NetworkConfig) { c.ReorderProbability = math.Inf(1) }), "reorder probability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate: got nil, want an error mentioning %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Validate: got %q, want it to mention %q", err, tt.wantErr)
			}
			// New and SetNetwork must apply the same check.
			w, newErr := New(Config{Network: tt.cfg})
			if (newErr != nil) != (err != nil) {
				t.Errorf("New: got error %v, want %v", newErr, err)
			}
			if w == nil {
				w = newWorld(t, Config{})
			}
			if setErr := w.SetNetwork(tt.cfg); (setErr != nil) != (err != nil) {
				t.Errorf("SetNetwork: got error %v, want %v", setErr, err)
			}
		})
	}
}

// TestSetNetworkAppliesFromNow: messages already in flight keep their
// latency; later ones use the new config; a rejected config changes nothing.
func TestSetNetworkAppliesFromNow(t *testing.T) {
	ms := time.Millisecond
	w, a, b, _, pb := twoNodes(t, fixedLatency(10*ms), 1)
	send(t, w, a, b, testMsg{N: 1}) // arrives at 10ms
	if err := w.SetNetwork(fixedLatency(ms)); err != nil {
		t.Fatal(err)
	}
	send(t, w, a, b, testMsg{N: 2}) // arrives at 1ms
	if err := w.SetNetwork(NetworkConfig{LossProbability: 2}); err == nil {
		t.Fatal("SetNetwork accepted loss probability 2")
	}
	send(t, w, a, b, testMsg{N: 3}) // still 1ms, still no loss
	runAll(t, w)
	got := pb.recvs()
	want := []struct {
		n    uint64
		mono time.Duration
	}{{2, ms}, {3, ms}, {1, 10 * ms}}
	if len(got) != len(want) {
		t.Fatalf("received %d messages, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Msg.(testMsg).N != want[i].n || r.Mono != want[i].mono {
			t.Errorf("delivery %d: got message %d at %v, want message %d at %v", i, r.Msg.(testMsg).N, r.Mono, want[i].n, want[i].mono)
		}
	}
}

// TestNetworkGetterAndBlocked: Network returns what SetNetwork last set (a
// rejected config changes nothing), and Blocked shows each directed link.
func TestNetworkGetterAndBlocked(t *testing.T) {
	w := newWorld(t, Config{Seed: 1, Network: fixedLatency(ms)})
	a, _ := addProbe(t, w, "a")
	b, _ := addProbe(t, w, "b")
	if got := w.Network(); got != fixedLatency(ms) {
		t.Errorf("Network: got %+v, want the config New got", got)
	}
	lossy := DefaultNetwork()
	lossy.LossProbability = 0.5
	if err := w.SetNetwork(lossy); err != nil {
		t.Fatal(err)
	}
	bad := lossy
	bad.LossProbability = 2
	if err := w.SetNetwork(bad); err == nil {
		t.Errorf("SetNetwork(loss 2): got nil error, want one")
	}
	if got := w.Network(); got != lossy {
		t.Errorf("Network: got %+v, want %+v", got, lossy)
	}
	w.Block(a, b)
	if !w.Blocked(a, b) || w.Blocked(b, a) {
		t.Errorf("Blocked after Block(a, b): a→b %v, b→a %v; want true, false", w.Blocked(a, b), w.Blocked(b, a))
	}
	w.Heal()
	if w.Blocked(a, b) {
		t.Errorf("Blocked after Heal: got true, want false")
	}
}

// TestFaultWindowDoesNotShiftLaterDraws: a network fault on for a while
// changes the fate of the messages it covers only; every message sent
// after it gets the same latency as in a run without it. Shrinking a
// schedule relies on this.
func TestFaultWindowDoesNotShiftLaterDraws(t *testing.T) {
	base := NetworkConfig{Latency: Latency{Shape: Exponential, Min: time.Millisecond, Mean: time.Millisecond, Max: 50 * time.Millisecond}}
	draws := func(fault bool) []time.Duration {
		w := newWorld(t, Config{Seed: 5, Network: base})
		var out []time.Duration
		for i := range 200 {
			if fault && i == 50 {
				f := base
				f.LossProbability, f.DuplicateProbability, f.ReorderProbability, f.ReorderDelayMax = 0.5, 0.5, 0.5, 10*time.Millisecond
				w.SetNetwork(f)
			}
			if fault && i == 100 {
				w.SetNetwork(base)
			}
			out = append(out, w.net.decide().latency[0])
		}
		return out
	}
	a, b := draws(false), draws(true)
	for i := 100; i < 200; i++ {
		if a[i] != b[i] {
			t.Fatalf("message %d after the fault window: latency %v with it, %v without", i, b[i], a[i])
		}
	}
	same := 0
	for i := 50; i < 100; i++ {
		if a[i] == b[i] {
			same++
		}
	}
	if same == 50 {
		t.Fatal("the fault window changed nothing: the test proves nothing")
	}
}
