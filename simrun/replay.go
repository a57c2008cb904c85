package simrun

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fencesim/fencesim/scenarios"
)

// cmdReplay runs a replay file again and says whether it reproduced: the
// same trace hash and verdict, or exactly why not.
func cmdReplay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	force := fs.Bool("force", false, "replay a file written by another program version anyway")
	var o outputFlags
	o.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simrun replay [-force] [-out DIR] [-json] [-trace] FILE")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "simrun replay: %v\n", err)
		return exitUsage
	}
	r, err := scenarios.ParseReplay(b)
	if err != nil {
		fmt.Fprintf(stderr, "simrun replay: %s: %v\n", fs.Arg(0), err)
		return exitUsage
	}
	if r.Program != scenarios.ProgramVersion && !*force {
		fmt.Fprintf(stderr, "simrun replay: %s was written by %s; this is %s, whose runs may differ. "+
			"Re-run the seed with this version (simrun run -scenario %s -seed %d) or pass -force to try anyway.\n",
			fs.Arg(0), r.Program, scenarios.ProgramVersion, r.Spec.Name, r.Seed)
		return exitUsage
	}
	res, code := execute("simrun replay", r.Plan(), o, false, stdout, stderr)
	if code == exitUsage {
		return code
	}
	hash := fmt.Sprintf("%016x", res.TraceHash)
	same := hash == r.TraceHash && res.Verdict.Kind.String() == r.Verdict && res.Verdict.Property() == r.Property
	out := stdout
	if o.asJSON {
		out = stderr
	}
	if same {
		fmt.Fprintf(out, "reproduced: trace hash %s, verdict %s %s\n", hash, r.Verdict, r.Property)
		return code
	}
	fmt.Fprintf(out, "DIFFERS from the recorded run: trace hash %s (recorded %s), verdict %s %s (recorded %s %s)",
		hash, r.TraceHash, res.Verdict.Kind, res.Verdict.Property(), r.Verdict, r.Property)
	if r.Program != scenarios.ProgramVersion {
		fmt.Fprintf(out, " — expected: the file comes from %s\n", r.Program)
		return code
	}
	fmt.Fprintln(out, " — the same program version ran differently: nondeterminism")
	return exitNondeterminism
}
