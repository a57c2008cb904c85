// Partitions: links that drop every message, as a failed switch, a
// misconfigured firewall or a saturated uplink would.
//
// Inside the fault model: any set of blocked directed links, changed at any
// instant — a node cut off both ways (isolate, aimed at the leader with the
// Leader selector), the world split in two (partition: a group against
// everyone else, drawn at generation time and written out by name), and a
// single link blocked one way (block), which leaves a node able to send but
// not to hear, or the reverse. Messages already in flight on a link when it
// is blocked are dropped when they arrive. Heal reopens every link at once.
//
// Outside the fault model: partial partitions that are not a union of
// blocked directed links (a link that drops only some message types), and
// healing one partition while keeping another: heal is global, so the
// generator keeps at most one partition on at a time.
package nemesis

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Partition shapes the generator can draw (Options.PartitionShapes).
const (
	ShapeHalves  = "halves"  // a Partition: the nodes shuffled and split in two
	ShapeIsolate = "isolate" // an Isolate of a target
	ShapeBlock   = "block"   // a one-way Block from a target to another node
)

var shapes = []string{ShapeHalves, ShapeIsolate, ShapeBlock}

var isolateSpec = kindSpec{
	kind: Isolate,
	// A Duration reopens the node's links that long later, both ways,
	// whatever blocked them.
	fields: fNode | fDuration | fTrigger,
	check:  func(Op) error { return nil },
}

var partitionSpec = kindSpec{
	kind:   Partition,
	fields: fGroup,
	check: func(op Op) error {
		if len(op.Group) == 0 {
			return errors.New("group is empty: name the nodes on one side, e.g. [\"n1\", \"n2\"]")
		}
		for i, n := range op.Group {
			if n == "" {
				return fmt.Errorf("group entry %d is empty", i)
			}
			if slices.Index(op.Group, n) != i {
				return fmt.Errorf("group names %q twice", n)
			}
		}
		return nil
	},
}

var blockSpec = kindSpec{
	kind:   Block,
	fields: fNode | fTo,
	check: func(op Op) error {
		if op.To == "" {
			return errors.New("block needs to: the node that stops hearing from node")
		}
		if op.To == op.Node {
			return fmt.Errorf("block from %q to itself: name two different nodes", op.Node)
		}
		return nil
	},
}

var healSpec = kindSpec{
	kind:   Heal,
	fields: 0,
	check:  func(Op) error { return nil },
}

// partition draws one partition of a shape among the enabled ones, healed
// d later.
func (g *generator) partition(at, d time.Duration) {
	if len(g.o.PartitionShapes) == 0 {
		return
	}
	op := Op{At: Duration(at)}
	switch g.o.PartitionShapes[g.r.IntN(len(g.o.PartitionShapes))] {
	case ShapeHalves:
		nodes := g.c.Nodes()
		if len(nodes) < 2 {
			return
		}
		g.r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		side := nodes[:len(nodes)/2]
		// Written in the cluster's order, so that schedules read easily.
		op.Kind, op.Group = Partition, slices.DeleteFunc(g.c.Nodes(), func(n string) bool { return !slices.Contains(side, n) })
	case ShapeIsolate:
		node, ok := g.target(g.o.Partition.Targets)
		if !ok {
			return
		}
		op.Kind, op.Node = Isolate, node
	case ShapeBlock:
		node, ok := g.target(g.o.Partition.Targets)
		if !ok {
			return
		}
		others := slices.DeleteFunc(g.c.Nodes(), func(n string) bool { return n == node })
		if len(others) == 0 {
			return
		}
		op.Kind, op.Node, op.To = Block, node, others[g.r.IntN(len(others))]
	default:
		return
	}
	g.add(op)
	g.add(Op{At: Duration(at + d), Kind: Heal})
}
