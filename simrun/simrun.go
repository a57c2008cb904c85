// Package simrun is the simrun command: list fencesim's scenarios, run one
// seed and report the verdict with a line that reproduces it, sweep, merge,
// replay, shrink, hunt and bench. It is a package so that a program of
// yours can be simrun too (cmd/simrun is a three-line main).
//
// Exit codes: 0 pass, 1 safety violation, 2 usage error, 3 liveness
// failure, 4 nondeterminism, 5 unknown (checker could not decide), 6 crash
// (the run panicked).
package simrun

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/fencesim/fencesim/lockservice"
	builtin "github.com/fencesim/fencesim/lockservice/designs"
	"github.com/fencesim/fencesim/scenarios"
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

// Main is simrun's main: it registers designs (your own locks, see
// lockservice.Design), runs the command os.Args names and exits with its
// code. A program of yours that calls simrun.Main(mylock.Design{}) is
// simrun with your design in it: run, sweep, replay, shrink and hunt take
// a scenario spec naming "design": "mylock".
func Main(designs ...lockservice.Design) {
	tuneGC()
	os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr, designs...))
}

// Run is Main without the process, for tests: it registers designs, runs
// the command args names (without the program name) and returns its exit
// code. A design already registered under its name by the same type (an
// earlier Run, or the caller's scenarios.RegisterDesign) is not an error;
// a name taken by another design is (exit 2).
func Run(args []string, stdout, stderr io.Writer, designs ...lockservice.Design) int {
	if err := register(designs); err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return exitUsage
	}
	return run(args, stdout, stderr)
}

// register makes designs available to scenarios, once each.
func register(ds []lockservice.Design) error {
	for _, d := range ds {
		if d == nil {
			return fmt.Errorf("a nil design")
		}
		if have, ok := scenarios.LookupDesign(d.Info().Name); ok {
			if reflect.TypeOf(have) != reflect.TypeOf(d) {
				return fmt.Errorf("design %q is already taken by %T; name %T otherwise", d.Info().Name, have, d)
			}
			continue
		}
		if err := scenarios.RegisterDesign(d); err != nil {
			return err
		}
	}
	return nil
}

// builtinDesign reports whether name is one of fencesim's own designs,
// which the stock cmd/simrun knows.
func builtinDesign(name string) bool {
	for _, d := range builtin.BuiltinDesigns() {
		if d.Info().Name == name {
			return true
		}
	}
	return false
}

// progFor is the command that reruns a spec: the stock simrun for
// fencesim's designs, this program for a design registered with Main —
// the only one that knows it.
func progFor(spec scenarios.Spec) string {
	if spec.Design == "" || builtinDesign(spec.Design) {
		return "go run ./cmd/simrun"
	}
	return thisProgram()
}

// thisProgram names the running program as a command: "go run ./PKG" for
// a main package of the module it was built in (from the module root, as
// ./cmd/simrun), else the executable's name.
func thisProgram() string {
	if bi, ok := debug.ReadBuildInfo(); ok && !strings.HasSuffix(bi.Path, ".test") && bi.Main.Path != "" {
		if bi.Path == bi.Main.Path {
			return "go run ."
		}
		if rel, ok := strings.CutPrefix(bi.Path, bi.Main.Path+"/"); ok {
			return "go run ./" + rel
		}
	}
	return filepath.Base(os.Args[0])
}

// batchGCPercent is the collector's target when GOGC is not set. A run
// allocates about 60 MB (fencesim-0.17) and keeps a few: at Go's default of 100 the
// collector runs every few milliseconds and takes about a sixth of the
// time. At 400 it ran a quarter as often (the standard run gained ~16%),
// but a cycle begun by the simulation's garbage still often straddled the
// checker, which then paid its marking (simrun bench: checker share 3.0–3.2%
// at 400, 2.3–2.4% at 1000, the same check's CPU either way, and the
// standard run no slower). At 1000 the heap peaks near 80 MB per worker.
// GOGC in the environment still decides when it is set.
const batchGCPercent = 1000

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(batchGCPercent)
	}
}

// command is one subcommand: how it is called, what it does, and its entry
// point. The top-level usage and each command's -h are made from this table,
// so the two cannot disagree.
type command struct {
	name string
	// synopsis is the argument line after "simrun NAME".
	synopsis string
	// about says what the command does, one or more lines.
	about string
	run   func(args []string, stdout, stderr io.Writer) int
}

// commands lists simrun's commands in the order the usage shows them. It
// is filled by init: the commands' -h reads it.
var commands []command

func init() {
	commands = []command{
		{"list", "[-mutants]", "every built-in scenario, its expectation and what it shows\n(-mutants: every planted bug)", cmdList},
		{"run", "(-scenario NAME | -spec FILE.json) [-seed N]", "simulate one seed and check it (flags: -json, -out DIR, -trace, -check-twice, -mutant)\n-spec runs a scenario you wrote, validated like the built-ins", cmdRun},
		{"sweep", "[-scenario NAME | -spec FILE | -all] [-seeds A..B] [-workers K] [-shard i/n] [-budget D] [-json] [-keep N] [-keep-cap SIZE] [-trace-cap SIZE]", "many seeds on all cores, streamed (memory independent of the range):\nsummary per scenario, one repro line per miss; -json ends with a\ntrailer line that merge checks", cmdSweep},
		{"merge", "[-partial] FILE...", "merge the -json output of sweep shards into one summary and exit code;\nmissing, duplicate or interrupted shards are an error unless -partial", cmdMerge},
		{"replay", "[-force] [-trace] FILE", "run a replay file again: the same trace hash and verdict, or why not;\nan edited file is refused as modified (exit 2)", cmdReplay},
		{"shrink", "((-scenario NAME | -spec FILE) -seed N | FILE) [-o FILE]", "reduce a failing run's faults, clients and replicas while the same\nproperty still fails; write the smaller run's replay file", cmdShrink},
		{"hunt", "(-mutant NAME | -all | -scenario NAME | -spec FILE) [-seeds A..B] [-json]", "sweep with a planted bug until the first violation; -all prints\nthe detection table; without -mutant, the build as it is until its\nfirst failure (a bug you patched in): seeds tried, wall, replay file\n(exit 0 when found, 1 when the bug went unnoticed)", cmdHunt},
		{"bench", "[-seeds N] [-memory M] [-json] [-cpuprofile FILE]", "the standard run's speed against the bare event loop, one worker\nand every core, checker share, peak heap; -memory M: the heap\nafter the first 1% of M seeds against after all M", cmdBench},
		{"live", "(-target NAME | -target-file FILE) (-scenario NAME | -spec FILE | -replay FILE) [-seed N] [-duration D] [-json] [-out DIR] [-bin DIRS] [-allow-inapplicable]", "run the scenario's seeded fault schedule against real processes of a\nlock service (targets: reference, lockd, ...; -target-file: yours, in any\nlanguage) and check what its clients saw; reproduces the schedule, not the\ntiming; a run that tested too little is unknown, never a pass", cmdLive},
		{"conform", "-url URL [-url2 URL] [-global-tokens] [-remembers-grants] [-token-offset N] [-json]", "run the HTTP lock API's contract suite against any server of it\n(docs/lock-api.yaml); one line per case, what failed and why", cmdConform},
		{"help", "[COMMAND]", "this list, or one command's usage and flags (as COMMAND -h)", nil},
	}
}

// exitCodesText explains the exit codes, in the usage and in every
// command's -h.
const exitCodesText = `exit codes: 0 pass, 1 safety violation, 2 usage error, 3 liveness failure,
            4 nondeterminism, 5 unknown, 6 crash (the run panicked: its seed, stack
            and replay file are printed), 130 sweep interrupted
  (sweep: 0 when every scenario met its expectation; otherwise the code of the
   worst miss — 1 also for a canary that passed)
`

// usage is the top-level help: every command, then the exit codes.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: simrun <command> [flags]\n       simrun help <command>   (or simrun <command> -h): its flags\n\ncommands:\n")
	for _, c := range commands {
		head := "  " + c.name + " " + c.synopsis
		lines := strings.Split(c.about, "\n")
		if len(head) <= 30 {
			fmt.Fprintf(&b, "%-31s%s\n", head, lines[0])
		} else {
			fmt.Fprintf(&b, "%s\n%31s%s\n", head, "", lines[0])
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%31s%s\n", "", l)
		}
	}
	b.WriteString("\nrun and sweep take -mutant NAME too; run, sweep, shrink and hunt take -design NAME\n" +
		"(a scenario on another design, e.g. yours: see simrun.Main).\n" +
		"failing runs (any verdict but pass) write a replay file under failures/ (or into -out DIR)\n\n")
	b.WriteString(exitCodesText)
	return b.String()
}

// lookupCommand finds a command by name.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// parseFlags parses a command's flags. -h or -help prints the command's
// usage and flags on stdout and ends the command with exit 0 (asking for
// help is not a usage error); a bad flag prints the error and the usage on
// stderr and ends it with exit 2. ok is true when the command should go on.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	fs.Usage = func() { commandUsage(fs) }
	err := fs.Parse(args)
	fs.SetOutput(stderr) // later fs.Usage() calls explain a usage error
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(buf.Bytes())
		return exitPass, false
	case err != nil:
		stderr.Write(buf.Bytes())
		return exitUsage, false
	}
	return exitPass, true
}

// commandUsage prints fs's command: its synopsis, what it does, its flags.
func commandUsage(fs *flag.FlagSet) {
	w := fs.Output()
	name := strings.TrimPrefix(fs.Name(), "simrun ")
	if c, ok := lookupCommand(name); ok {
		fmt.Fprintf(w, "usage: simrun %s %s\n\n%s\n\n", c.name, c.synopsis, c.about)
	} else {
		fmt.Fprintf(w, "usage of %s:\n", fs.Name())
	}
	flags := 0
	fs.VisitAll(func(*flag.Flag) { flags++ })
	if flags == 0 {
		fmt.Fprintln(w, "flags: none")
	} else {
		fmt.Fprintln(w, "flags:")
		fs.PrintDefaults()
	}
	fmt.Fprintf(w, "\n%s", exitCodesText)
}

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return cmdHelp(args[1:], stdout, stderr)
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "simrun: unknown command %q\n\n%s", args[0], usage())
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

// cmdHelp prints the usage, or with a command name that command's usage
// and flags.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage())
		return exitPass
	case len(args) > 1:
		fmt.Fprintf(stderr, "simrun help: want one command name, got %q\n", args)
		return exitUsage
	}
	c, ok := lookupCommand(args[0])
	switch {
	case !ok:
		fmt.Fprintf(stderr, "simrun help: unknown command %q\n\n%s", args[0], usage())
		return exitUsage
	case c.run == nil: // help itself
		fmt.Fprint(stdout, usage())
		return exitPass
	}
	return c.run([]string{"-h"}, stdout, stderr)
}
