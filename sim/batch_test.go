package sim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
)

// batcher logs what it hears: each message, and each end of a batch.
type batcher struct{ log *[]string }

func (b batcher) Start(Env) {}
func (b batcher) Receive(_ Env, _ NodeID, m Message) {
	*b.log = append(*b.log, fmt.Sprint(m.(testMsg).N))
}
func (b batcher) EndBatch(Env) { *b.log = append(*b.log, "end") }

// TestBatchesEndWhenTheNodeMovesOn: a process.Batcher hears EndBatch once
// after the messages that reach it at one instant, and once after what a
// pause held back, released together at its resume; the events of one
// batch are never split by another node's.
func TestBatchesEndWhenTheNodeMovesOn(t *testing.T) {
	w, _ := New(Config{Seed: 1, Network: NetworkConfig{Latency: Latency{Min: time.Millisecond, Max: time.Millisecond}}})
	var log []string
	b, _ := w.AddNode("b", func() Process { return batcher{log: &log} }, fakeclock.Config{})
	var got []int
	c, _ := w.AddNode("client", func() Process { return &recorderProc{got: &got} }, fakeclock.Config{})
	send := func(n int) { w.nodes[c].proc.(*recorderProc).env.Send(b, testMsg{N: uint64(n)}) }
	w.At(0, "three at once", func() { send(1); send(2); send(3) })
	w.At(5*time.Millisecond, "one", func() { send(4) })
	w.At(10*time.Millisecond, "pause", func() { w.Pause(b, 10*time.Millisecond) })
	w.At(11*time.Millisecond, "held", func() { send(5) })
	w.At(13*time.Millisecond, "held", func() { send(6) })
	w.Run(time.Second, 1000)
	want := []string{"end", "1", "2", "3", "end", "4", "end", "5", "6", "end"} // the first end: after Start
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("batches %q, want %q", log, want)
	}
}
