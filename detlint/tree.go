package detlint

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Report is what [Lint] found under a set of paths.
type Report struct {
	Findings []Finding
	Files    int      // non-test .go files parsed
	Paths    []string // listed paths that exist
	Missing  []string // listed paths that do not exist
	Errs     []error  // parse and I/O errors: a file that does not parse is not shown deterministic
}

// Lint runs the checks on every non-test .go file under the given paths,
// each relative to root (or absolute), read as the go command reads
// patterns: "dir" is the files of that directory, "dir/..." also those of
// every directory below it, so subpackages are covered as soon as they
// appear. A path ending in .go is that one file, so part of a package can
// be held to the contract while the rest (a CLI, a sweep driving
// goroutines) is not. Below a "/...", directories the go tool ignores
// (testdata, names starting with "." or "_") and nested modules are
// skipped. With no paths, root's own files are checked. Positions are
// reported relative to root.
func Lint(root string, paths ...string) Report {
	var res Report
	if len(paths) == 0 {
		paths = []string{"."}
	}
	fset := token.NewFileSet()
	lint := func(path string) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			rel = path
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			// A file that does not parse cannot be shown to be
			// deterministic; lint what was recovered and report.
			res.Errs = append(res.Errs, fmt.Errorf("parse: %w", err))
		}
		if f != nil {
			res.Files++
			res.Findings = append(res.Findings, LintFile(fset, f)...)
		}
		return nil
	}
	for _, p := range paths {
		recursive := p == "..." || strings.HasSuffix(p, "/...")
		top := filepath.FromSlash(strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/"))
		if top == "" {
			top = "."
		}
		if !filepath.IsAbs(top) {
			top = filepath.Join(root, top)
		}
		info, err := os.Stat(top)
		if errors.Is(err, fs.ErrNotExist) {
			res.Missing = append(res.Missing, p)
			continue
		}
		if err != nil {
			res.Errs = append(res.Errs, err)
			continue
		}
		res.Paths = append(res.Paths, p)
		if !info.IsDir() {
			if !strings.HasSuffix(top, ".go") || strings.HasSuffix(top, "_test.go") {
				res.Errs = append(res.Errs, fmt.Errorf("%s is neither a directory nor a non-test .go file", p))
				continue
			}
			if err := lint(top); err != nil {
				res.Errs = append(res.Errs, err)
			}
			continue
		}
		err = filepath.WalkDir(top, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := e.Name()
			if e.IsDir() {
				if path == top {
					return nil
				}
				if !recursive {
					return filepath.SkipDir
				}
				if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
				return nil
			}
			if !e.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			return lint(path)
		})
		if err != nil {
			res.Errs = append(res.Errs, err)
		}
	}
	return res
}

// Check is the test helper for a design's own test: it lints the paths,
// relative to the test's working directory (its package directory), as
// [Lint] does, and fails t on every finding, on any error, on a path that
// does not exist and when nothing was checked — a gate that checks nothing
// must not pass. With no paths it checks the package directory; "./..."
// takes the directories below it too:
//
//	func TestDeterministic(t *testing.T) { detlint.Check(t) }
func Check(t testing.TB, paths ...string) {
	t.Helper()
	res := Lint(".", paths...)
	for _, p := range res.Missing {
		t.Errorf("detlint: %s does not exist", p)
	}
	for _, err := range res.Errs {
		t.Errorf("detlint: %v", err)
	}
	if res.Files == 0 {
		t.Errorf("detlint: no non-test .go file under %v; nothing was checked", paths)
	}
	for _, f := range res.Findings {
		t.Errorf("%s", f)
	}
}
