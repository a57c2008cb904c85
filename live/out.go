package live

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/report"
	"github.com/fencesim/fencesim/scenarios"
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
	Plan   json.RawMessage `json:"plan"` // a scenarios.Replay
}

// NewReplayFile records res's plan for target.
func NewReplayFile(res Result) []byte {
	rp := scenarios.Replay{Program: scenarios.ProgramVersion, Seed: res.Plan.Seed, Spec: res.Plan.Spec, Options: res.Plan.Options, Schedule: res.Plan.Schedule,
		Verdict: res.Verdict.Kind.String(), Property: res.Verdict.Property(), TraceHash: "live"}
	rf := ReplayFile{Format: ReplayFormat, Target: res.Target, Plan: rp.Marshal()}
	b, _ := json.MarshalIndent(rf, "", "  ")
	return append(b, '\n')
}

// ParseReplayFile reads a live replay file strictly.
func ParseReplayFile(b []byte) (target string, plan scenarios.Plan, err error) {
	var rf ReplayFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return "", scenarios.Plan{}, fmt.Errorf("live replay file: %v", err)
	}
	if rf.Format != ReplayFormat {
		return "", scenarios.Plan{}, fmt.Errorf("live replay file: live_format %d is not supported (this build reads %d); a simulator replay file runs with simrun replay", rf.Format, ReplayFormat)
	}
	rp, err := scenarios.ParseReplay(rf.Plan)
	if err != nil {
		return "", scenarios.Plan{}, fmt.Errorf("live replay file: %v", err)
	}
	return rf.Target, rp.Plan(), nil
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
// the options and the schedule, and that a live run reproduces its
// schedule, not its timing.
func Describe(target string, plan scenarios.Plan) string {
	var b strings.Builder
	spec, _ := json.Marshal(plan.Spec)
	fmt.Fprintf(&b, "live target=%s scenario=%s seed=%d\noptions=%s\n", target, plan.Spec.Name, plan.Seed, spec)
	if plan.Options != nil {
		fmt.Fprintf(&b, "swarm options (drawn from the seed):\n  %s\n", strings.ReplaceAll(strings.TrimSpace(plan.Options.String()), "\n", "\n  "))
	}
	sched := plan.Installed().Sorted()
	fmt.Fprintf(&b, "schedule (%d operations, the simulator's for this seed):\n", len(sched))
	for _, op := range sched {
		fmt.Fprintf(&b, "  %8v  %s\n", time.Duration(op.At), op.String())
	}
	b.WriteString("note: a live run reproduces its schedule, not its timing: the same seed fires the same faults at the same offsets, but real processes interleave as the machine runs them, so two runs of one seed can see different histories.\n")
	return b.String()
}
