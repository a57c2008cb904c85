// Network faults: a lossy, duplicating, slow or reordering network, for a
// while.
//
// Inside the fault model: any per-message loss and duplication probability
// (a duplicate is a second copy with its own latency), latency spikes of
// any size (the latency maximum and mean raised for a duration, the
// distribution becoming exponential: most messages stay fast, a few are very
// late), and reordering (each message held back by up to a bound with a
// probability). A message may therefore arrive after the lease it concerns
// has expired, twice, or never: the lock service must stay safe under all of
// it, and fenced writes that arrive late must be rejected.
//
// Outside the fault model: corrupted or forged messages (every message
// arrives as sent or not at all), per-link rates (every fault applies to the
// whole network; one-way trouble on one link is a Block), and bandwidth
// limits. Each fault ends after its duration, restoring what the network did
// before it unless a later fault is still on; NetworkReset ends them all.
package nemesis

import (
	"errors"
	"fmt"
	"time"
)

// checkProbability accepts a per-message probability in (0, 1].
func checkProbability(op Op) error {
	if !(op.Probability > 0 && op.Probability <= 1) {
		return fmt.Errorf("probability %v must lie in (0, 1]", op.Probability)
	}
	return nil
}

var lossSpec = kindSpec{
	kind:   Loss,
	fields: fProbability | fDuration,
	check:  checkProbability,
}

var duplicateSpec = kindSpec{
	kind:   Duplicate,
	fields: fProbability | fDuration,
	check:  checkProbability,
}

var delaySpec = kindSpec{
	kind:   Delay,
	fields: fDelay | fMean | fDuration,
	check: func(op Op) error {
		if op.Delay <= 0 {
			return errors.New("delay must be positive: the latency maximum during the spike, e.g. \"500ms\"")
		}
		if op.Mean <= 0 || op.Mean > op.Delay {
			return fmt.Errorf("mean %v must lie in (0, delay %v]: the typical latency during the spike", time.Duration(op.Mean), time.Duration(op.Delay))
		}
		return nil
	},
}

var reorderSpec = kindSpec{
	kind:   Reorder,
	fields: fProbability | fDelay | fDuration,
	check: func(op Op) error {
		if op.Delay <= 0 {
			return errors.New("delay must be positive: the longest a reordered message is held back, e.g. \"20ms\"")
		}
		return checkProbability(op)
	},
}

var networkResetSpec = kindSpec{
	kind:   NetworkReset,
	fields: 0,
	check:  func(Op) error { return nil },
}

// rate draws a per-message probability in (0, most], in hundredths.
func (g *generator) rate(most float64) float64 {
	n := int(most * 100)
	if n < 1 {
		n = 1
	}
	return float64(1+g.r.IntN(min(n, 100))) / 100
}

func (g *generator) loss(at, d time.Duration) {
	g.add(Op{At: Duration(at), Kind: Loss, Probability: g.rate(g.o.LossMax), Duration: Duration(d)})
}

func (g *generator) duplicate(at, d time.Duration) {
	g.add(Op{At: Duration(at), Kind: Duplicate, Probability: g.rate(g.o.DuplicateMax), Duration: Duration(d)})
}

// delay draws a spike whose latency maximum lies between a tenth of
// DelayMax and DelayMax, with a mean of a quarter of it.
func (g *generator) delay(at, d time.Duration) {
	most := spread(g.r, time.Duration(g.o.DelayMax)/10, time.Duration(g.o.DelayMax))
	g.add(Op{At: Duration(at), Kind: Delay, Delay: Duration(most), Mean: Duration(max(most/4, time.Microsecond)), Duration: Duration(d)})
}

func (g *generator) reorder(at, d time.Duration) {
	hold := spread(g.r, time.Millisecond, time.Duration(g.o.ReorderDelayMax))
	g.add(Op{At: Duration(at), Kind: Reorder, Probability: g.rate(g.o.ReorderMax), Delay: Duration(hold), Duration: Duration(d)})
}
