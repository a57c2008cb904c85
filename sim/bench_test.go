package sim

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/jonboulle/clockwork"
)

// The loop benchmarks keep a constant number of events pending: every fired
// event schedules exactly one more. One op fires as many events as are
// pending (one "generation"), so ns/event = ns/op ÷ events/op. The bare-heap
// benchmarks do the same number of pop+push pairs on the queue alone, with
// the same distribution of delays, so that loop ns/event ÷ heap ns/event is
// the loop's overhead.

const (
	benchNodes   = 100
	benchPeriod  = time.Millisecond // timers re-arm after [period, 2·period)
	benchLatency = time.Millisecond // messages take [latency, 2·latency]
)

// benchTimerProc arms perNode timers at Start; each re-arms itself with
// its own period whenever it fires, through Reset, as a heartbeat would.
type benchTimerProc struct{ perNode int }

func (p *benchTimerProc) Start(env Env) {
	clk := env.Clock()
	for range p.perNode {
		period := benchPeriod + time.Duration(env.Rand().Int64N(int64(benchPeriod)))
		var t clockwork.Timer
		t = clk.AfterFunc(period, func() { t.Reset(period) })
	}
}

func (p *benchTimerProc) Receive(Env, NodeID, Message) {}

// benchRawTimerProc is benchTimerProc without fakeclock: its timers go
// straight to the node's scheduler, which is what the clock calls. The gap
// between the two is the clock's cost; the gap between this and the bare
// heap is the loop's own.
type benchRawTimerProc struct{ perNode int }

func (p *benchRawTimerProc) Start(env Env) {
	s := scheduler{env.(nodeEnv).n}
	for range p.perNode {
		period := benchPeriod + time.Duration(env.Rand().Int64N(int64(benchPeriod)))
		r := &benchRawTimer{s: s, period: period}
		s.Schedule(s.TrueNow()+period, r)
	}
}

// benchRawTimer re-schedules itself with its period whenever it fires.
type benchRawTimer struct {
	s      scheduler
	period time.Duration
}

func (r *benchRawTimer) Fire(uint64) { r.s.Schedule(r.s.TrueNow()+r.period, r) }

func (p *benchRawTimerProc) Receive(Env, NodeID, Message) {}

// benchMsgProc sends perNode messages at Start; each received message is
// forwarded, unchanged, to the next node.
type benchMsgProc struct{ perNode, nodes int }

func (p *benchMsgProc) Start(env Env) {
	for i := range p.perNode {
		env.Send(NodeID((int(env.ID())+1)%p.nodes), testMsg{N: uint64(i)})
	}
}

func (p *benchMsgProc) Receive(env Env, _ NodeID, m Message) {
	env.Send(NodeID((int(env.ID())+1)%p.nodes), m)
}

// benchWorld builds a world with pending events always queued, runs its
// Start events and a few generations to grow every buffer, and returns it.
func benchWorld(b *testing.B, kind string, pending int) *World {
	b.Helper()
	net := NetworkConfig{Latency: Latency{Shape: Uniform, Min: benchLatency, Max: 2 * benchLatency}}
	w, err := New(Config{Seed: 1, Network: net})
	if err != nil {
		b.Fatal(err)
	}
	perNode := pending / benchNodes
	for range benchNodes {
		var f func() Process
		switch kind {
		case "timer":
			f = func() Process { return &benchTimerProc{perNode: perNode} }
		case "rawtimer":
			f = func() Process { return &benchRawTimerProc{perNode: perNode} }
		case "message":
			f = func() Process { return &benchMsgProc{perNode: perNode, nodes: benchNodes} }
		}
		if _, err := w.AddNode("n", f, fakeclock.Config{}); err != nil {
			b.Fatal(err)
		}
	}
	w.Run(math.MaxInt64, benchNodes) // the Start events
	if got := w.queue.len(); got != pending {
		b.Fatalf("%d events pending, want %d", got, pending)
	}
	w.Run(math.MaxInt64, uint64(3*pending)) // warm-up
	return w
}

func benchLoop(b *testing.B, pending int) {
	for _, kind := range []string{"timer", "rawtimer", "message"} {
		b.Run(kind, func(b *testing.B) {
			w := benchWorld(b, kind, pending)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			step0 := w.Step()
			ops := 0
			for b.Loop() {
				if w.Run(math.MaxInt64, uint64(pending)) != StepLimit {
					b.Fatal("the world ran dry")
				}
				ops++
			}
			runtime.ReadMemStats(&ms1)
			events := float64(w.Step() - step0)
			if w.queue.len() != pending {
				b.Fatalf("%d events pending after the run, want %d", w.queue.len(), pending)
			}
			b.ReportMetric(events/float64(ops), "events/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/events, "allocs/event")
		})
	}
}

// BenchmarkLoop100 runs the event loop with 100 events pending.
func BenchmarkLoop100(b *testing.B) { benchLoop(b, 100) }

// BenchmarkLoop10k runs the event loop with 10,000 events pending.
func BenchmarkLoop10k(b *testing.B) { benchLoop(b, 10_000) }

// benchHeap pops and re-pushes pending events, each with its own period
// drawn as benchTimerProc draws it: the queue's share of a timer event.
func benchHeap(b *testing.B, pending int) {
	rng := rand.New(rand.NewPCG(1, 2))
	periods := make([]time.Duration, pending)
	var q queue
	for i := range periods {
		periods[i] = benchPeriod + time.Duration(rng.Int64N(int64(benchPeriod)))
		q.push(event{at: periods[i], kind: evTimer, id: uint64(i)})
	}
	round := func() {
		for range pending {
			e, _ := q.pop()
			e.at += periods[e.id]
			q.push(e)
		}
	}
	round() // warm-up
	round()
	ops := 0
	for b.Loop() {
		round()
		ops++
	}
	if q.len() != pending {
		b.Fatalf("%d events pending, want %d", q.len(), pending)
	}
	events := float64(ops * pending)
	b.ReportMetric(float64(pending), "events/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
}

// BenchmarkBareHeap100 is BenchmarkLoop100's baseline: the queue alone.
func BenchmarkBareHeap100(b *testing.B) { benchHeap(b, 100) }

// BenchmarkBareHeap10k is BenchmarkLoop10k's baseline: the queue alone.
func BenchmarkBareHeap10k(b *testing.B) { benchHeap(b, 10_000) }
