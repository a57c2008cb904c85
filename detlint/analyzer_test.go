package detlint_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencesim/fencesim/detlint"
)

// TestLintOnPlanted: Lint finds the planted read and nothing
// else (the marked map range and the test file are not findings).
func TestLintOnPlanted(t *testing.T) {
	res := detlint.Lint("testdata/planted")
	require.Empty(t, res.Errs)
	require.Equal(t, 2, res.Files, "planted.go and clean.go; the _test.go file is not judged")
	require.Len(t, res.Findings, 1)
	f := res.Findings[0]
	require.Equal(t, "planted.go", f.Pos.Filename)
	require.Equal(t, 12, f.Pos.Line)
	require.Equal(t, detlint.RuleWallClock, f.Rule)
}

// TestCheckFailsAUserTest: Check fails the test it is given on a finding,
// on a missing path and when nothing was checked, and passes clean code.
func TestCheckFailsAUserTest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		fail  bool
	}{
		{"planted package", []string{"testdata/planted"}, true},
		{"planted file", []string{"testdata/planted/planted.go"}, true},
		{"clean file", []string{"testdata/planted/clean.go"}, false},
		{"missing path", []string{"testdata/nosuch"}, true},
		{"nothing to check", []string{"testdata/planted/planted_test.go"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			detlint.Check(rec, tc.paths...)
			require.Equal(t, tc.fail, rec.failed, "errors: %q", rec.errs)
		})
	}
}

// recordingTB records Check's failures instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
	errs   []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed = true
	r.errs = append(r.errs, format)
}

// TestVettool proves the go vet path a user takes: cmd/detlint built and
// handed to go vet -vettool exits non-zero and names the planted
// time.Now; the same binary run standalone agrees; on the clean file alone
// vet passes. The planted package is copied into its own module so that the
// go command sees nothing of fencesim.
func TestVettool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/detlint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "detlint")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/fencesim/fencesim/cmd/detlint")
	built, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", built)

	mod := filepath.Join(tmp, "planted")
	require.NoError(t, os.MkdirAll(mod, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/planted\n\ngo 1.21\n"), 0o644))
	for _, name := range []string{"planted.go", "clean.go", "planted_test.go"} {
		src, err := os.ReadFile(filepath.Join("testdata", "planted", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(mod, name), src, 0o644))
	}
	run := func(name string, args ...string) (string, int) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return string(out), 0
	}

	out, code := run("go", "vet", "-vettool="+bin, "./...")
	require.NotZero(t, code, "go vet passed the planted time.Now:\n%s", out)
	require.Contains(t, out, "planted.go:12:")
	require.Contains(t, out, "time.Now")
	require.Contains(t, out, "[wall-clock]")
	require.NotContains(t, out, "planted_test.go", "test files are not judged")
	require.NotContains(t, out, "clean.go")

	out, code = run(bin, "./...")
	require.NotZero(t, code, "standalone detlint passed the planted time.Now:\n%s", out)
	require.Contains(t, out, "planted.go:12:")

	// The clean half alone, as its own package, passes vet.
	require.NoError(t, os.Remove(filepath.Join(mod, "planted.go")))
	require.NoError(t, os.Remove(filepath.Join(mod, "planted_test.go")))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "lease.go"),
		[]byte("package planted\n\nimport \"time\"\n\ntype Lease struct{ Until time.Time }\n"), 0o644))
	out, code = run("go", "vet", "-vettool="+bin, "./...")
	require.Zero(t, code, "go vet failed clean code:\n%s", out)
	require.False(t, strings.Contains(out, "detlint"), "unexpected output:\n%s", out)
}

// TestLintPatterns: "dir" is one directory, "dir/..." the tree below it.
func TestLintPatterns(t *testing.T) {
	require.Equal(t, 0, detlint.Lint("testdata").Files, "testdata holds no .go file of its own")
	require.Empty(t, detlint.Lint(".", "./...").Findings, "testdata (and its planted finding) is skipped below a /...")
	require.Equal(t, 2, detlint.Lint(".", "testdata/...").Files, "a path named explicitly is not skipped")
	require.Equal(t, 2, detlint.Lint("testdata", "./...").Files)
	require.Equal(t, 2, detlint.Lint("testdata", "planted").Files)
	require.Equal(t, 1, detlint.Lint("testdata", "planted/clean.go").Files)
}
