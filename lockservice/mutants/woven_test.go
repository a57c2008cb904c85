package mutants

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mutantCatalogue are the files and packages allowed to name planted bugs,
// relative to lockservice: the catalogue (bugs) and this package, the design
// contract, whose DesignRun carries the run's Mutant, and the built-in
// designs, which inject it.
var mutantCatalogue = map[string]bool{"mutants": true, "bugs": true, "designs": true, "design.go": true}

// mutantName matches a planted bug's constant or the Mutant type.
var mutantName = regexp.MustCompile(`\bMut(ant|[A-Z])\w*`)

// TestReferenceNamesNoMutant: the lock service's code (the reference, Raft,
// the store, the client, Redlock and the contract, tests aside) never names a planted bug, in code or in comments: every
// bug is values for its injection points (variant.go), set by the
// catalogue. A branch on a mutant creeping back into the reference fails
// here.
func TestReferenceNamesNoMutant(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if d.IsDir() && (d.Name() == "testdata" || mutantCatalogue[rel]) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || mutantCatalogue[rel] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && mutantName.MatchString(id.Name) {
				t.Errorf("%s: the reference names %s: inject it instead (mutants.go)", fset.Position(id.Pos()), id.Name)
			}
			return true
		})
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if m := mutantName.FindString(c.Text); m != "" {
					t.Errorf("%s: a comment of the reference names %s", fset.Position(c.Pos()), m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files: is the walk looking at the package?", checked)
	}
}
