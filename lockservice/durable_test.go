package lockservice

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

func TestSealDetectsEveryTornPrefix(t *testing.T) {
	v := []byte(`{"term":7,"vote":2,"commit":41}`)
	b := seal(v)
	got, ok := unseal(b)
	if !ok || !bytes.Equal(got, v) {
		t.Fatalf("intact: got %q %v, want %q", got, ok, v)
	}
	for n := 0; n < len(b); n++ {
		if _, ok := unseal(b[:n]); ok {
			t.Fatalf("a %d-byte prefix of %d unsealed", n, len(b))
		}
	}
	flipped := bytes.Clone(b)
	flipped[len(flipped)-1] ^= 1
	if _, ok := unseal(flipped); ok {
		t.Fatal("a flipped bit unsealed")
	}
}

// slotWriter keeps a counter in a slotted record: Start loads it, and every
// tick stores counter+1, synced or not as the test says.
type slotWriter struct {
	loaded *[]uint64
	sync   *bool
	rec    slotted
	n      uint64
}

func (p *slotWriter) Start(env sim.Env) {
	p.rec = slotted{key: "counter"}
	if b, ok := p.rec.load(env.Disk()); ok {
		p.n = uint64(b[0])
	}
	*p.loaded = append(*p.loaded, p.n)
	env.Clock().AfterFunc(time.Millisecond, func() { p.bump(env) })
}

func (p *slotWriter) bump(env sim.Env) {
	p.n++
	p.rec.store(env.Disk(), []byte{byte(p.n)})
	if *p.sync {
		env.Disk().Sync()
	}
	env.Clock().AfterFunc(time.Millisecond, func() { p.bump(env) })
}

func (p *slotWriter) Receive(sim.Env, sim.NodeID, sim.Message) {}

// TestSlottedSurvivesTornOverwrite: a crash that tears the overwrite of a
// slotted record brings back the last synced copy, never garbage and never
// nothing, for every fraction of the torn write kept.
func TestSlottedSurvivesTornOverwrite(t *testing.T) {
	for _, keep := range []float64{0, 0.1, 0.5, 0.9, 0.99} {
		w, _ := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork()})
		var loaded []uint64
		syncing := true
		id, _ := w.AddNode("p", func() sim.Process { return &slotWriter{loaded: &loaded, sync: &syncing} }, fakeclock.Config{})
		w.Run(5500*time.Microsecond, 1000) // five synced bumps
		syncing = false
		w.Run(6500*time.Microsecond, 1000) // one more, unsynced
		w.CrashTorn(id, keep)
		w.Restart(id)
		w.Run(6600*time.Microsecond, 1000)
		if len(loaded) != 2 || loaded[0] != 0 || loaded[1] != 5 {
			t.Fatalf("keep %v: loaded %v, want [0 5]", keep, loaded)
		}
	}
}

// TestReplicaRestartsAfterTornLogWrite: a replica whose last log write was
// torn by a crash restarts, drops the torn tail, and the group goes on
// granting with growing tokens.
func TestReplicaRestartsAfterTornLogWrite(t *testing.T) {
	for _, keep := range []float64{0, 0.5, 0.95} {
		w, _ := sim.New(sim.Config{Seed: 3, Network: sim.DefaultNetwork()})
		peers := []sim.NodeID{0, 1, 2}
		var grants []uint64
		obs := observerFunc(func(e Event) {
			if e.Kind == EvGranted && !slices.Contains(grants, e.Token) {
				grants = append(grants, e.Token)
			}
		})
		for i := range peers {
			cfg := DefaultReplicaConfig(peers)
			cfg.Observer = obs
			w.AddNode([]string{"n1", "n2", "n3"}[i], func() sim.Process { return NewReplica(cfg) }, fakeclock.Config{})
		}
		// Make every sync slow so that crashes land between a log write
		// and its sync.
		for _, id := range peers {
			w.SetSyncDelay(id, 2*time.Millisecond)
		}
		for i := range 6 {
			// No store: the clients only acquire and release (their reads
			// go unanswered and time out).
			cfg := DefaultClientConfig([]string{"a", "b", "c", "d", "e", "f"}[i], peers, peers[0], "r")
			cfg.Cycles, cfg.WritesPerHold, cfg.StartDelay = 3, 0, 300*time.Millisecond
			w.AddNode(cfg.Name, func() sim.Process { return NewClient(cfg) }, fakeclock.Config{})
		}
		for k := range 20 {
			at := 400*time.Millisecond + time.Duration(k)*61*time.Millisecond
			victim := peers[k%3]
			w.At(at, "torn crash", func() { w.CrashTorn(victim, keep) })
			w.At(at+30*time.Millisecond, "restart", func() { w.Restart(victim) })
		}
		out := w.Run(10*time.Second, 5_000_000)
		if len(grants) < 6 {
			t.Fatalf("keep %v: only %d grants (run: %v at %v, %+v)", keep, len(grants), out, w.Now(), w.Stats())
		}
		torn := 0
		for _, id := range peers {
			torn += w.Disk(id).Stats().Torn
		}
		if torn == 0 {
			t.Fatalf("keep %v: no crash tore a write; the test proves nothing", keep)
		}
		for i := 1; i < len(grants); i++ {
			if grants[i] <= grants[i-1] {
				t.Fatalf("keep %v: tokens %v do not increase", keep, grants)
			}
		}
	}
}

type observerFunc func(Event)

func (f observerFunc) Observe(e Event) { f(e) }
