package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Cluster names the nodes a generated schedule may aim at, and the timing
// the faults scale to.
type Cluster struct {
	Servers, Clients, Store []string
	// LeaderSelector allows the Leader selector (a replicated design).
	LeaderSelector bool
	// TTL is the clients' lease TTL: pauses, crashes and partitions are
	// drawn from short to far past it.
	TTL time.Duration
	// DriftBoundPPM is the drift bound the clients assume.
	DriftBoundPPM int64
}

// Nodes returns every node name, in the order the runner adds the nodes:
// servers, store, clients.
func (c Cluster) Nodes() []string {
	out := slices.Concat(c.Servers, c.Store, c.Clients)
	return slices.Clip(out)
}

// Names returns what a schedule for c may name: every node, and Leader if
// the cluster has one. Validate a schedule against it.
func (c Cluster) Names() []string {
	names := c.Nodes()
	if c.LeaderSelector {
		names = append(names, Leader)
	}
	return names
}

// roles returns the roles c has nodes for, in a fixed order.
func (c Cluster) roles() []string {
	var out []string
	for _, r := range []struct {
		role string
		has  bool
	}{{RoleServers, len(c.Servers) > 0}, {RoleStore, len(c.Store) > 0}, {RoleClients, len(c.Clients) > 0}, {RoleLeader, c.LeaderSelector}} {
		if r.has {
			out = append(out, r.role)
		}
	}
	return out
}

// Validate reports what is wrong with c, saying how to fix it.
func (c Cluster) Validate() error {
	nodes := c.Nodes()
	if len(nodes) == 0 {
		return errors.New("nemesis: cluster has no nodes")
	}
	for i, n := range nodes {
		if n == "" || strings.HasPrefix(n, "@") {
			return fmt.Errorf("nemesis: cluster node %d: name %q is empty or looks like a selector", i, n)
		}
		if slices.Index(nodes, n) != i {
			return fmt.Errorf("nemesis: cluster names node %q twice", n)
		}
	}
	if c.TTL < 0 {
		return fmt.Errorf("nemesis: cluster TTL %v is negative", c.TTL)
	}
	if c.DriftBoundPPM < 0 || c.DriftBoundPPM >= ppmLimit {
		return fmt.Errorf("nemesis: cluster drift bound %d ppm must lie in [0, 1000000)", c.DriftBoundPPM)
	}
	return nil
}

// generator draws one schedule.
type generator struct {
	r   *rand.Rand
	o   Options
	c   Cluster
	end time.Duration // the end of the safety phase
	ops Schedule
	// sharp makes aimed draw each aim's sharpest variant, the one that
	// tells its story most often (StoryStrikes): a pause just past the
	// lease, a forward jump on the leader, a crash at a vote on a slow
	// disk with the winner cut off.
	sharp bool
}

func (g *generator) add(op Op) { g.ops = append(g.ops, op) }

// target draws a node among those of the roles, in the cluster's order:
// servers, store, clients, then Leader.
func (g *generator) target(targets []string) (string, bool) {
	var pool []string
	if slices.Contains(targets, RoleServers) {
		pool = append(pool, g.c.Servers...)
	}
	if slices.Contains(targets, RoleStore) {
		pool = append(pool, g.c.Store...)
	}
	if slices.Contains(targets, RoleClients) {
		pool = append(pool, g.c.Clients...)
	}
	if slices.Contains(targets, RoleLeader) && g.c.LeaderSelector {
		pool = append(pool, Leader)
	}
	if len(pool) == 0 {
		return "", false
	}
	return pool[g.r.IntN(len(pool))], true
}

// Generate draws the fault schedule of a safety phase of length safety:
// every Step, each enabled kind that is quiet (no fault of it on, and its
// stability since the last one has passed) starts a fault with its
// probability, lasting between its stability and its max. Kinds draw in a
// fixed order, so the same r, options and cluster give the same schedule.
// Every fault is undone within the phase — each crash gets a restart, each
// partition a heal, each network, clock and disk fault a duration that ends
// by safety — so the liveness phase starts clean (CheckUndone(safety)
// holds). The schedule is sorted and explicit: every random choice,
// including partition groups, is written in it by name.
//
// Options should be valid (Options.Validate); Generate never panics on bad
// ones, it draws what it can: a kind with no usable target or setting
// draws nothing, and a non-positive Step is taken as DefaultStep.
func Generate(r *rand.Rand, o Options, c Cluster, safety time.Duration) Schedule {
	g := &generator{r: r, o: o, c: c, end: safety}
	step := time.Duration(o.Step)
	if step <= 0 {
		step = time.Duration(DefaultStep)
	}
	quiet := make([]time.Duration, len(faultKinds)) // a kind may strike again from quiet[i]
	for at := time.Duration(0); at < safety; at += step {
		for i, k := range faultKinds {
			f := k.fault(&g.o)
			if !f.Enabled || at < quiet[i] || !(g.r.Float64() < f.Probability) {
				continue
			}
			stable := max(time.Duration(f.Stability), 0)
			d := min(spread(g.r, stable, time.Duration(f.Max)), safety-at)
			k.strike(g, at, d)
			quiet[i] = at + d + stable
		}
		if at > safety-step {
			break // the next step would overflow or lie past the phase
		}
	}
	return g.ops.Sorted()
}

// spread draws a duration in [lo, hi] spread over orders of magnitude: a
// doubling band [lo·2ᵏ, lo·2ᵏ⁺¹) is picked uniformly, then a point in it,
// rounded down to the millisecond (never below lo). Integer arithmetic only,
// so a seed draws the same on every platform. lo is raised to 1ms.
func spread(r *rand.Rand, lo, hi time.Duration) time.Duration {
	lo = max(lo, time.Millisecond)
	if hi <= lo {
		return lo
	}
	bands := 1
	for b := lo; b <= hi/2; b *= 2 {
		bands++
	}
	a := lo << r.IntN(bands) // ≤ hi
	b := hi
	if a <= hi/2 {
		b = 2 * a
	}
	d := a + time.Duration(r.Int64N(int64(b-a)+1))
	return max(lo, d.Truncate(time.Millisecond))
}

// HealAll returns s with operations at time at that undo every fault: heal
// every link, end every network fault, restart every crashed node, and on
// every node of c set the drift to 0, the wall offset back to 0 and the
// sync delay to 0. A pause cannot be cut short: one still on at at runs its
// course. The result is sorted; operations of s at at come first.
func (s Schedule) HealAll(at time.Duration, c Cluster) Schedule {
	a := Duration(at)
	out := slices.Clone(s)
	out = append(out, Op{At: a, Kind: Heal}, Op{At: a, Kind: NetworkReset}, Op{At: a, Kind: Restart, Node: Crashed})
	for _, n := range c.Nodes() {
		out = append(out, Op{At: a, Kind: ClockReset, Node: n}, Op{At: a, Kind: SlowDisk, Node: n})
	}
	return out.Sorted()
}

// CheckUndone reports the first fault of s that is still on at true time
// end, or that starts after it: a pause or timed fault lasting past end
// (a slow disk lasts its duration plus its delay, since a stall that began
// just before the end runs its course), a crash with no restart of its node
// (or of Crashed) by end, a partition, isolation or block with no heal, a
// network fault still on with no NetworkReset after it, a clock or disk
// fault still on with no reset of its node after it. Faults aimed at the
// Leader selector are undone only by a reset aimed at it too: which node
// led is known only when the fault fires. A trigger (trigger.go) may start
// as late as At+Within+After, so it counts from then, and only a reset at
// or after that instant undoes it. A generated safety phase must
// pass CheckUndone(safety).
func (s Schedule) CheckUndone(end time.Duration) error {
	var open []openFault
	ops := s.Sorted()
	close := func(group, node string, at Duration) {
		open = slices.DeleteFunc(open, func(o openFault) bool {
			// A trigger that may still fire after the undo is not undone by it.
			return o.group == group && (node == "*" || o.node == node) && ops[o.i].latest() <= time.Duration(at)
		})
	}
	for i, op := range ops {
		if op.latest() > end {
			return fmt.Errorf("nemesis: fault %d (%s) may start at %v, after the phase ends at %v", i, op, op.latest(), end)
		}
		f := openFault{i: i, node: op.Node}
		if op.Duration > 0 {
			f.stop = op.latest() + time.Duration(op.Duration)
		}
		switch op.Kind {
		case Pause:
			f.group = "pause"
		case Crash:
			f.group = "crash"
		case Restart:
			if op.Node == Crashed {
				close("crash", "*", op.At)
			} else {
				close("crash", op.Node, op.At)
			}
		case Isolate, Partition, Block:
			f.group = "links"
		case Heal:
			close("links", "*", op.At)
		case Loss, Duplicate, Delay, Reorder:
			f.group = "network"
		case NetworkReset:
			close("network", "*", op.At)
		case Drift:
			if op.PPM == 0 && op.Duration == 0 {
				close("drift", op.Node, op.At)
			} else {
				f.group = "drift"
			}
		case Jump:
			f.group = "jump"
		case ClockReset:
			close("drift", op.Node, op.At)
			close("jump", op.Node, op.At)
		case SlowDisk:
			if op.Delay == 0 && op.Duration == 0 {
				close("disk", op.Node, op.At)
			} else {
				f.group = "disk"
				if f.stop > 0 {
					f.stop += time.Duration(op.Delay)
				}
			}
		}
		if f.group != "" {
			open = append(open, f)
		}
	}
	for _, f := range open { // in start order
		switch {
		case f.stop == 0:
			return fmt.Errorf("nemesis: fault %d (%s) is never undone by %v", f.i, ops[f.i], end)
		case f.stop > end:
			return fmt.Errorf("nemesis: fault %d (%s) is still on at %v: it lasts until %v", f.i, ops[f.i], end, f.stop)
		}
	}
	return nil
}

// openFault is a fault CheckUndone has seen start and not yet seen undone.
type openFault struct {
	group, node string
	i           int
	stop        time.Duration // when it ends by itself; 0 = never
}
