package sim

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
)

// popAll drains q and returns the id of every event in pop order.
func popAll(q *queue) []uint64 {
	var ids []uint64
	for {
		e, ok := q.pop()
		if !ok {
			return ids
		}
		ids = append(ids, e.id)
	}
}

func TestQueueOrdersByTimeThenPushOrder(t *testing.T) {
	tests := []struct {
		name string
		at   []time.Duration // pushed in this order; event i gets id i
		want []uint64        // ids in pop order
	}{
		{"empty", nil, nil},
		{"one", []time.Duration{5}, []uint64{0}},
		{"ascending", []time.Duration{1, 2, 3}, []uint64{0, 1, 2}},
		{"descending", []time.Duration{3, 2, 1}, []uint64{2, 1, 0}},
		{"all equal are FIFO", []time.Duration{7, 7, 7, 7, 7}, []uint64{0, 1, 2, 3, 4}},
		{"ties among others", []time.Duration{5, 1, 5, 3, 1, 5, 3}, []uint64{1, 4, 3, 6, 0, 2, 5}},
		{"zero and negative times", []time.Duration{0, -1, 0, -1}, []uint64{1, 3, 0, 2}},
		{"tie after a deep heap", []time.Duration{9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 1}, []uint64{8, 10, 7, 6, 5, 4, 3, 2, 1, 0, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q queue
			for i, at := range tt.at {
				q.push(event{at: at, id: uint64(i)})
			}
			if got := q.len(); got != len(tt.at) {
				t.Fatalf("len: got %d, want %d", got, len(tt.at))
			}
			if got := popAll(&q); !slices.Equal(got, tt.want) {
				t.Errorf("pop order: got %v, want %v", got, tt.want)
			}
			if got := q.len(); got != 0 {
				t.Errorf("len after draining: got %d, want 0", got)
			}
		})
	}
}

func TestQueueEmpty(t *testing.T) {
	var q queue
	if e, ok := q.pop(); ok {
		t.Errorf("pop on empty queue: got %+v, true; want false", e)
	}
	if at, ok := q.peekAt(); ok {
		t.Errorf("peekAt on empty queue: got %v, true; want false", at)
	}
	q.push(event{at: 3})
	q.pop()
	if _, ok := q.pop(); ok {
		t.Errorf("pop after draining: got true, want false")
	}
}

// TestQueueMatchesStableSortOracle interleaves random pushes and pops and
// checks every pop against a stable sort of what is pending: a stable sort by
// time keeps equal times in push order, which is exactly the FIFO the queue
// promises.
func TestQueueMatchesStableSortOracle(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
		var q queue
		var oracle []event // pending, in push order
		var nextID uint64
		var now time.Duration
		for op := 0; op < 5000; op++ {
			if rng.IntN(100) < 55 || len(oracle) == 0 {
				// Times are drawn from a small window ahead of the last
				// popped time so that ties are frequent.
				e := event{at: now + time.Duration(rng.IntN(8)), id: nextID}
				nextID++
				q.push(e)
				oracle = append(oracle, e)
				continue
			}
			sort.SliceStable(oracle, func(i, j int) bool { return oracle[i].at < oracle[j].at })
			want := oracle[0]
			oracle = oracle[1:]
			if at, ok := q.peekAt(); !ok || at != want.at {
				t.Fatalf("seed %d op %d: peekAt got %v, %v; want %v, true", seed, op, at, ok, want.at)
			}
			got, ok := q.pop()
			if !ok || got.id != want.id || got.at != want.at {
				t.Fatalf("seed %d op %d: pop got id %d at %v (ok=%v), want id %d at %v", seed, op, got.id, got.at, ok, want.id, want.at)
			}
			now = got.at
			if q.len() != len(oracle) {
				t.Fatalf("seed %d op %d: len got %d, want %d", seed, op, q.len(), len(oracle))
			}
		}
		// Drain the rest.
		sort.SliceStable(oracle, func(i, j int) bool { return oracle[i].at < oracle[j].at })
		var want []uint64
		for _, e := range oracle {
			want = append(want, e.id)
		}
		if got := popAll(&q); !slices.Equal(got, want) {
			t.Fatalf("seed %d: drain order got %v, want %v", seed, got, want)
		}
	}
}

// TestQueuePopReleasesReferences checks that a popped slot no longer holds
// the message and callback, so the GC can reclaim them.
func TestQueuePopReleasesReferences(t *testing.T) {
	var q queue
	for i := range 8 {
		q.push(event{at: time.Duration(i), msg: testMsg{N: uint64(i)}, fn: func() {}})
	}
	for range 8 {
		e, _ := q.pop()
		if e.msg == nil || e.fn == nil {
			t.Fatalf("popped event lost its payload: %+v", e)
		}
	}
	for i, e := range q.slab[:cap(q.slab)] {
		if e.msg != nil || e.fn != nil {
			t.Errorf("slot %d still references msg %v / fn after pop", i, e.msg)
		}
	}
}

func TestQueueSteadyStateAllocatesNothing(t *testing.T) {
	for _, n := range []int{1, 100, 10_000} {
		var q queue
		msg := Message(testMsg{N: 1, Body: "x"})
		fn := func() {}
		for i := range n {
			q.push(event{at: time.Duration(i % 97), msg: msg, fn: fn})
		}
		step := func() {
			e, _ := q.pop()
			e.at += 97
			q.push(e)
		}
		for range 2 * n { // warm-up: every slot has been used
			step()
		}
		if got := testing.AllocsPerRun(1000, step); got != 0 {
			t.Errorf("%d pending: got %v allocs per pop+push, want 0", n, got)
		}
		if q.len() != n {
			t.Errorf("%d pending: len got %d, want %d", n, q.len(), n)
		}
	}
}

// TestQueueHeapHoldsNoPointers pins the queue's layout: the heap sifts keys
// without pointers (no write barrier per move while the collector runs),
// and the events wait in slots that are reused, so the slab grows to the
// peak of pending events and no further.
func TestQueueHeapHoldsNoPointers(t *testing.T) {
	if hasPointers(reflect.TypeFor[queueKey]()) {
		t.Errorf("queueKey holds pointers: every heap move would cost write barriers")
	}
	var q queue
	for i := range 50 {
		q.push(event{at: time.Duration(i), msg: testMsg{N: 1}})
	}
	for i := range 10_000 {
		e, _ := q.pop()
		e.at += time.Duration(50 + i%7)
		q.push(e)
	}
	if len(q.slab) != 50 || len(q.free) != 0 {
		t.Errorf("slab %d slots, %d free after steady churn of 50 pending; want 50 and 0", len(q.slab), len(q.free))
	}
}

// hasPointers reports whether a value of t holds a pointer the GC scans.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.String, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
