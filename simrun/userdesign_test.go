package simrun

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs"
	"github.com/fencesim/fencesim/scenarios"
)

// ownlockReplay is a replay file written by examples/ownlock's
// ownlock-simrun (a hunt of its server-crash scenario): its design,
// "ownlock", is registered there and not here.
//
//go:embed testdata/ownlock-server-crash-seed1.json
var ownlockReplay []byte

// TestReplayRefusesADesignItLacks: replay and shrink of a file whose run
// used a design this program does not have name the design and say which
// program replays it (exit 2), rather than calling the spec invalid.
func TestReplayRefusesADesignItLacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ownlock.json")
	if err := os.WriteFile(path, ownlockReplay, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"replay", "shrink"} {
		code, out, errs := simrun(cmd, path)
		if code != exitUsage || !strings.Contains(errs, `the run used design "ownlock", which this program does not have`) ||
			!strings.Contains(errs, "simrun.Main") {
			t.Errorf("%s: exit %d\n%s%s", cmd, code, out, errs)
		}
	}
}

// userDesign is the reference under a name of its own: a design this
// package's simrun does not ship, as a user's would be.
type userDesign struct{ lockservice.Design }

func (d userDesign) Info() lockservice.DesignInfo {
	i := d.Design.Info()
	i.Name = "users-lock"
	return i
}

// otherDesign claims the same name with another type.
type otherDesign struct{ userDesign }

// TestRunRegistersDesigns: Run registers a user's designs (again and again
// with the same type), so a spec naming one runs, and its repro line names
// this program rather than the stock simrun, which lacks the design; a
// name taken by another type is a usage error.
func TestRunRegistersDesigns(t *testing.T) {
	ref, _ := scenarios.LookupDesign(designs.DesignReplicated)
	spec, _ := scenarios.Lookup("kleppmann-gc-pause")
	spec.Name, spec.Design = "users-pause", "users-lock"
	spec.Mutant = "store-no-fence" // a failing run, so the repro line shows
	file := filepath.Join(t.TempDir(), "users.json")
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var out, errs strings.Builder
		code := Run([]string{"sweep", "-spec", file, "-seeds", "1..3", "-progress", "none"}, &out, &errs, userDesign{ref})
		prog := filepath.Base(os.Args[0])
		if code != exitViolation || !strings.Contains(errs.String()+out.String(), "reproduce: "+prog+" run -spec "+file+" -seed 1 -mutant store-no-fence") {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
		}
	}
	var out, errs strings.Builder
	if code := Run([]string{"list"}, &out, &errs, otherDesign{userDesign{ref}}); code != exitUsage || !strings.Contains(errs.String(), `design "users-lock" is already taken`) {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
}
