package detlint

import (
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Analyzer runs the same checks as [Lint] in the standard analysis
// framework, so that the lint runs where Go's other analyzers run: under go
// vet (-vettool=$(which detlint), built from cmd/detlint), standalone, or in
// a driver of the user's choosing. It reports one diagnostic per finding,
// with the rule as its category, and skips _test.go files: tests drive a
// design from outside the loop.
//
// It does not use type information although the framework provides it: the
// checks are syntactic so that they give the same answer as [Lint] and
// [Check], which run on code that does not type-check yet.
var Analyzer = &analysis.Analyzer{
	Name: "detlint",
	Doc: "report code that breaks the determinism of a simulation: goroutines, channels, select, " +
		"sync, the machine's clock, global or crypto randomness, and unsorted ranges over maps",
	URL: "https://pkg.go.dev/github.com/fencesim/fencesim/detlint",
	Run: run,
}

func run(pass *analysis.Pass) (any, error) {
	for _, f := range pass.Files {
		if strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") {
			continue
		}
		for _, fd := range LintFile(pass.Fset, f) {
			pass.Report(analysis.Diagnostic{
				Pos:      fd.pos,
				Category: fd.Rule,
				Message:  fd.Message + " [" + fd.Rule + "]",
			})
		}
	}
	return nil, nil
}
