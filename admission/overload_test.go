package admission_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/admission"
	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/sim"
)

// The overload experiment, in the simulator: a client floods a server
// whose backend is a service-time queue (Servers workers, each request
// taking Service; an M/D/c queue, so latency grows with the requests let
// in), behind an admission gate that sheds at once (a "429") whatever is
// over the limit. Load is light, then Flood times the capacity, then light
// again. Everything runs on virtual time, deterministically.

type request struct{ ID uint64 }
type reply struct {
	ID   uint64
	Shed bool
}

func (m request) Fingerprint() uint64 { return process.Mix(1, m.ID) }
func (m reply) Fingerprint() uint64 {
	if m.Shed {
		return process.Mix(3, m.ID)
	}
	return process.Mix(2, m.ID)
}

// backend is the server: the gate, then a FIFO in front of the workers.
type backend struct {
	servers int
	phases  []phase             // each phase's service time (0: service)
	static  int                 // the limit when alg is nil
	alg     admission.Algorithm // built in Start, on the node's clock
	newAlg  func(process.Clock) admission.Algorithm
	env     process.Env

	inflight int
	busy     int
	queue    []job
	limits   []int // the limit after every sample, for the test
}

type job struct {
	from     process.NodeID
	id       uint64
	admitted time.Duration
}

func (b *backend) limit() int {
	if b.alg == nil {
		return b.static
	}
	return b.alg.Limit()
}

func (b *backend) Start(env process.Env) {
	b.env = env
	if b.newAlg != nil {
		b.alg = b.newAlg(env.Clock())
	}
}

func (b *backend) Receive(env process.Env, from process.NodeID, msg process.Message) {
	req := msg.(request)
	if b.inflight >= b.limit() {
		env.Send(from, reply{ID: req.ID, Shed: true})
		return
	}
	b.inflight++
	b.queue = append(b.queue, job{from: from, id: req.ID, admitted: env.Clock().Monotonic()})
	b.dispatch()
}

func (b *backend) dispatch() {
	for b.busy < b.servers && len(b.queue) > 0 {
		j := b.queue[0]
		b.queue = b.queue[1:]
		b.busy++
		d := service
		if p := phaseAt(b.phases, b.env.Clock().Monotonic()); p >= 0 && b.phases[p].service > 0 {
			d = b.phases[p].service
		}
		b.env.Clock().AfterFunc(d, func() {
			b.busy--
			if b.alg != nil {
				b.limits = append(b.limits, b.alg.Sample(b.env.Clock().Monotonic()-j.admitted, b.inflight, false))
			}
			b.inflight--
			b.env.Send(j.from, reply{ID: j.id})
			b.dispatch()
		})
	}
}

// phase is a stretch of constant offered load and service time.
type phase struct {
	dur     time.Duration
	rate    int           // requests per second
	service time.Duration // per request; 0: service
}

// flood is the open-loop client: it sends at the phase's rate whatever
// the answers, and records each answer's latency and phase.
type flood struct {
	server process.NodeID
	phases []phase
	env    process.Env
	next   uint64
	sent   map[uint64]sentAt
	got    [][]time.Duration // per phase: latencies of admitted requests
	shed   []int             // per phase
	offer  []int             // per phase
}

type sentAt struct {
	at    time.Duration
	phase int
}

func (f *flood) Start(env process.Env) {
	f.env = env
	f.sent = map[uint64]sentAt{}
	f.got = make([][]time.Duration, len(f.phases))
	f.shed = make([]int, len(f.phases))
	f.offer = make([]int, len(f.phases))
	f.arm()
}

// phaseAt is the phase at monotonic reading t, or -1 past the last.
func phaseAt(phases []phase, t time.Duration) int {
	for i, p := range phases {
		if t < p.dur {
			return i
		}
		t -= p.dur
	}
	return -1
}

// arm schedules the next request: gaps uniform in [0.5, 1.5] of the mean,
// drawn as integers, so the run is the same on every platform.
func (f *flood) arm() {
	p := phaseAt(f.phases, f.env.Clock().Monotonic())
	if p < 0 {
		return
	}
	mean := int64(time.Second) / int64(f.phases[p].rate)
	gap := time.Duration(mean/2 + f.env.Rand().Int64N(mean+1))
	f.env.Clock().AfterFunc(gap, func() {
		now := f.env.Clock().Monotonic()
		if p := phaseAt(f.phases, now); p >= 0 {
			f.next++
			f.sent[f.next] = sentAt{now, p}
			f.offer[p]++
			f.env.Send(f.server, request{ID: f.next})
		}
		f.arm()
	})
}

func (f *flood) Receive(env process.Env, _ process.NodeID, msg process.Message) {
	r := msg.(reply)
	s := f.sent[r.ID]
	delete(f.sent, r.ID)
	if r.Shed {
		f.shed[s.phase]++
		return
	}
	f.got[s.phase] = append(f.got[s.phase], env.Clock().Monotonic()-s.at)
}

// result is one phase's outcome as the client saw it.
type result struct {
	offered, admitted, shed int
	p50, p99                time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("offered %5d admitted %5d shed %5d  p50 %7v p99 %7v", r.offered, r.admitted, r.shed, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond))
}

const (
	servers = 8
	service = 10 * time.Millisecond // capacity: 800 requests/s
)

// phases is the flood: light, three times the capacity, light.
var phases = []phase{{3 * time.Second, 400, 0}, {10 * time.Second, 2400, 0}, {5 * time.Second, 400, 0}}

// runOverload runs the experiment with the gate given by static (the
// limit) or newAlg, and returns each phase's result and the trace hash.
func runOverload(t *testing.T, seed uint64, phases []phase, static int, newAlg func(process.Clock) admission.Algorithm) ([]result, *backend, uint64) {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: seed, Network: sim.DefaultNetwork()})
	if err != nil {
		t.Fatal(err)
	}
	srv := &backend{servers: servers, phases: phases, static: static, newAlg: newAlg}
	cl := &flood{server: 0, phases: phases}
	if _, err := w.AddNode("server", func() process.Process { return srv }, fakeclock.Config{DriftPPM: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddNode("client", func() process.Process { return cl }, fakeclock.Config{}); err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, p := range phases {
		total += p.dur
	}
	if out := w.Run(total+5*time.Second, 10_000_000); out != sim.Quiescent {
		t.Fatalf("run ended %v at %v", out, w.Now())
	}
	res := make([]result, len(phases))
	for i := range phases {
		lat := slices.Clone(cl.got[i])
		slices.Sort(lat)
		r := result{offered: cl.offer[i], admitted: len(lat), shed: cl.shed[i]}
		if len(lat) > 0 {
			r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
		}
		res[i] = r
	}
	if len(cl.sent) != 0 {
		t.Fatalf("%d requests never answered", len(cl.sent))
	}
	return res, srv, w.Hash()
}

// TestOverloadGradientBoundsP99: under a flood at three times the
// backend's capacity, a static bound set high (400 in flight) lets a queue
// build in the backend and the p99 of admitted requests climbs to about
// limit/servers × service; the gradient limit (same bounds) keeps it a
// small multiple of the service time while still admitting about the
// backend's capacity, and sheds the excess at once instead of queueing it.
// When the flood ends, the gradient service answers light load with
// (almost) nothing shed and latency back near the service time. aimd, with
// its latency target set by hand at 5 service times, is logged beside them.
func TestOverloadGradientBoundsP99(t *testing.T) {
	const bound = 100 * time.Millisecond // 10 service times
	static, _, _ := runOverload(t, 1, phases, 400, nil)
	grad, srv, h1 := runOverload(t, 1, phases, 0, func(c process.Clock) admission.Algorithm {
		return admission.NewGradient(c, admission.GradientConfig{Min: 4, Max: 400})
	})
	aimd, _, _ := runOverload(t, 1, phases, 0, func(c process.Clock) admission.Algorithm {
		return admission.NewAIMD(c, admission.AIMDConfig{Min: 4, Max: 400, Target: 5 * service})
	})
	for i, name := range []string{"light", "flood", "after"} {
		t.Logf("%-6s static   %v", name, static[i])
		t.Logf("%-6s gradient %v", name, grad[i])
		t.Logf("%-6s aimd     %v", name, aimd[i])
	}
	flood := 1
	if static[flood].p99 <= bound {
		t.Errorf("static bound: flood p99 %v within %v; the experiment does not overload", static[flood].p99, bound)
	}
	if grad[flood].p99 > bound {
		t.Errorf("gradient: flood p99 %v, want <= %v", grad[flood].p99, bound)
	}
	capacity := int(phases[flood].dur / service * servers)
	if grad[flood].admitted < capacity*8/10 {
		t.Errorf("gradient admitted %d in the flood, want >= 80%% of the backend's capacity %d", grad[flood].admitted, capacity)
	}
	if excess := grad[flood].offered - capacity; grad[flood].shed < excess*9/10 {
		t.Errorf("gradient shed %d in the flood, want >= 90%% of the excess %d", grad[flood].shed, excess)
	}
	after := len(phases) - 1
	if grad[after].shed > grad[after].offered/100 || grad[after].p99 > 3*service {
		t.Errorf("gradient after the flood: %v; want under 1%% shed (only at the edge of the flood) and p99 <= %v", grad[after], 3*service)
	}
	for _, l := range srv.limits {
		if l < 4 || l > 400 {
			t.Fatalf("limit %d outside 4..400", l)
		}
	}
	if _, _, h2 := runOverload(t, 1, phases, 0, func(c process.Clock) admission.Algorithm {
		return admission.NewGradient(c, admission.GradientConfig{Min: 4, Max: 400})
	}); h1 != h2 {
		t.Fatalf("the same seed gave trace hashes %x and %x", h1, h2)
	}
}

// TestBrownoutGradientBoundsP99: the load stays light (400/s) but the
// backend browns out — every request takes 4x as long for 10 s, so its
// capacity (200/s) falls below the load. The static bound lets the queue
// grow to 400 requests (seconds of latency); the gradient limit falls
// with the latency and keeps p99 to a few service times, and when the
// brownout ends it recovers on its own: nothing shed, latency back.
func TestBrownoutGradientBoundsP99(t *testing.T) {
	brownout := []phase{{3 * time.Second, 400, 0}, {10 * time.Second, 400, 4 * service}, {5 * time.Second, 400, 0}}
	static, _, _ := runOverload(t, 2, brownout, 400, nil)
	grad, _, _ := runOverload(t, 2, brownout, 0, func(c process.Clock) admission.Algorithm {
		return admission.NewGradient(c, admission.GradientConfig{Min: 4, Max: 400})
	})
	for i, name := range []string{"before", "brown", "after"} {
		t.Logf("%-6s static   %v", name, static[i])
		t.Logf("%-6s gradient %v", name, grad[i])
	}
	const bound = 250 * time.Millisecond // 6 brownout service times
	if static[1].p99 <= bound {
		t.Errorf("static bound: brownout p99 %v within %v; the experiment does not overload", static[1].p99, bound)
	}
	if grad[1].p99 > bound {
		t.Errorf("gradient: brownout p99 %v, want <= %v", grad[1].p99, bound)
	}
	if capacity := int(10 * time.Second / (4 * service) * servers); grad[1].admitted < capacity*8/10 {
		t.Errorf("gradient admitted %d in the brownout, want >= 80%% of the capacity %d", grad[1].admitted, capacity)
	}
	if grad[2].shed > grad[2].offered/100 || grad[2].p99 > 3*service {
		t.Errorf("gradient after the brownout: %v; want under 1%% shed and p99 <= %v", grad[2], 3*service)
	}
}
