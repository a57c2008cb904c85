// Slow disks: a node's fsync takes a long time — a saturated device, a
// noisy neighbour, a degraded RAID array.
//
// Inside the fault model: a sync latency of any length on any node, for a
// while. Every Sync the node's process makes stalls the node for that long:
// it runs nothing meanwhile (what falls due is held, as in a pause) and
// whatever it sends after the Sync, in the same step, leaves only when the
// stall ends. So a replica's vote, a store's acknowledgement or a grant can
// be late by any amount, while the node's clock keeps running.
//
// Outside the fault model: slow reads and writes (only Sync is slow), a
// Sync that fails or lies, and the process seeing the stall in its own
// clock within the step that synced (its readings and timers in that step
// still see the instant of the Sync; the next step sees the time the stall
// took). Data loss is a crash (crash.go).
package nemesis

import (
	"fmt"
	"time"
)

var slowDiskSpec = kindSpec{
	kind:   SlowDisk,
	fields: fNode | fDelay | fDuration,
	check: func(op Op) error {
		if op.Delay < 0 {
			return fmt.Errorf("delay %v is negative: give the sync latency, e.g. \"50ms\" (or leave it out for a fast disk)", time.Duration(op.Delay))
		}
		return nil
	},
}

// slowDisk draws a sync latency of up to SyncDelayMax on a target, for d.
// A stall that begins just before the fault ends lasts the delay, so both
// are cut to end within the safety phase.
func (g *generator) slowDisk(at, d time.Duration) {
	node, ok := g.target(g.o.SlowDisk.Targets)
	if !ok {
		return
	}
	delay := spread(g.r, time.Millisecond, time.Duration(g.o.SyncDelayMax))
	room := g.end - at
	delay = min(delay, room/2)
	d = min(d, room-delay)
	if delay <= 0 || d <= 0 {
		return
	}
	g.add(Op{At: Duration(at), Kind: SlowDisk, Node: node, Delay: Duration(delay), Duration: Duration(d)})
}
