package simrun

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/scenarios"
)

func cmdList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listMutants := fs.Bool("mutants", false, "list the planted bugs instead")
	listMarks := fs.Bool("marks", false, "list the coverage marks (the protocol corners sweep -coverage tallies) instead")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simrun list: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if *listMutants {
		fmt.Fprintln(tw, "MUTANT\tDESCRIPTION")
		for _, m := range mutants.Mutants() {
			fmt.Fprintf(tw, "%s\t%s\n", m.Name, m.Description)
		}
		tw.Flush()
		return exitPass
	}
	if *listMarks {
		fmt.Fprintln(tw, "MARK\tWHERE\tHIT WHEN")
		for _, m := range coverage.All() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", m, m.Where(), m.Doc())
		}
		tw.Flush()
		return exitPass
	}
	fmt.Fprintln(tw, "SCENARIO\tEXPECT\tDESCRIPTION")
	for _, s := range scenarios.Builtin() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Expect, s.Description)
	}
	tw.Flush()
	return exitPass
}
