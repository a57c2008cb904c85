package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Roles name the nodes a fault may hit (Fault.Targets).
const (
	RoleServers = "servers" // the lock service's nodes
	RoleStore   = "store"   // the fenced store
	RoleClients = "clients" // the lock clients
	RoleLeader  = "leader"  // the Leader selector, resolved when the fault fires
)

var roles = []string{RoleServers, RoleStore, RoleClients, RoleLeader}

// DefaultStep is the generation step DrawOptions uses.
const DefaultStep = Duration(10 * time.Millisecond)

// Fault is how often one kind of fault strikes and how long it lasts, as a
// probability paired with a stability (TigerBeetle's VOPR pairing).
type Fault struct {
	Enabled bool `json:"enabled"`
	// Probability is the chance, at each generation step while the kind is
	// quiet, that a fault of this kind starts.
	Probability float64 `json:"probability"`
	// Stability is the least time the kind stays in a state: a fault lasts
	// at least Stability, and once it is undone the kind stays quiet at
	// least Stability. For pauses it is the shortest pause.
	Stability Duration `json:"stability"`
	// Max is the longest a fault of this kind lasts (the longest pause,
	// crash downtime, partition…). A fault that would outlast the safety
	// phase is cut short at its end.
	Max Duration `json:"max"`
	// Targets are the roles whose nodes a fault of this kind may hit; only
	// faults aimed at a node take them.
	Targets []string `json:"targets,omitempty"`
}

// Options are the fault settings of a swarm run: which kinds of faults are
// on and how hard they strike. DrawOptions draws them from a seed; they are
// printed (String, or JSON) before the run and stored in its File, so every
// run can be reproduced.
type Options struct {
	// Step is the generation tick: every Step of the safety phase, each
	// quiet kind draws whether a fault starts.
	Step Duration `json:"step"`

	Pause Fault `json:"pause"`

	Crash Fault `json:"crash"`
	// TornProbability is the chance that a crash tears the last unsynced
	// write instead of losing it.
	TornProbability float64 `json:"torn_probability"`

	// Partition covers isolation, random halves and one-way blocks; its
	// Targets are the nodes isolated or blocked from.
	Partition Fault `json:"partition"`
	// PartitionShapes are the shapes drawn from (ShapeHalves,
	// ShapeIsolate, ShapeBlock).
	PartitionShapes []string `json:"partition_shapes,omitempty"`

	Loss Fault `json:"loss"`
	// LossMax is the highest per-message loss probability drawn.
	LossMax float64 `json:"loss_max"`

	Duplicate Fault `json:"duplicate"`
	// DuplicateMax is the highest per-message duplication probability drawn.
	DuplicateMax float64 `json:"duplicate_max"`

	Delay Fault `json:"delay"`
	// DelayMax is the highest latency maximum a delay spike draws.
	DelayMax Duration `json:"delay_max"`

	Reorder Fault `json:"reorder"`
	// ReorderMax is the highest per-message reorder probability drawn, and
	// ReorderDelayMax the longest hold-back.
	ReorderMax      float64  `json:"reorder_max"`
	ReorderDelayMax Duration `json:"reorder_delay_max"`

	Drift Fault `json:"drift"`
	// DriftPPMMax is the largest rate error drawn, either way. Above
	// DriftBoundPPM (the clients' assumed bound) it leaves the fault model
	// of lease safety and tests fencing alone.
	DriftPPMMax   int64 `json:"drift_ppm_max"`
	DriftBoundPPM int64 `json:"drift_bound_ppm"`

	Jump Fault `json:"jump"`
	// JumpMax is the largest wall-clock step drawn, either way.
	JumpMax Duration `json:"jump_max"`

	SlowDisk Fault `json:"slow_disk"`
	// SyncDelayMax is the longest sync latency drawn.
	SyncDelayMax Duration `json:"sync_delay_max"`

	// Aimed are faults aimed at protocol moments (trigger.go); each strike
	// draws one of Aims. Its stability spaces the strikes; their lengths
	// are the aims' own, scaled to the TTL.
	Aimed Fault `json:"aimed"`
	// Aims are the aimed faults drawn from (trigger.go lists them).
	Aims []string `json:"aims,omitempty"`
}

// faultKind is one entry of the generator's fixed order.
type faultKind struct {
	name     string
	fault    func(o *Options) *Fault
	targeted bool
	strike   func(g *generator, at, d time.Duration)
}

// faultKinds is the order in which options are drawn, printed and checked,
// and in which the generator draws at each step. Changing it changes every
// seed's schedule.
var faultKinds = []faultKind{
	{"pause", func(o *Options) *Fault { return &o.Pause }, true, (*generator).pause},
	{"crash", func(o *Options) *Fault { return &o.Crash }, true, (*generator).crash},
	{"partition", func(o *Options) *Fault { return &o.Partition }, true, (*generator).partition},
	{"loss", func(o *Options) *Fault { return &o.Loss }, false, (*generator).loss},
	{"duplicate", func(o *Options) *Fault { return &o.Duplicate }, false, (*generator).duplicate},
	{"delay", func(o *Options) *Fault { return &o.Delay }, false, (*generator).delay},
	{"reorder", func(o *Options) *Fault { return &o.Reorder }, false, (*generator).reorder},
	{"drift", func(o *Options) *Fault { return &o.Drift }, true, (*generator).drift},
	{"jump", func(o *Options) *Fault { return &o.Jump }, true, (*generator).jump},
	{"slow-disk", func(o *Options) *Fault { return &o.SlowDisk }, true, (*generator).slowDisk},
	{"aimed", func(o *Options) *Fault { return &o.Aimed }, false, (*generator).aimed},
}

// Validate reports the first setting that cannot work, saying how to fix
// it. Zero Options (every kind off) are valid: they generate nothing.
func (o Options) Validate() error {
	enabled := false
	for _, k := range faultKinds {
		f := k.fault(&o)
		if err := f.validate(k.targeted); err != nil {
			return fmt.Errorf("nemesis: options: %s: %v", k.name, err)
		}
		enabled = enabled || f.Enabled
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("nemesis: options: "+format, args...)
	}
	unit := func(p float64) bool { return p > 0 && p <= 1 }
	switch {
	case enabled && o.Step <= 0:
		return fail("step must be positive, e.g. \"10ms\"")
	case !(o.TornProbability >= 0 && o.TornProbability <= 1):
		return fail("torn_probability %v must lie in [0, 1]", o.TornProbability)
	case o.Partition.Enabled && len(o.PartitionShapes) == 0:
		return fail("partition is on but partition_shapes is empty (use some of %v)", shapes)
	case o.Loss.Enabled && !unit(o.LossMax):
		return fail("loss_max %v must lie in (0, 1]", o.LossMax)
	case o.Duplicate.Enabled && !unit(o.DuplicateMax):
		return fail("duplicate_max %v must lie in (0, 1]", o.DuplicateMax)
	case o.Delay.Enabled && o.DelayMax < Duration(time.Millisecond):
		return fail("delay_max %v must be at least 1ms", time.Duration(o.DelayMax))
	case o.Reorder.Enabled && (!unit(o.ReorderMax) || o.ReorderDelayMax < Duration(time.Millisecond)):
		return fail("reorder needs reorder_max in (0, 1] and reorder_delay_max of at least 1ms")
	case o.Drift.Enabled && (o.DriftPPMMax <= 0 || o.DriftPPMMax >= ppmLimit):
		return fail("drift_ppm_max %d must lie in [1, 1000000)", o.DriftPPMMax)
	case o.DriftBoundPPM < 0 || o.DriftBoundPPM >= ppmLimit:
		return fail("drift_bound_ppm %d must lie in [0, 1000000)", o.DriftBoundPPM)
	case o.Jump.Enabled && o.JumpMax < Duration(time.Millisecond):
		return fail("jump_max %v must be at least 1ms", time.Duration(o.JumpMax))
	case o.SlowDisk.Enabled && o.SyncDelayMax < Duration(time.Millisecond):
		return fail("sync_delay_max %v must be at least 1ms", time.Duration(o.SyncDelayMax))
	case o.Aimed.Enabled && len(o.Aims) == 0:
		return fail("aimed is on but aims is empty (use some of %v)", aims)
	}
	for _, a := range o.Aims {
		if !slices.Contains(aims, a) {
			return fail("unknown aim %q (known: %v)", a, aims)
		}
	}
	for _, s := range o.PartitionShapes {
		if !slices.Contains(shapes, s) {
			return fail("unknown partition shape %q (known: %v)", s, shapes)
		}
	}
	return nil
}

func (f *Fault) validate(targeted bool) error {
	for i, t := range f.Targets {
		if !slices.Contains(roles, t) {
			return fmt.Errorf("unknown target %q (known: %v)", t, roles)
		}
		if slices.Index(f.Targets, t) != i {
			return fmt.Errorf("target %q is listed twice", t)
		}
	}
	if !targeted && len(f.Targets) > 0 {
		return errors.New("targets do not apply: the fault hits the whole network")
	}
	if !f.Enabled {
		return nil
	}
	switch {
	case !(f.Probability > 0 && f.Probability <= 1):
		return fmt.Errorf("probability %v must lie in (0, 1]", f.Probability)
	case f.Stability <= 0:
		return errors.New("stability must be positive: the shortest fault, e.g. \"10ms\"")
	case f.Max < f.Stability:
		return fmt.Errorf("max %v is below stability %v", time.Duration(f.Max), time.Duration(f.Stability))
	case targeted && len(f.Targets) == 0:
		return fmt.Errorf("targets is empty: name some of %v", roles)
	}
	return nil
}

// String prints the options, one fault kind per line, for the run's log.
func (o Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %v", time.Duration(o.Step))
	for _, k := range faultKinds {
		f := k.fault(&o)
		fmt.Fprintf(&b, "\n%-10s", k.name)
		if !f.Enabled {
			b.WriteString(" off")
			continue
		}
		fmt.Fprintf(&b, " p=%.4f/step lasts %v..%v", f.Probability, time.Duration(f.Stability), time.Duration(f.Max))
		if k.targeted {
			fmt.Fprintf(&b, " targets=%s", strings.Join(f.Targets, ","))
		}
		switch k.name {
		case "crash":
			fmt.Fprintf(&b, " torn=%.2f", o.TornProbability)
		case "partition":
			fmt.Fprintf(&b, " shapes=%s", strings.Join(o.PartitionShapes, ","))
		case "loss":
			fmt.Fprintf(&b, " rate≤%.2f", o.LossMax)
		case "duplicate":
			fmt.Fprintf(&b, " rate≤%.2f", o.DuplicateMax)
		case "delay":
			fmt.Fprintf(&b, " latency≤%v", time.Duration(o.DelayMax))
		case "reorder":
			fmt.Fprintf(&b, " rate≤%.2f hold≤%v", o.ReorderMax, time.Duration(o.ReorderDelayMax))
		case "drift":
			where := "within"
			if o.DriftPPMMax > o.DriftBoundPPM {
				where = "beyond"
			}
			fmt.Fprintf(&b, " |ppm|≤%d (%s the bound of %dppm)", o.DriftPPMMax, where, o.DriftBoundPPM)
		case "jump":
			fmt.Fprintf(&b, " |step|≤%v", time.Duration(o.JumpMax))
		case "slow-disk":
			fmt.Fprintf(&b, " sync≤%v", time.Duration(o.SyncDelayMax))
		case "aimed":
			fmt.Fprintf(&b, " aims=%s", strings.Join(o.Aims, ","))
		}
	}
	return b.String()
}

// DrawOptions draws a swarm mix from r: a random subset of the fault kinds
// (at least one), each with its own probability, durations and targets,
// scaled to the cluster's lease TTL (1s if unset). The draws happen in a
// fixed order, so the same seed always gives the same options; a kind that
// is off draws its settings all the same, so turning one kind off in the
// code's order never shifts another's.
func DrawOptions(r *rand.Rand, c Cluster) Options {
	ttl := c.TTL
	if ttl <= 0 {
		ttl = time.Second
	}
	o := Options{Step: DefaultStep, DriftBoundPPM: c.DriftBoundPPM}
	for _, k := range faultKinds {
		f := k.fault(&o)
		f.Enabled = r.IntN(2) == 0
		f.Probability = float64(10+r.IntN(191)) / 10_000 // 0.001–0.02 a step
		if k.name == "aimed" {
			// Three seeds in four, and more often: the faults that find
			// bugs fastest, each a story that needs its moment to come.
			f.Enabled = r.IntN(4) != 0
			f.Probability *= 3
		}
		if k.targeted {
			f.Targets = drawTargets(r, c)
		}
		var lo, hi time.Duration // stability and max ranges
		switch k.name {
		case "pause":
			// From a blip to far past the lease TTL.
			lo, hi = spread(r, time.Millisecond, ttl/10), spread(r, ttl/2, 4*ttl)
		case "loss", "duplicate", "reorder", "delay":
			lo, hi = spread(r, 10*time.Millisecond, ttl/2), spread(r, ttl/2, 3*ttl)
		case "drift":
			lo, hi = spread(r, 10*time.Millisecond, ttl), spread(r, ttl, 10*ttl)
		default:
			lo, hi = spread(r, 10*time.Millisecond, ttl), spread(r, ttl, 4*ttl)
		}
		f.Stability, f.Max = Duration(lo), Duration(max(lo, hi))
		switch k.name {
		case "crash":
			if r.IntN(2) == 0 {
				o.TornProbability = float64(1+r.IntN(9)) / 10
			}
		case "partition":
			for _, s := range shapes {
				if r.IntN(2) == 0 {
					o.PartitionShapes = append(o.PartitionShapes, s)
				}
			}
			if len(o.PartitionShapes) == 0 {
				o.PartitionShapes = []string{shapes[r.IntN(len(shapes))]}
			}
		case "loss":
			o.LossMax = float64(1+r.IntN(50)) / 100
		case "duplicate":
			o.DuplicateMax = float64(1+r.IntN(50)) / 100
		case "delay":
			o.DelayMax = Duration(spread(r, 10*time.Millisecond, 2*ttl))
		case "reorder":
			o.ReorderMax = float64(5+r.IntN(96)) / 100
			o.ReorderDelayMax = Duration(spread(r, time.Millisecond, 100*time.Millisecond))
		case "drift":
			bound := c.DriftBoundPPM
			if bound <= 0 || r.IntN(3) == 0 {
				// Beyond the bound: fencing alone must keep the store safe.
				base := max(bound, 100)
				o.DriftPPMMax = min(base*int64(2+r.IntN(19)), ppmLimit-1)
			} else {
				o.DriftPPMMax = bound
			}
		case "jump":
			o.JumpMax = Duration(spread(r, time.Millisecond, 4*ttl))
		case "slow-disk":
			o.SyncDelayMax = Duration(spread(r, time.Millisecond, 2*ttl))
		case "aimed":
			for _, a := range drawnAims {
				if r.IntN(2) == 0 && (c.LeaderSelector || !needsLeader(a)) {
					o.Aims = append(o.Aims, a)
				}
			}
			if len(o.Aims) == 0 {
				o.Aims = []string{AimPauseHolder}
			}
		}
	}
	on := 0
	for _, k := range faultKinds {
		if k.fault(&o).Enabled {
			on++
		}
	}
	if on == 0 {
		k := faultKinds[r.IntN(len(faultKinds))]
		k.fault(&o).Enabled = true
	}
	return o
}

// drawTargets draws a non-empty subset of the roles the cluster has.
func drawTargets(r *rand.Rand, c Cluster) []string {
	avail := c.roles()
	var out []string
	for _, role := range avail {
		if r.IntN(2) == 0 {
			out = append(out, role)
		}
	}
	if len(out) == 0 && len(avail) > 0 {
		out = []string{avail[r.IntN(len(avail))]}
	}
	return out
}
