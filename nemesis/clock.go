// Clock faults: a node's clock runs fast or slow (drift), or its wall
// reading steps (an NTP correction, an operator setting the time).
//
// Inside the fault model, for lease safety: drift within the bound the
// clients assume (Cluster.DriftBoundPPM, the ρ of the client's deadline
// TTL·(1−ρ) − margin), on any node, changed at any instant. Wall-clock
// jumps of any size, forward or back, on any node: lease timing runs on the
// monotonic clock, so a correct design never notices them.
//
// Outside the fault model for lease safety, inside it for fencing: drift
// beyond the bound. A client whose clock runs slower than assumed keeps
// believing it holds a lease the service has already expired and granted
// again — two believed holders; the fenced store must reject the stale
// holder's writes, so the checker must still pass. The generator draws
// beyond-the-bound drift only when Options.DriftPPMMax exceeds the bound.
//
// Outside the fault model entirely: monotonic clocks that go back or stop
// (fakeclock forbids it: drift stays within (−10⁶, 10⁶) ppm).
package nemesis

import (
	"errors"
	"fmt"
	"time"
)

// ppmLimit bounds drift: the clock must keep moving forward.
const ppmLimit = 1_000_000

var driftSpec = kindSpec{
	kind:   Drift,
	fields: fNode | fPPM | fDuration,
	check: func(op Op) error {
		if op.PPM <= -ppmLimit || op.PPM >= ppmLimit {
			return fmt.Errorf("ppm %d must lie strictly between -1000000 and 1000000, so the clock keeps moving forward", op.PPM)
		}
		return nil
	},
}

var jumpSpec = kindSpec{
	kind:   Jump,
	fields: fNode | fBy | fDuration | fTrigger,
	check: func(op Op) error {
		if op.By == 0 {
			return errors.New("by must be a non-zero step, e.g. \"-2s\" to set the wall clock back")
		}
		return nil
	},
}

var clockResetSpec = kindSpec{
	kind:   ClockReset,
	fields: fNode,
	check:  func(Op) error { return nil },
}

// drift draws a rate error of up to DriftPPMMax either way, on a target,
// for d.
func (g *generator) drift(at, d time.Duration) {
	most := min(g.o.DriftPPMMax, ppmLimit-1)
	if most <= 0 {
		return
	}
	node, ok := g.target(g.o.Drift.Targets)
	if !ok {
		return
	}
	ppm := 1 + g.r.Int64N(most)
	if g.r.IntN(2) == 0 {
		ppm = -ppm
	}
	g.add(Op{At: Duration(at), Kind: Drift, Node: node, PPM: ppm, Duration: Duration(d)})
}

// jump draws a wall step of up to JumpMax either way, on a target, stepped
// back d later.
func (g *generator) jump(at, d time.Duration) {
	node, ok := g.target(g.o.Jump.Targets)
	if !ok {
		return
	}
	by := spread(g.r, time.Millisecond, time.Duration(g.o.JumpMax))
	if g.r.IntN(2) == 0 {
		by = -by
	}
	g.add(Op{At: Duration(at), Kind: Jump, Node: node, By: Duration(by), Duration: Duration(d)})
}
