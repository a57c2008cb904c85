package simrun

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/live"
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenarios"
)

// cmdLive runs a scenario's seeded schedule against a real lock service.
func cmdLive(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun live", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "the lock service to run for real: "+targetNames())
	targetFile := fs.String("target-file", "", "the lock service described in `file.json` (any language: servers' commands, ready checks, the client; docs/live-targets.md)")
	name := fs.String("scenario", "", "built-in scenario `name` (see simrun list)")
	specFile := fs.String("spec", "", "run the scenario spec in `file.json`")
	replayFile := fs.String("replay", "", "run a live replay file's schedule again (live-replay.json of an -out directory)")
	seed := fs.Uint64("seed", 1, "root `seed`: draws the same schedule the simulator would (a swarm's with a holder paused at its write past its lease every 5 s on top)")
	duration := fs.Duration("duration", 0, "override the scenario's safety phase (a swarm draws its faults over it), e.g. 30s; 0: the scenario's")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	out := fs.String("out", "", "write the HTML report (index.html), history.json, result.json, live-replay.json and the processes' logs into `dir`")
	bins := fs.String("bin", "", "directories (comma-separated) searched for the binaries before $PATH (default: the directory of simrun itself)")
	opts := liveclient.OptFlag{}
	fs.Var(opts, "opt", "a target-specific option `key=value` (repeatable), passed to the target and its clients")
	allowNA := fs.Bool("allow-inapplicable", false, "run a spec whose scripted faults include some the target cannot carry out at all (listed as not applicable) instead of refusing it (exit 2)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "simrun live: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	var plan scenarios.Plan
	var targetFaults nemesis.Schedule
	if *replayFile != "" {
		if *name != "" || *specFile != "" {
			return fail("-replay carries its scenario: leave -scenario and -spec out")
		}
		if set := setFlags(fs); set["seed"] || set["duration"] {
			return fail("-replay carries its seed, duration and schedule: leave -seed and -duration out")
		}
		b, err := os.ReadFile(*replayFile)
		if err != nil {
			return fail("%v", err)
		}
		t, p, tf, err := live.ParseReplayFile(b)
		if err != nil {
			return fail("%v", err)
		}
		plan, targetFaults = p, tf
		if *target == "" {
			*target = t
		}
	}
	var t live.Target
	switch {
	case *targetFile != "":
		if set := setFlags(fs); set["target"] {
			return fail("-target and -target-file exclude each other")
		}
		tf, err := live.LoadTargetFile(*targetFile)
		if err != nil {
			return fail("-target-file: %v", err)
		}
		t, *target = tf, tf.Info().Name
	case *target == "":
		return fail("-target (%s) or -target-file FILE is required", targetNames())
	default:
		var ok bool
		if t, ok = live.Lookup(*target); !ok {
			return fail("unknown -target %q: %s (a target described in a file: -target-file FILE)", *target, targetNames())
		}
	}
	if *duration < 0 || (*duration > 0 && *duration < 100*time.Millisecond) || *duration > time.Hour {
		return fail("-duration %v must be 0 (the scenario's) or 100ms..1h", *duration)
	}
	if *replayFile == "" {
		var spec scenarios.Spec
		var err error
		if *specFile != "" && *name == "" {
			// A live spec may aim faults at the target's own servers
			// (@redis, etcd2), which the simulator's validation does not
			// know: live.NewPlan checks its names against both.
			b, rerr := os.ReadFile(*specFile)
			if rerr != nil {
				return fail("-spec: %v", rerr)
			}
			if spec, err = live.ParseSpec(b); err != nil {
				return fail("-spec %s: %v", *specFile, err)
			}
		} else if spec, err = chooseSpec(*name, *specFile); err != nil {
			return fail("%v", err)
		}
		if *duration > 0 {
			spec.Duration = scenarios.Duration(*duration)
		}
		if plan, targetFaults, err = live.NewPlan(spec, *seed, t.Info()); err != nil {
			if *specFile != "" {
				return fail("-spec %s: %v", *specFile, err)
			}
			return fail("%v", err)
		}
	}
	binDirs := []string{}
	if *bins != "" {
		binDirs = strings.Split(*bins, ",")
	} else if exe, err := os.Executable(); err == nil {
		binDirs = []string{filepath.Dir(exe)}
	}
	dir := ""
	if *out != "" {
		// One run per -out directory: a second would delete the first's
		// data directories under its feet.
		unlock, err := live.LockOut(*out)
		if err != nil {
			return fail("%v", err)
		}
		defer unlock()
		dir = filepath.Join(*out, "run")
		os.RemoveAll(dir)
	}
	header := live.Describe(*target, plan, targetFaults)
	if *asJSON {
		fmt.Fprint(stderr, header)
	} else {
		fmt.Fprint(stdout, header)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if !*asJSON {
		progress = stdout
	}
	res, err := live.Run(ctx, live.Options{Target: t, Plan: plan, TargetFaults: targetFaults, AllowInapplicable: *allowNA,
		Dir: dir, BinDirs: binDirs, TargetOptions: opts, Log: progress})
	if err != nil {
		fmt.Fprintf(stderr, "simrun live: %v\n", err)
		switch {
		case errors.Is(err, live.ErrInterrupted) || ctx.Err() != nil:
			return exitInterrupted
		case errors.Is(err, live.ErrNoBinary) || errors.Is(err, live.ErrBadOption) || errors.Is(err, live.ErrInapplicable):
			return exitUsage
		}
		return exitCrash
	}
	repro := liveRepro(*target, *targetFile, *name, *specFile, *replayFile, plan.Seed, *duration)
	code := exitCode(res.Verdict)
	if res.Interrupted && res.Verdict.Kind != checker.VerdictViolation {
		// Stopped by a signal: no verdict but a violation already found
		// stands for the run (as sweep's SIGINT).
		code = exitInterrupted
	}
	index := ""
	if *out != "" {
		if index, err = live.WriteOut(*out, res, repro); err != nil {
			fmt.Fprintf(stderr, "simrun live: %v\n", err)
			return exitCrash
		}
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
		return code
	}
	fmt.Fprintf(stdout, "faults as carried out (on the run's timeline):\n")
	for _, ev := range res.Faults {
		fmt.Fprintf(stdout, "  %s\n", ev)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	fmt.Fprintf(stdout, "verdict=%s", res.Verdict.Kind)
	if p := res.Verdict.Property(); p != "" {
		fmt.Fprintf(stdout, " property=%s", p)
	}
	fmt.Fprintf(stdout, " expected=%q met=%v faults_done=%d faults_skipped=%d faults_not_applicable=%d clients=%s",
		res.Expect, res.Met, res.FaultCounts.Done, res.FaultCounts.Skipped, res.FaultCounts.NotApplicable, clientSummary(res))
	if res.Interrupted {
		fmt.Fprint(stdout, " interrupted=true")
	}
	fmt.Fprintln(stdout)
	for _, v := range res.Verdict.Violations {
		fmt.Fprintf(stdout, "  %s at %v: %s\n", v.Property, v.At, v.Detail)
	}
	if res.Verdict.Unknown != "" {
		fmt.Fprintf(stdout, "  inconclusive: %s\n", res.Verdict.Unknown)
	}
	fmt.Fprintf(stdout, "records: %d lock ops, %d store ops, %d grants (derived), %d store applies; wall_seconds=%.1f\n",
		res.Counts["lock_ops"], res.Counts["store_ops"], res.Counts["grants"], res.Counts["applies"], res.Wall.Seconds())
	if index != "" {
		fmt.Fprintf(stdout, "report: %s (replay: simrun live -replay %s)\n", index, shellQuote(filepath.Join(*out, "live-replay.json")))
	}
	if code != exitPass {
		fmt.Fprintf(stdout, "reproduce the schedule: %s\n", repro)
	}
	return code
}

// clientSummary is each client's grants and operations, for the verdict
// line: "a:3g/12ops,b:0g/0ops(died)".
func clientSummary(res live.Result) string {
	var parts []string
	for _, c := range res.Plan.Spec.Clients {
		cc := res.Clients[c.Name]
		p := fmt.Sprintf("%s:%dg/%dops", c.Name, cc.Grants, cc.LockOps+cc.StoreOps)
		if len(cc.Died) > 0 {
			p += "(died)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

// setFlags returns the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func targetNames() string {
	var names []string
	for _, t := range live.Targets() {
		names = append(names, t.Name)
	}
	return "one of " + strings.Join(names, ", ")
}

func liveRepro(target, targetFile, name, specFile, replayFile string, seed uint64, d time.Duration) string {
	var what string
	tflag := "-target " + target
	if targetFile != "" {
		tflag = "-target-file " + shellQuote(targetFile)
	}
	switch {
	case replayFile != "" && targetFile != "":
		return "simrun live -target-file " + shellQuote(targetFile) + " -replay " + shellQuote(replayFile)
	case replayFile != "":
		return "simrun live -replay " + shellQuote(replayFile)
	case specFile != "":
		what = "-spec " + shellQuote(specFile)
	default:
		what = "-scenario " + name
	}
	s := fmt.Sprintf("simrun live %s %s -seed %d", tflag, what, seed)
	if d > 0 {
		s += " -duration " + d.String()
	}
	return s
}
