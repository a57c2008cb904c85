// Command detlint is fencesim's determinism lint as a program, for a design
// that is to run inside the simulator. It runs standalone,
//
//	detlint ./mydesign/...
//
// or as a vet tool:
//
//	go install github.com/fencesim/fencesim/cmd/detlint
//	go vet -vettool=$(which detlint) ./mydesign/...
//
// Either way it exits non-zero and names file, line and rule for every
// finding. The checks and the escape hatch (//detlint:sorted on a map range
// proven order-insensitive) are documented in package detlint, which also
// offers them as a test helper (detlint.Check).
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/fencesim/fencesim/detlint"
)

// singlechecker, not unitchecker: it serves both uses, running standalone
// on package patterns and switching to vet's protocol when go vet hands it
// a .cfg file.
func main() { singlechecker.Main(detlint.Analyzer) }
