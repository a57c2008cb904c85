package inject

import (
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/sim"
)

// injector is what one installed schedule keeps about its world: the faults
// that are on, so that one ending restores what was there before it unless
// a later one is still on, and a reset ends them all.
type injector struct {
	w       *sim.World
	resolve Resolver
	cov     *Coverage // nil: no marks counted

	net   stack[sim.NetworkConfig]
	drift []stack[int64]         // by node id
	jumps []stack[time.Duration] // by node id; only which jumps are on matters
	disk  []stack[time.Duration] // by node id: sync delays
}

// apply carries op out, skipping an operation that fails Check: a
// malformed schedule never reaches the simulator's own assertions.
func (x *injector) apply(op nemesis.Op) {
	apply := appliers[op.Kind]
	if apply == nil || op.Check() != nil {
		return
	}
	apply(x, op)
	switch op.Kind {
	case nemesis.Isolate, nemesis.Partition, nemesis.Block:
		x.cov.network(x.w)
	}
}

// node resolves op's node now.
func (x *injector) node(name string) (sim.NodeID, bool) {
	id, ok := x.resolve(name)
	if !ok || id < 0 || int(id) >= x.w.Nodes() {
		return 0, false
	}
	return id, true
}

// until runs undo when op's duration has passed, if it has one; a fault
// without a duration stays on until a reset.
func (x *injector) until(op nemesis.Op, undo func()) {
	if op.Duration > 0 {
		x.w.At(x.w.Now()+time.Duration(op.Duration), "fault end "+op.String(), undo)
	}
}

// stack is a setting changed by faults that overlap in time. Each fault on
// is a layer applied over the value the setting had before the first of
// them (the base); when one ends, the value is recomputed from the base and
// the layers still on, in the order they started.
type stack[T any] struct {
	base   T
	layers []layer[T]
	next   uint64
}

type layer[T any] struct {
	id  uint64
	set func(T) T
}

// push starts a layer over cur, the setting's value now, and returns its id
// and the new value.
func (s *stack[T]) push(cur T, set func(T) T) (uint64, T) {
	if len(s.layers) == 0 {
		s.base = cur
	}
	s.next++
	s.layers = append(s.layers, layer[T]{s.next, set})
	return s.next, s.value()
}

// pop ends layer id and returns the new value; ok is false if the layer had
// already ended (a reset ended it), in which case nothing is to be done.
func (s *stack[T]) pop(id uint64) (v T, ok bool) {
	for i, l := range s.layers {
		if l.id == id {
			s.layers = append(s.layers[:i], s.layers[i+1:]...)
			return s.value(), true
		}
	}
	return v, false
}

// reset ends every layer and returns the base; ok is false if none was on.
func (s *stack[T]) reset() (base T, ok bool) {
	if len(s.layers) == 0 {
		return base, false
	}
	s.layers = nil
	return s.base, true
}

func (s *stack[T]) value() T {
	v := s.base
	for _, l := range s.layers {
		v = l.set(v)
	}
	return v
}

// nodeStack returns node id's stack in a per-node table, growing it.
func nodeStack[T any](table *[]stack[T], id sim.NodeID) *stack[T] {
	for len(*table) <= int(id) {
		*table = append(*table, stack[T]{})
	}
	return &(*table)[id]
}
