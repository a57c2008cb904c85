package sim

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/jonboulle/clockwork"
)

// Shared fixtures of the sim tests: a tiny message type and a recording
// process whose observations outlive crashes, so that a test can compare
// what every incarnation of a node saw.

// testMsg is the message the tests send. Its Fingerprint mixes whole words
// and does not allocate, as Message requires.
type testMsg struct {
	N    uint64
	Body string
}

func (m testMsg) Fingerprint() uint64 { return Mix(m.N, HashString(m.Body)) }

// obs is one thing a test process saw.
type obs struct {
	What string        // "start", "recv" or "timer"
	Inc  int           // incarnation: 1 for the first Start, 2 after the first restart…
	Mono time.Duration // the node's own monotonic reading when it happened
	From NodeID        // recv only
	Msg  Message       // recv only
	Tag  string        // timer only: the name the timer was armed with
	Keys []string      // start only: what the disk held
}

// probe is the harness side of a test node: it builds the node's processes
// (counting how often the factory runs) and keeps their observations.
type probe struct {
	t       testing.TB
	starts  int
	obs     []obs
	onStart func(p *proc)
	onRecv  func(p *proc, from NodeID, m Message)
}

// proc is one incarnation of a probe's process.
type proc struct {
	pr  *probe
	env Env
	inc int
}

func (pr *probe) factory() func() Process {
	return func() Process {
		pr.starts++
		return &proc{pr: pr, inc: pr.starts}
	}
}

func (p *proc) Start(env Env) {
	p.env = env
	p.pr.obs = append(p.pr.obs, obs{What: "start", Inc: p.inc, Mono: env.Clock().Monotonic(), Keys: env.Disk().Keys("")})
	if p.pr.onStart != nil {
		p.pr.onStart(p)
	}
}

func (p *proc) Receive(env Env, from NodeID, m Message) {
	if env != p.env {
		p.pr.t.Errorf("Receive got env %v, want the one Start got", env)
	}
	p.pr.obs = append(p.pr.obs, obs{What: "recv", Inc: p.inc, Mono: env.Clock().Monotonic(), From: from, Msg: m})
	if p.pr.onRecv != nil {
		p.pr.onRecv(p, from, m)
	}
}

// timer arms a timer on the node's own clock that records its firing.
func (p *proc) timer(d time.Duration, tag string) clockwork.Timer {
	return p.env.Clock().AfterFunc(d, func() {
		p.pr.obs = append(p.pr.obs, obs{What: "timer", Inc: p.inc, Mono: p.env.Clock().Monotonic(), Tag: tag})
	})
}

// recvs returns the received messages only.
func (pr *probe) recvs() []obs {
	var out []obs
	for _, o := range pr.obs {
		if o.What == "recv" {
			out = append(out, o)
		}
	}
	return out
}

// seen returns the observations other than starts.
func (pr *probe) seen() []obs {
	var out []obs
	for _, o := range pr.obs {
		if o.What != "start" {
			out = append(out, o)
		}
	}
	return out
}

// fixedLatency is a network that delivers every message after exactly d.
func fixedLatency(d time.Duration) NetworkConfig {
	return NetworkConfig{Latency: Latency{Shape: Uniform, Min: d, Max: d}}
}

// newWorld builds a world or fails the test.
func newWorld(t testing.TB, cfg Config) *World {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return w
}

// addProbe adds a node run by a fresh probe with a perfect clock.
func addProbe(t testing.TB, w *World, name string) (NodeID, *probe) {
	t.Helper()
	return addProbeClock(t, w, name, fakeclock.Config{})
}

func addProbeClock(t testing.TB, w *World, name string, clock fakeclock.Config) (NodeID, *probe) {
	t.Helper()
	pr := &probe{t: t}
	id, err := w.AddNode(name, pr.factory(), clock)
	if err != nil {
		t.Fatalf("AddNode(%q): %v", name, err)
	}
	return id, pr
}

// send makes node from's current process send m to to, as if it had decided
// to: the harness cannot send on its own behalf.
func send(t testing.TB, w *World, from, to NodeID, m Message) {
	t.Helper()
	p, ok := w.Process(from).(*proc)
	if !ok || p.env == nil {
		t.Fatalf("node %d has no started process to send from", from)
	}
	p.env.Send(to, m)
}

// sendAt schedules send at true time at.
func sendAt(t testing.TB, w *World, at time.Duration, from, to NodeID, m Message) {
	w.At(at, "send", func() { send(t, w, from, to, m) })
}

// runAll runs w until it is quiescent, failing if it is not within a
// generous budget.
func runAll(t testing.TB, w *World) {
	t.Helper()
	if got := w.Run(time.Hour, 1_000_000); got != Quiescent {
		t.Fatalf("Run: got %v, want %v", got, Quiescent)
	}
}
