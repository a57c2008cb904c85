// Package nemesis is the fault vocabulary both worlds share: fault kinds,
// operations and schedules, roles, triggers and the swarm generator. A
// fault schedule is data: a list of timed operations that can be written
// to JSON, read back, replayed exactly and shrunk. Schedules are written
// by hand (scenarios) or drawn from a seed (Generate, the swarm
// generator). The package holds no world: a Nemesis carries operations
// out — the simulator's (package nemesis/inject, which installs a schedule
// into a sim.World) and the live runner's (package live), each with a
// test that it accounts for every kind (Uncovered).
//
// Every fault kind lives in its own file, which opens by saying what is
// inside and what is outside the fault model:
//
//	pause.go      process pauses (GC, stop-the-world)
//	crash.go      crashes (unsynced writes lost or torn) and restarts
//	partition.go  isolation, random halves, one-way blocks, heals
//	network.go    message loss, duplication, delay spikes, reordering
//	clock.go      clock drift and wall-clock jumps
//	disk.go       slow disks (sync latency)
//	trigger.go    triggers: faults aimed at protocol moments, and the
//	              aimed faults the swarm draws
//
// A fault names its node by name or by role (role.go: @replica:N, @store,
// @client:NAME, and the selectors @leader and @crashed), so one schedule
// serves every design that has the role.
//
// The package is deterministic: no goroutines, no clocks of the machine, no
// global randomness, no map order reaching behaviour. Every random draw
// comes from a *rand.Rand the caller passes in.
package nemesis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind names a fault operation.
type Kind string

// The fault kinds. Each is documented, validated and applied in its own
// file.
const (
	// Pause stops Node for Duration (pause.go).
	Pause Kind = "pause"
	// Crash kills Node; it loses memory, timers and unsynced writes, or
	// tears the last unsynced write with Mode "torn" (crash.go).
	Crash Kind = "crash"
	// Restart boots a crashed Node from its disk (crash.go).
	Restart Kind = "restart"
	// Isolate blocks every link to and from Node, both ways (partition.go).
	Isolate Kind = "isolate"
	// Partition splits the world in two: Group on one side, every other
	// node on the other (partition.go).
	Partition Kind = "partition"
	// Block drops every message from Node to To, one way (partition.go).
	Block Kind = "block"
	// Heal reopens every link (partition.go).
	Heal Kind = "heal"
	// Loss drops each message with Probability, for Duration (network.go).
	Loss Kind = "loss"
	// Duplicate delivers each message twice with Probability, for Duration
	// (network.go).
	Duplicate Kind = "duplicate"
	// Delay raises message latency to Max Delay and mean Mean, for Duration
	// (network.go).
	Delay Kind = "delay"
	// Reorder holds each message back by up to Delay with Probability, for
	// Duration (network.go).
	Reorder Kind = "reorder"
	// NetworkReset ends every network fault at once (network.go).
	NetworkReset Kind = "network-reset"
	// Drift sets Node's clock rate error to PPM, for Duration (clock.go).
	Drift Kind = "drift"
	// Jump steps Node's wall clock by By, and back after Duration (clock.go).
	Jump Kind = "jump"
	// ClockReset sets Node's drift to 0 and its wall offset back to 0
	// (clock.go).
	ClockReset Kind = "clock-reset"
	// SlowDisk gives Node a sync latency of Delay, for Duration (disk.go).
	SlowDisk Kind = "slow-disk"
)

// Leader is a node selector resolved when the fault fires: the replica that
// leads at that instant (the fault is skipped if none does). Schedules can
// so aim at the leader without knowing the seed's election.
const Leader = "@leader"

// Crashed is a selector for Restart only: every node crashed at that instant.
const Crashed = "@crashed"

// Op is one fault at a true time. Which fields a kind takes is listed with
// the kind; a field a kind does not take must be left out.
type Op struct {
	At   Duration `json:"at"`
	Kind Kind     `json:"kind"`
	Node string   `json:"node,omitempty"`
	// Duration is how long a Pause lasts, and how long a network, clock or
	// disk fault stays on before it is undone (0: until a reset).
	Duration Duration `json:"duration,omitempty"`
	// To is the receiving end of a Block.
	To string `json:"to,omitempty"`
	// Group is one side of a Partition.
	Group []string `json:"group,omitempty"`
	// Mode is how a Crash treats unsynced writes: "lose" (the default) or
	// "torn".
	Mode string `json:"mode,omitempty"`
	// Keep is, for a torn Crash, the fraction of the last unsynced write's
	// bytes that survive, in [0, 1).
	Keep float64 `json:"keep,omitempty"`
	// Probability is the per-message chance of a Loss, Duplicate or Reorder.
	Probability float64 `json:"probability,omitempty"`
	// Delay is the latency maximum of a Delay spike, the longest extra hold
	// of a Reorder, or the sync latency of a SlowDisk.
	Delay Duration `json:"delay,omitempty"`
	// Mean is the latency mean of a Delay spike.
	Mean Duration `json:"mean,omitempty"`
	// PPM is the clock rate error of a Drift, in parts per million.
	PPM int64 `json:"ppm,omitempty"`
	// By is the wall-clock step of a Jump; negative steps back.
	By Duration `json:"by,omitempty"`
	// When arms the fault as a trigger (trigger.go): it fires not at At
	// but at the first moment of this kind the run reports in the window
	// [At, At+Within], After later, aimed at the moment's subject if Node
	// is Subject. A trigger whose moment never comes does nothing.
	When MomentKind `json:"when,omitempty"`
	// Within is how long after At a trigger stays armed.
	Within Duration `json:"within,omitempty"`
	// After is how long after its moment a trigger fires.
	After Duration `json:"after,omitempty"`
}

// Schedule is a list of fault operations. Install fires them in time order
// (stable, so operations at one instant keep their written order); Generate
// and HealAll return them sorted.
type Schedule []Op

// field is one optional field of Op, as a bit of a set.
type field uint16

const (
	fNode field = 1 << iota
	fDuration
	fTo
	fGroup
	fMode
	fKeep
	fProbability
	fDelay
	fMean
	fPPM
	fBy
	fWhen
	fWithin
	fAfter
)

// fTrigger are the fields of a trigger, which the kinds that can be aimed
// at a moment take (trigger.go).
const fTrigger = fWhen | fWithin | fAfter

var fieldNames = []string{"node", "duration", "to", "group", "mode", "keep", "probability", "delay", "mean", "ppm", "by", "when", "within", "after"}

func (f field) String() string {
	var names []string
	for i, n := range fieldNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}

// set returns the optional fields op gives.
func (op Op) set() field {
	var f field
	for _, x := range []struct {
		on  bool
		bit field
	}{
		{op.Node != "", fNode}, {op.Duration != 0, fDuration}, {op.To != "", fTo},
		{op.Group != nil, fGroup}, {op.Mode != "", fMode}, {op.Keep != 0, fKeep},
		{op.Probability != 0, fProbability}, {op.Delay != 0, fDelay}, {op.Mean != 0, fMean},
		{op.PPM != 0, fPPM}, {op.By != 0, fBy},
		{op.When != "", fWhen}, {op.Within != 0, fWithin}, {op.After != 0, fAfter},
	} {
		if x.on {
			f |= x.bit
		}
	}
	return f
}

// kindSpec is what the package knows about one kind: the fields it takes,
// how to check their values, and how to carry it out. The specs live in the
// kinds' own files.
type kindSpec struct {
	kind Kind
	// fields the kind may take; node, if taken, is required.
	fields field
	// check reports what is wrong with op's values (node names aside).
	check func(op Op) error
}

// specs lists every kind, in the order of the documentation.
var specs = []kindSpec{
	pauseSpec, crashSpec, restartSpec,
	isolateSpec, partitionSpec, blockSpec, healSpec,
	lossSpec, duplicateSpec, delaySpec, reorderSpec, networkResetSpec,
	driftSpec, jumpSpec, clockResetSpec,
	slowDiskSpec,
}

// Kinds returns every fault kind, in a fixed order.
func Kinds() []Kind {
	out := make([]Kind, len(specs))
	for i, s := range specs {
		out[i] = s.kind
	}
	return out
}

func specOf(k Kind) (kindSpec, bool) {
	for _, s := range specs {
		if s.kind == k {
			return s, true
		}
	}
	return kindSpec{}, false
}

// Check reports the first operation whose shape or values are wrong: a
// negative time or duration, an unknown kind, a field the kind does not
// take, a missing node, a value out of range. Node names are not checked
// (Validate does that against the run's nodes).
func (s Schedule) Check() error {
	for i, op := range s {
		if err := op.check(); err != nil {
			return fmt.Errorf("nemesis: fault %d (%s): %v", i, op.label(), err)
		}
	}
	return nil
}

// Validate is Check, plus every node name an operation uses must be one of
// nodes (selectors such as Leader are valid where the caller lists them;
// Crashed is valid in a Restart only). A schedule that aims at fixed roles
// (@replica:N, @store, @client:NAME) is validated against its cluster with
// ValidateFor.
func (s Schedule) Validate(nodes []string) error {
	if err := s.Check(); err != nil {
		return err
	}
	for i, op := range s {
		if err := op.checkNames(nodes); err != nil {
			return fmt.Errorf("nemesis: fault %d (%s): %v", i, op.label(), err)
		}
	}
	return nil
}

func (op Op) check() error {
	if op.At < 0 {
		return fmt.Errorf("time %v is negative", time.Duration(op.At))
	}
	spec, ok := specOf(op.Kind)
	if !ok {
		return fmt.Errorf("unknown kind %q (known: %v)", op.Kind, Kinds())
	}
	if extra := op.set() &^ spec.fields; extra != 0 {
		return fmt.Errorf("%s does not apply to %s (it takes: %v)", extra, op.Kind, spec.fields)
	}
	if spec.fields&fNode != 0 && op.Node == "" {
		return fmt.Errorf("%s needs a node", op.Kind)
	}
	if op.Duration < 0 {
		return fmt.Errorf("duration %v is negative", time.Duration(op.Duration))
	}
	if op.At > math.MaxInt64-op.Duration {
		return fmt.Errorf("at + duration overflows: end the fault sooner")
	}
	if err := op.checkTrigger(); err != nil {
		return err
	}
	return spec.check(op)
}

func (op Op) checkNames(nodes []string) error {
	names := []string{op.Node, op.To}
	names = append(names, op.Group...)
	for _, n := range names {
		switch {
		case n == "":
		case n == Subject:
			if op.When == "" || n != op.Node {
				return fmt.Errorf("selector %s only works as the node of a trigger (a fault with when)", Subject)
			}
		case n == Crashed:
			if op.Kind != Restart || n != op.Node {
				return fmt.Errorf("selector %s only works as the node of a restart", Crashed)
			}
		case !slices.Contains(nodes, n):
			return fmt.Errorf("unknown node %q (nodes: %v; a role such as %s or %s aims at whatever node a design gives it)", n, nodes, Replica(1), StoreNode)
		}
	}
	if op.Kind == Partition && len(nodes) > 0 {
		rest := slices.ContainsFunc(nodes, func(n string) bool {
			return !strings.HasPrefix(n, "@") && !slices.Contains(op.Group, n)
		})
		if !rest {
			return fmt.Errorf("group %v holds every node: leave at least one on the other side", op.Group)
		}
	}
	return nil
}

// label names op briefly in error messages.
func (op Op) label() string {
	if op.Node != "" {
		return string(op.Kind) + " " + op.Node
	}
	return string(op.Kind)
}

// Sorted returns a copy of s sorted by time, stably.
func (s Schedule) Sorted() Schedule {
	ops := slices.Clone(s)
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.At, b.At) })
	return ops
}

// String renders op on one line, the way traces name it: "pause a for 3s",
// "block n1 -> n2", "loss p=0.2 for 1s".
func (op Op) String() string {
	s := string(op.Kind)
	if op.Node != "" {
		s += " " + op.Node
	}
	if op.To != "" {
		s += " -> " + op.To
	}
	if op.Group != nil {
		s += " [" + strings.Join(op.Group, " ") + "] | rest"
	}
	if op.Mode != "" {
		s += " " + op.Mode
	}
	if op.Keep != 0 {
		s += " keep=" + strconv.FormatFloat(op.Keep, 'g', -1, 64)
	}
	if op.Probability != 0 {
		s += " p=" + strconv.FormatFloat(op.Probability, 'g', -1, 64)
	}
	if op.Delay != 0 {
		s += " delay=" + time.Duration(op.Delay).String()
	}
	if op.Mean != 0 {
		s += " mean=" + time.Duration(op.Mean).String()
	}
	if op.PPM != 0 {
		s += fmt.Sprintf(" %+dppm", op.PPM)
	}
	if op.By != 0 {
		s += " by " + time.Duration(op.By).String()
	}
	if op.Duration > 0 {
		s += " for " + time.Duration(op.Duration).String()
	}
	if op.When != "" {
		s += " when " + string(op.When) + " within " + time.Duration(op.Within).String()
	}
	if op.After > 0 {
		s += " after " + time.Duration(op.After).String()
	}
	return s
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1.5s"), so schedules stay readable and editable by hand.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"250ms\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q: %v", s, err)
	}
	*d = Duration(v)
	return nil
}
