package scenarios

import (
	"fmt"
	"slices"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// The vocabulary of a run lives in package scenario, which holds no
// world (the live runner plans with it without linking the simulator);
// these are its names as the simulator's runner has always spelt them.
type (
	Spec         = scenario.Spec
	ClientSpec   = scenario.ClientSpec
	StoreSpec    = scenario.StoreSpec
	LivenessSpec = scenario.LivenessSpec
	LiveSpec     = scenario.LiveSpec
	RunLimits    = scenario.RunLimits
	Expectation  = scenario.Expectation
	Duration     = scenario.Duration
	Plan         = scenario.Plan
	Replay       = scenario.Replay
	Crash        = scenario.Crash
)

// The format versions and bounds of package scenario.
const (
	SpecVersion    = scenario.SpecVersion
	ReplayFormat   = scenario.ReplayFormat
	ProgramVersion = scenario.ProgramVersion
	MaxTokenOffset = scenario.MaxTokenOffset
)

// storeNode is the fenced store's node name (scenario.StoreNode).
const storeNode = scenario.StoreNode

// TokenOffsets are the integer boundaries the swarm puts its tokens near
// (scenario.TokenOffsets).
var TokenOffsets = scenario.TokenOffsets

// NewPlan validates spec and draws the run's fault plan from seed
// (scenario.NewPlan).
func NewPlan(spec Spec, seed uint64) (Plan, error) { return scenario.NewPlan(spec, seed) }

// Parse reads and validates a spec (scenario.Parse).
func Parse(b []byte) (Spec, error) { return scenario.Parse(b) }

// ParseReplay reads a replay file strictly (scenario.ParseReplay).
func ParseReplay(b []byte) (Replay, error) { return scenario.ParseReplay(b) }

// Builtin returns every built-in scenario, sorted by name.
func Builtin() []Spec { return scenario.Builtin() }

// Lookup finds a built-in scenario by name.
func Lookup(name string) (Spec, bool) { return scenario.Lookup(name) }

// IsBuiltin reports whether s is a built-in scenario as built in
// (scenario.IsBuiltin).
func IsBuiltin(s Spec) bool { return scenario.IsBuiltin(s) }

// Names lists the built-in scenario names.
func Names() []string { return scenario.Names() }

// StandardSpec is simrun bench's standard run (scenario.StandardSpec).
func StandardSpec() Spec { return scenario.StandardSpec() }

// LeaseExcuses are the plan's excuses and those of the triggers that
// fired in the run.
func (r Result) LeaseExcuses() []checker.LeaseExcuse { return r.Plan.LeaseExcusesFired(r.Fired) }

// Faults are the faults the run carried out: the installed schedule's
// timed operations and the triggers as they fired, time-sorted.
func (r Result) Faults() nemesis.Schedule {
	ops := slices.DeleteFunc(slices.Clone(r.Plan.Installed()), func(op nemesis.Op) bool { return op.When != "" })
	return append(ops, r.Fired...).Sorted()
}

// NewReplay records a run.
func NewReplay(res Result) Replay {
	return Replay{
		Format: ReplayFormat, Program: ProgramVersion, Seed: res.Plan.Seed, Spec: res.Plan.Spec,
		Options: res.Plan.Options, Schedule: res.Plan.Schedule,
		Verdict: res.Verdict.Kind.String(), Property: res.Verdict.Property(),
		TraceHash: fmt.Sprintf("%016x", res.TraceHash), Events: res.Events, Crash: res.Crash,
	}
}
