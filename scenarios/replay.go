package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fencesim/fencesim/nemesis"
)

// ReplayFormat is the replay-file format this build reads and writes.
const ReplayFormat = 1

// ProgramVersion names the behaviour of this build's simulations. Bump it
// with any change that alters a run's trace for a given plan (the service,
// the clients, the simulator, the fault kinds): a replay file written by
// another version may legitimately run differently, and replay says so
// instead of reporting nondeterminism.
const ProgramVersion = "fencesim-0.6"

// Replay is a replay file: everything a run was made of — the program
// version, the seed, the full scenario spec, every drawn option and the
// explicit fault schedule — and what it produced, so that `simrun replay`
// can run it again and compare.
type Replay struct {
	Format   int              `json:"format"`
	Program  string           `json:"program"`
	Seed     uint64           `json:"seed"`
	Spec     Spec             `json:"spec"`
	Options  *nemesis.Options `json:"options,omitempty"`
	Schedule nemesis.Schedule `json:"schedule"`
	// What the recorded run produced.
	Verdict   string `json:"verdict"`
	Property  string `json:"property,omitempty"`
	TraceHash string `json:"trace_hash"`
	Events    uint64 `json:"events"`
	// Crash is the panic of a run whose verdict was crash, its stack
	// included: shown to the reader, never compared (the stack depends on
	// the build and the machine).
	Crash *Crash `json:"crash,omitempty"`
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

// Plan returns the plan the replay runs: its schedule as written, never
// drawn again.
func (r Replay) Plan() Plan {
	return Plan{Spec: r.Spec, Seed: r.Seed, Options: r.Options, Schedule: r.Schedule}
}

// Marshal writes the replay as indented JSON.
func (r Replay) Marshal() []byte {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("scenarios: encoding a replay: %v", err)) // only plain data: cannot happen
	}
	return append(b, '\n')
}

// ParseReplay reads a replay file strictly: unknown fields, trailing data,
// another format, an invalid spec or a schedule naming unknown nodes are
// errors that say what is wrong. It never panics. A different program
// version is not an error here: the caller decides (see ProgramVersion).
func ParseReplay(b []byte) (Replay, error) {
	var r Replay
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Replay{}, fmt.Errorf("replay file: %v", err)
	}
	if dec.More() {
		return Replay{}, fmt.Errorf("replay file: trailing data after the JSON object")
	}
	if r.Format != ReplayFormat {
		return Replay{}, fmt.Errorf("replay file: format %d is not supported (this build reads format %d)", r.Format, ReplayFormat)
	}
	if r.Program == "" || r.TraceHash == "" || r.Verdict == "" {
		return Replay{}, fmt.Errorf("replay file: program, verdict and trace_hash are required")
	}
	if err := r.Schedule.Check(); err != nil {
		return Replay{}, fmt.Errorf("replay file: %w", err)
	}
	if r.Options != nil {
		if err := r.Options.Validate(); err != nil {
			return Replay{}, fmt.Errorf("replay file: %w", err)
		}
	}
	if err := r.Plan().Validate(); err != nil {
		return Replay{}, fmt.Errorf("replay file: %w", err)
	}
	return r, nil
}
