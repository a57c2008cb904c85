package simrun

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

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
	r, err := parseReplay(fs.Arg(0), b)
	if err != nil {
		fmt.Fprintf(stderr, "simrun replay: %v\n", err)
		return exitUsage
	}
	if r.Program != scenarios.ProgramVersion && !*force {
		fmt.Fprintf(stderr, "simrun replay: %s was written by %s; this is %s, whose runs may differ. "+
			"Re-run the seed with this version (%s) or pass -force to try anyway.\n",
			fs.Arg(0), r.Program, scenarios.ProgramVersion, r.Rerun())
		return exitUsage
	}
	o.replayFile = fs.Arg(0)
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
	if same { // the file records the first property violated; the headline is run's
		fmt.Fprintf(out, "reproduced: trace hash %s, verdict %s %s\n", hash, r.Verdict, r.Spec.Expect.Headline(res.Verdict))
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

// parseReplay reads the replay file b (named file). A file whose run used
// a design this program lacks — one registered by another program's
// simrun.Main — is refused by name, saying which program replays it,
// rather than as an invalid spec.
func parseReplay(file string, b []byte) (scenarios.Replay, error) {
	var head struct {
		Spec struct {
			Design string `json:"design"`
		} `json:"spec"`
	}
	if json.Unmarshal(b, &head) == nil && head.Spec.Design != "" {
		if _, ok := scenarios.LookupDesign(head.Spec.Design); !ok {
			var known []string
			for _, d := range scenarios.Designs() {
				known = append(known, d.Name)
			}
			return scenarios.Replay{}, fmt.Errorf("%s: the run used design %q, which this program does not have (it has: %s). "+
				"Replay it with the program that registers that design (its main calls simrun.Main with it)",
				file, head.Spec.Design, strings.Join(known, ", "))
		}
	}
	r, err := scenarios.ParseReplay(b)
	if err != nil {
		return scenarios.Replay{}, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}
