package record

import (
	"bytes"

	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

func TestSealDetectsEveryTornPrefix(t *testing.T) {
	v := []byte(`{"term":7,"vote":2,"commit":41}`)
	b := Seal(v)
	got, ok := Unseal(b)
	if !ok || !bytes.Equal(got, v) {
		t.Fatalf("intact: got %q %v, want %q", got, ok, v)
	}
	for n := 0; n < len(b); n++ {
		if _, ok := Unseal(b[:n]); ok {
			t.Fatalf("a %d-byte prefix of %d unsealed", n, len(b))
		}
	}
	flipped := bytes.Clone(b)
	flipped[len(flipped)-1] ^= 1
	if _, ok := Unseal(flipped); ok {
		t.Fatal("a flipped bit unsealed")
	}
}

// slotWriter keeps a counter in a slotted record: Start loads it, and every
// tick stores counter+1, synced or not as the test says.
type slotWriter struct {
	loaded *[]uint64
	sync   *bool
	rec    Slotted
	n      uint64
}

func (p *slotWriter) Start(env sim.Env) {
	p.rec = Slotted{Key: "counter"}
	if b, ok := p.rec.Load(env.Disk()); ok {
		p.n = uint64(b[0])
	}
	*p.loaded = append(*p.loaded, p.n)
	env.Clock().AfterFunc(time.Millisecond, func() { p.bump(env) })
}

func (p *slotWriter) bump(env sim.Env) {
	p.n++
	p.rec.Store(env.Disk(), []byte{byte(p.n)})
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
