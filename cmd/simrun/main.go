// Command simrun runs fencesim's scenarios: list them, run one seed, and
// report the verdict with a line that reproduces it.
//
// Exit codes: 0 pass, 1 safety violation, 2 usage error, 3 liveness
// failure, 4 nondeterminism, 5 unknown (checker could not decide), 6 crash
// (the run panicked).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// Exit codes, stable for scripts and CI.
const (
	exitPass           = 0
	exitViolation      = 1
	exitUsage          = 2
	exitLiveness       = 3
	exitNondeterminism = 4
	exitUnknown        = 5
	exitCrash          = 6
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// batchGCPercent is the collector's target when GOGC is not set. A run
// allocates about 100 MB and keeps under 1 MB; at Go's default of 100 the
// collector runs every few milliseconds and takes about a sixth of the
// time. At 400 it runs a quarter as often: the standard run gains ~16% and
// the heap peaks near 150 MB per worker, a small price on a machine that
// runs sweeps. GOGC in the environment still decides when it is set.
const batchGCPercent = 400

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(batchGCPercent)
	}
}

const usage = `usage: simrun <command> [flags]

commands:
  list [-mutants]              every built-in scenario, its expectation and what it shows
                               (-mutants: every planted bug)
  run -scenario NAME -seed N   simulate one seed and check it (flags: -json, -out DIR, -trace, -check-twice)
  sweep [-scenario NAME | -all] [-seeds A..B] [-workers K] [-shard i/n] [-budget D] [-json]
                               many seeds on all cores: summary per scenario, one repro line per miss
  merge FILE...                merge the -json output of sweep shards into one summary and exit code
  replay FILE                  run a replay file again: the same trace hash and verdict, or why not
  shrink (-scenario NAME -seed N | FILE) [-o FILE]
                               reduce a failing run's faults, clients and replicas while the same
                               property still fails; write the smaller run's replay file

  hunt (-mutant NAME | -all) [-scenario swarm] [-seeds A..B] [-json]
                               sweep with a planted bug until the first violation; -all prints
                               the detection table

  bench [-seeds N] [-memory M] [-json] [-cpuprofile FILE]
                               the standard run's speed against the bare event loop, one worker
                               and every core, checker share, peak heap; -memory M: the heap
                               after the first 1% of M seeds against after all M

run and sweep take -mutant NAME too.
failing runs (any verdict but pass) write a replay file under failures/ (or into -out DIR)

exit codes: 0 pass, 1 safety violation, 2 usage error, 3 liveness failure,
            4 nondeterminism, 5 unknown, 6 crash (the run panicked: its seed, stack
            and replay file are printed), 130 sweep interrupted
  (sweep: 0 when every scenario met its expectation; otherwise the code of the
   worst miss — 1 also for a canary that passed)
`

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "list":
		return cmdList(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "sweep":
		return cmdSweep(args[1:], stdout, stderr)
	case "merge":
		return cmdMerge(args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(args[1:], stdout, stderr)
	case "shrink":
		return cmdShrink(args[1:], stdout, stderr)
	case "hunt":
		return cmdHunt(args[1:], stdout, stderr)
	case "bench":
		return cmdBench(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitPass
	default:
		fmt.Fprintf(stderr, "simrun: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}
