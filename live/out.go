package live

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/report"
	"github.com/fencesim/fencesim/scenario"
)

// ReplayFormat is the format of a live replay file.
const ReplayFormat = 1

// ReplayFile is a live run's replay file: the target and the simulator's
// replay file of the plan (spec, seed, drawn options, schedule as
// written). `simrun live -replay FILE` runs that schedule live again — its
// schedule, not its timing.
type ReplayFile struct {
	Format int             `json:"live_format"`
	Target string          `json:"target"`
	Plan   json.RawMessage `json:"plan"` // a scenario.Replay
	// TargetFaults are the scripted faults aimed at the target's own
	// servers, which the simulator's plan cannot hold (NewPlan).
	TargetFaults nemesis.Schedule `json:"target_faults,omitempty"`
	// WorldOps counts the operations of the plan's schedule the live
	// world added to the simulator's draw (scenario.Plan.WorldOps), so
	// that a replay's header says which they are.
	WorldOps int `json:"world_ops,omitempty"`
}

// NewReplayFile records res's plan for target.
func NewReplayFile(res Result) []byte {
	rp := scenario.Replay{Program: scenario.ProgramVersion, Seed: res.Plan.Seed, Spec: res.Plan.Spec, Options: res.Plan.Options, Schedule: res.Plan.Schedule,
		Verdict: res.Verdict.Kind.String(), Property: res.Verdict.Property(), TraceHash: "live"}
	rf := ReplayFile{Format: ReplayFormat, Target: res.Target, Plan: rp.Marshal(), TargetFaults: res.TargetFaults, WorldOps: res.Plan.WorldOps}
	b, _ := json.MarshalIndent(rf, "", "  ")
	return append(b, '\n')
}

// ParseReplayFile reads a live replay file strictly: its target, its
// plan and the faults aimed at the target's own servers.
func ParseReplayFile(b []byte) (target string, plan scenario.Plan, targetFaults nemesis.Schedule, err error) {
	var rf ReplayFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return "", scenario.Plan{}, nil, fmt.Errorf("live replay file: %v", err)
	}
	if rf.Format != ReplayFormat {
		return "", scenario.Plan{}, nil, fmt.Errorf("live replay file: live_format %d is not supported (this build reads %d); a simulator replay file runs with simrun replay", rf.Format, ReplayFormat)
	}
	rp, err := scenario.ParseReplay(rf.Plan)
	if err != nil {
		return "", scenario.Plan{}, nil, fmt.Errorf("live replay file: %v", err)
	}
	if err := rf.TargetFaults.Check(); err != nil {
		return "", scenario.Plan{}, nil, fmt.Errorf("live replay file: target_faults: %v", err)
	}
	plan = rp.Plan()
	if rf.WorldOps < 0 || rf.WorldOps > len(plan.Schedule) {
		return "", scenario.Plan{}, nil, fmt.Errorf("live replay file: world_ops %d: the schedule has %d operations", rf.WorldOps, len(plan.Schedule))
	}
	plan.WorldOps = rf.WorldOps
	return rf.Target, plan, rf.TargetFaults, nil
}

// ReportInput is what the HTML report shows of a live run: the history
// and every fault at the instant it was really carried out (skipped ones
// are left out of the timeline and listed in the description).
func ReportInput(res Result, repro string) report.Input {
	var faults nemesis.Schedule
	var skipped []string
	for _, ev := range res.Faults {
		if ev.Skipped != "" {
			skipped = append(skipped, ev.String())
			continue
		}
		op := ev.Planned
		op.At = nemesis.Duration(ev.At)
		if ev.Node != "" && !strings.Contains(ev.Node, ",") && !strings.Contains(ev.Node, "→") {
			op.Node = ev.Node
		}
		faults = append(faults, op)
	}
	desc := fmt.Sprintf("LIVE run against target %q: real processes, real time (the timeline is the run's, from the start of the workload; a live run reproduces its schedule, not its timing). %s",
		res.Target, res.Plan.Spec.Description)
	if len(skipped) > 0 {
		desc += " Skipped faults: " + strings.Join(skipped, "; ") + "."
	}
	if len(res.Notes) > 0 {
		desc += " Notes: " + strings.Join(res.Notes, "; ") + "."
	}
	in := report.Input{Scenario: res.Scenario + " (live: " + res.Target + ")", Seed: res.Seed, Description: desc,
		Expect: res.Expect, TraceHash: "live run: no trace hash", Verdict: res.Verdict, History: res.History,
		Faults: faults, SimEnd: res.History.End, Repro: repro}
	if res.Plan.Options != nil {
		in.Options = res.Plan.Options.String()
	}
	return in
}

// WriteOut writes a live run's files into dir: the HTML report
// (index.html, history.json), result.json and live-replay.json.
func WriteOut(dir string, res Result, repro string) (string, error) {
	index, err := report.Write(dir, ReportInput(res, repro), "")
	if err != nil {
		return "", err
	}
	j, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return "", err
	}
	return index, errors.Join(
		os.WriteFile(filepath.Join(dir, "result.json"), append(j, '\n'), 0o644),
		os.WriteFile(filepath.Join(dir, "live-replay.json"), NewReplayFile(res), 0o644),
	)
}

// Describe is the header a live run prints before it starts: the seed,
// the options and the schedule (with the faults aimed at the target's
// own servers), and that a live run reproduces its schedule, not its
// timing.
func Describe(target string, plan scenario.Plan, targetFaults nemesis.Schedule) string {
	var b strings.Builder
	spec, _ := json.Marshal(plan.Spec)
	fmt.Fprintf(&b, "live target=%s scenario=%s seed=%d\noptions=%s\n", target, plan.Spec.Name, plan.Seed, spec)
	if plan.Options != nil {
		fmt.Fprintf(&b, "swarm options (drawn from the seed):\n  %s\n", strings.ReplaceAll(strings.TrimSpace(plan.Options.String()), "\n", "\n  "))
	}
	sched := append(plan.Installed(), targetFaults...).Sorted()
	fmt.Fprintf(&b, "schedule (%d operations, the simulator's for this seed", len(sched)-plan.WorldOps)
	if plan.WorldOps > 0 {
		fmt.Fprintf(&b, ", and %d the live world adds: a holder paused at its write past its lease", plan.WorldOps)
	}
	if len(targetFaults) > 0 {
		fmt.Fprintf(&b, ", and %d aimed at the target's own servers", len(targetFaults))
	}
	b.WriteString("):\n")
	for _, op := range sched {
		fmt.Fprintf(&b, "  %8v  %s\n", time.Duration(op.At), op.String())
	}
	b.WriteString("note: a live run reproduces its schedule, not its timing: the same seed fires the same faults at the same offsets, but real processes interleave as the machine runs them, so two runs of one seed can see different histories.\n")
	return b.String()
}

// ErrOutInUse matches LockOut's error for a directory another run holds.
var ErrOutInUse = errors.New("live: the -out directory is in use by another run")

// LockOut takes dir (created if need be) for one run: an exclusive,
// non-blocking flock on DIR/.lock, holding the run's pid. A second run
// given the same directory is refused while the first holds it, so it
// cannot delete the first's data directories under its feet; the lock
// ends with the process, however it ends. unlock releases it.
func LockOut(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("live: -out: %w", err)
	}
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("live: -out: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "?"
		}
		return nil, fmt.Errorf("%w: %s (pid %s holds %s); give this run another -out", ErrOutInUse, dir, holder, path)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// ParseSpec reads a scenario spec strictly (unknown fields are errors)
// without validating its faults' node names: NewPlan checks them against
// the simulator's design and the target's servers.
func ParseSpec(b []byte) (scenario.Spec, error) {
	var s scenario.Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return scenario.Spec{}, fmt.Errorf("scenario: %v", err)
	}
	if dec.More() {
		return scenario.Spec{}, fmt.Errorf("scenario: trailing data after the JSON object")
	}
	return s, nil
}
