package sim

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pingPong is a small busy world: three nodes pass counters around, each
// also sends a fresh ping to a random peer on a jittered timer, over a
// network with random latency, loss, duplication and reordering; b is
// paused, c crashes and restarts. Every kind of event and every source of
// randomness the simulator has is exercised.
func pingPong(t *testing.T, seed uint64, trace *bytes.Buffer, body string) *World {
	t.Helper()
	w := buildPingPong(t, seed, trace, body)
	if got := w.Run(100*ms, 100_000); got != Deadline {
		t.Fatalf("Run: got %v, want %v", got, Deadline)
	}
	return w
}

// buildPingPong builds pingPong's world without running it.
func buildPingPong(t *testing.T, seed uint64, trace *bytes.Buffer, body string) *World {
	t.Helper()
	return buildPingPongLimits(t, seed, trace, body, Limits{})
}

// buildPingPongLimits is buildPingPong with limits.
func buildPingPongLimits(t *testing.T, seed uint64, trace *bytes.Buffer, body string, limits Limits) *World {
	t.Helper()
	cfg := Config{Seed: seed, Limits: limits, Network: NetworkConfig{
		Latency:              Latency{Shape: Exponential, Min: 200 * time.Microsecond, Mean: ms, Max: 4 * ms},
		LossProbability:      0.1,
		DuplicateProbability: 0.1,
		ReorderProbability:   0.1,
		ReorderDelayMax:      ms,
	}}
	if trace != nil {
		cfg.Trace = trace
	}
	w := newWorld(t, cfg)
	const n = 3
	for i, name := range []string{"a", "b", "c"} {
		_, pr := addProbe(t, w, name)
		var tick func(p *proc)
		tick = func(p *proc) {
			p.env.Clock().AfterFunc(5*ms+time.Duration(p.env.Rand().Int64N(int64(5*ms))), func() {
				to := NodeID(p.env.Rand().IntN(n))
				p.env.Log().Debug("tick", "to", int(to))
				p.env.Send(to, testMsg{N: 0, Body: body})
				tick(p)
			})
		}
		pr.onStart = func(p *proc) {
			p.env.Log().Info("start", "inc", p.inc)
			if i == 0 {
				p.env.Send(1, testMsg{N: 1, Body: body})
			}
			tick(p)
		}
		pr.onRecv = func(p *proc, from NodeID, m Message) {
			tm := m.(testMsg)
			p.env.Log().With("peer", int(from)).Info("recv", "n", tm.N)
			if tm.N < 20 {
				p.env.Send(NodeID((int(p.env.ID())+1)%n), testMsg{N: tm.N + 1, Body: body})
			}
		}
	}
	w.At(20*ms, "pause b", func() { w.Pause(1, 7*ms) })
	w.At(40*ms, "crash c", func() { w.Crash(2) })
	w.At(45*ms, "restart c", func() { w.Restart(2) })
	return w
}

func TestSameSeedSameRun(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, 1 << 63} {
		var tr1, tr2 bytes.Buffer
		w1 := pingPong(t, seed, &tr1, "x")
		w2 := pingPong(t, seed, &tr2, "x")
		if w1.Hash() != w2.Hash() {
			t.Errorf("seed %d: hashes differ: %#x vs %#x", seed, w1.Hash(), w2.Hash())
		}
		if !bytes.Equal(tr1.Bytes(), tr2.Bytes()) {
			t.Errorf("seed %d: traces differ at byte %d", seed, firstDiff(tr1.Bytes(), tr2.Bytes()))
		}
		if w1.Stats() != w2.Stats() {
			t.Errorf("seed %d: stats differ: %+v vs %+v", seed, w1.Stats(), w2.Stats())
		}
		// The run must be busy enough for the comparison to mean something.
		s := w1.Stats()
		if s.Steps < 100 || s.Network.Dropped == 0 || s.Network.Duplicated == 0 || s.Crashes != 1 || s.Pauses != 1 {
			t.Errorf("seed %d: run too quiet to test determinism: %+v", seed, s)
		}
		for _, note := range []string{`note="held"`, `note="stale"`, `event=resume`, `event=timer`, `event=deliver`, `note="restart c"`} {
			if !strings.Contains(tr1.String(), note) {
				t.Errorf("seed %d: trace has no %s", seed, note)
			}
		}
		// Tracing is an observer: it must not change the run.
		if w3 := pingPong(t, seed, nil, "x"); w3.Hash() != w1.Hash() {
			t.Errorf("seed %d: hash without a trace writer %#x, with one %#x", seed, w3.Hash(), w1.Hash())
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestDifferentSeedOrMessageDifferentHash(t *testing.T) {
	seen := map[uint64]string{}
	for seed := range uint64(10) {
		h := pingPong(t, seed, nil, "x").Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("seed %d has the same hash %#x as %s", seed, h, prev)
		}
		seen[h] = fmt.Sprintf("seed %d", seed)
	}
	// Same events in the same order, only later: the times reach the hash.
	timed := func(lat time.Duration) uint64 {
		w := newWorld(t, Config{Seed: 1, Network: fixedLatency(lat)})
		a, _ := addProbe(t, w, "a")
		b, _ := addProbe(t, w, "b")
		sendAt(t, w, 0, a, b, testMsg{N: 1})
		runAll(t, w)
		return w.Hash()
	}
	if x, y := timed(ms), timed(2*ms); x == y {
		t.Errorf("latencies 1ms and 2ms give the same hash %#x", x)
	}
	// Same seed, same timing, different message content: the fingerprints
	// reach the hash.
	if x, y := pingPong(t, 1, nil, "x").Hash(), pingPong(t, 1, nil, "y").Hash(); x == y {
		t.Errorf("message bodies x and y give the same hash %#x", x)
	}
}

var (
	eventLine = regexp.MustCompile(`^step=(\d+) t=(\d+\.\d{6}s) node=(\S*) event=(start|deliver|timer|resume|action)( from=\S+ msg=\S+(?: \S+)*)?( note="[^"]*")?$`)
	logLine   = regexp.MustCompile(`^level=(?:DEBUG|INFO) msg=\S+((?: \S+=\S+)*)$`)
)

// TestTraceLines checks the format of every line: events carry step=, t=
// and node=; process log records carry the step, time and node of the event
// that logged them, and never the machine's clock.
func TestTraceLines(t *testing.T) {
	var tr bytes.Buffer
	pingPong(t, 7, &tr, "x")
	lines := strings.Split(strings.TrimSuffix(tr.String(), "\n"), "\n")
	var lastStep uint64
	var lastT, lastNode string
	events, logs := 0, 0
	for i, l := range lines {
		if strings.Contains(l, "time=") {
			t.Fatalf("line %d carries the machine's clock: %q", i+1, l)
		}
		if m := eventLine.FindStringSubmatch(l); m != nil {
			events++
			step, _ := strconv.ParseUint(m[1], 10, 64)
			if step <= lastStep {
				t.Fatalf("line %d: step %d does not follow %d: %q", i+1, step, lastStep, l)
			}
			if m[2] < lastT && len(m[2]) == len(lastT) {
				t.Fatalf("line %d: time %s before %s: %q", i+1, m[2], lastT, l)
			}
			lastStep, lastT, lastNode = step, m[2], m[3]
			if m[4] == "action" && m[3] != "" {
				t.Errorf("line %d: an action names node %q: %q", i+1, m[3], l)
			}
			if m[4] != "action" && m[3] == "" {
				t.Errorf("line %d: a node event names no node: %q", i+1, l)
			}
			continue
		}
		if m := logLine.FindStringSubmatch(l); m != nil {
			logs++
			attrs := map[string]string{}
			for _, kv := range strings.Fields(m[1]) {
				k, v, _ := strings.Cut(kv, "=")
				attrs[k] = v
			}
			want := map[string]string{"step": strconv.FormatUint(lastStep, 10), "t": lastT, "node": lastNode}
			for _, k := range []string{"step", "t", "node"} {
				if attrs[k] != want[k] {
					t.Errorf("line %d: log record has %s=%q, but the event firing has %s=%q: %q", i+1, k, attrs[k], k, want[k], l)
				}
			}
			continue
		}
		t.Fatalf("line %d is neither an event nor a log record: %q", i+1, l)
	}
	if events < 100 || logs < 50 {
		t.Errorf("got %d event lines and %d log lines, want a busy trace", events, logs)
	}
	if !strings.Contains(tr.String(), " peer=") || !strings.Contains(tr.String(), "level=DEBUG msg=tick") {
		t.Errorf("trace lacks the attributes added with Logger.With or the debug records")
	}
}

func TestTraceEventLineExactFormat(t *testing.T) {
	var tr bytes.Buffer
	w := newWorld(t, Config{Seed: 1, Trace: &tr, Network: fixedLatency(1500 * time.Microsecond)})
	_, pa := addProbe(t, w, "alpha")
	b, _ := addProbe(t, w, "beta")
	pa.onStart = func(p *proc) {
		p.env.Log().Info("hello", "k", "v")
		p.env.Send(b, testMsg{N: 7, Body: "hi"})
	}
	w.At(2*time.Second+3*time.Microsecond, "poke", func() {})
	runAll(t, w)
	want := strings.Join([]string{
		`step=1 t=0.000000s node=alpha event=start`,
		`level=INFO msg=hello step=1 t=0.000000s node=alpha k=v`,
		`step=2 t=0.000000s node=beta event=start`,
		`step=3 t=0.001500s node=beta event=deliver from=alpha msg=sim.testMsg{N:7 Body:hi}`,
		`step=4 t=2.000003s node= event=action note="poke"`,
	}, "\n") + "\n"
	if got := tr.String(); got != want {
		t.Errorf("trace:\n got\n%s want\n%s", got, want)
	}
}
