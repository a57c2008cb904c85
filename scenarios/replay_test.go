package scenarios

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReplayReproducesEveryBuiltin: a replay file of any run, read back,
// runs to the same trace hash and verdict.
func TestReplayReproducesEveryBuiltin(t *testing.T) {
	for _, spec := range Builtin() {
		res, err := Run(spec, 11, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseReplay(NewReplay(res).Marshal())
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		again, err := RunPlan(r.Plan(), RunOptions{})
		if err != nil || again.TraceHash != res.TraceHash || again.Verdict.Kind != res.Verdict.Kind {
			t.Fatalf("%s: replay gave %016x %s, want %016x %s (%v)", spec.Name, again.TraceHash, again.Verdict.Kind, res.TraceHash, res.Verdict.Kind, err)
		}
	}
}

// redigest rewrites b's digest to match its fields: a file as another
// program, or a careless tool, would have written it.
func redigest(t *testing.T, b string) string {
	t.Helper()
	var r Replay
	if err := json.Unmarshal([]byte(b), &r); err != nil {
		t.Fatalf("redigest: %v", err)
	}
	return string(r.Marshal()) // Marshal digests what r holds now
}

// without returns b compacted, its keys sorted, without the top-level
// field name.
func without(t *testing.T, b, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, name)
	out, _ := json.Marshal(m)
	return string(out)
}

func TestParseReplayRejectsBadFiles(t *testing.T) {
	spec, _ := Lookup("swarm")
	res, _ := Run(spec, 3, RunOptions{})
	good := string(NewReplay(res).Marshal())
	cases := []struct{ name, in, want string }{
		{"empty", "", "replay file"},
		{"truncated", good[:len(good)/2], "replay file"},
		{"not json", "hello", "replay file"},
		{"unknown field", strings.Replace(good, `"seed"`, `"sede": 1, "seed"`, 1), "unknown field"},
		{"format", strings.Replace(good, `"format": 2`, `"format": 7`, 1), "format 7 is not supported"},
		{"unknown node", redigest(t, strings.Replace(good, `"node": "c1"`, `"node": "zz"`, 1)), "unknown node"},
		{"trailing", good + "{}", "trailing data"},
		{"missing hash", strings.Replace(good, `"trace_hash"`, `"trace_hash_x"`, 1), "unknown field"},
		{"no digest", without(t, good, "digest"), "digest are required"},
	}
	for _, c := range cases {
		if _, err := ParseReplay([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := ParseReplay([]byte(good)); err != nil {
		t.Fatalf("the unedited file must parse: %v", err)
	}
}

// TestParseReplayRefusesEditedFiles: a replay file edited after it was
// written — any field of the plan or of the recorded outcome — is refused
// as modified, naming the field; reformatting it is not an edit. (Without
// the digest, an edited schedule or hash ran and was reported as
// nondeterminism.)
func TestParseReplayRefusesEditedFiles(t *testing.T) {
	spec, _ := Lookup("swarm")
	res, _ := Run(spec, 3, RunOptions{})
	r := NewReplay(res)
	good := string(r.Marshal())
	cases := []struct{ field, from, to string }{
		{"seed", `"seed": 3`, `"seed": 4`},
		{"schedule", `"node": "c1"`, `"node": "c2"`},
		{"spec", `"duration": "`, `"duration": "1`},
		{"options", `"probability": 0`, `"probability": 1`},
		{"trace_hash", `"trace_hash": "` + r.TraceHash, `"trace_hash": "0123456789abcdef`},
		{"verdict", "\"verdict\": \"pass\",\n  \"trace_hash\"", "\"verdict\": \"unknown\",\n  \"trace_hash\""},
		{"events", `"events": `, `"events": 1`},
		{"program", `"program": "` + ProgramVersion, `"program": "fencesim-0.1`},
	}
	for _, c := range cases {
		edited := strings.Replace(good, c.from, c.to, 1)
		if edited == good {
			t.Fatalf("%s: %q is not in the file", c.field, c.from)
		}
		_, err := ParseReplay([]byte(edited))
		if err == nil || !strings.Contains(err.Error(), "modified after it was written: the field \""+c.field+"\"") ||
			!strings.Contains(err.Error(), "write a fresh one with: simrun run -scenario swarm -seed ") {
			t.Errorf("%s edited: got %v", c.field, err)
		}
	}
	if _, err := ParseReplay([]byte(without(t, good, "options"))); err == nil || !strings.Contains(err.Error(), `the field "options" was removed`) {
		t.Errorf("a field removed: got %v", err)
	}
	// Compacted, its keys in another order: reformatted, not edited.
	if _, err := ParseReplay([]byte(without(t, good, ""))); err != nil {
		t.Errorf("a reformatted file: %v", err)
	}
	// A format-1 file has no digest: refused with the command for a fresh one.
	old := strings.Replace(strings.Replace(good, `"format": 2`, `"format": 1`, 1), `"digest"`, `"_"`, 1)
	old = old[:strings.Index(old, `,
  "_"`)] + "\n}\n"
	if _, err := ParseReplay([]byte(old)); err == nil || !strings.Contains(err.Error(), "format 1 carries no digest") ||
		!strings.Contains(err.Error(), "simrun run -scenario swarm -seed 3") {
		t.Errorf("a format-1 file: got %v", err)
	}
}

// FuzzParseReplay: no input makes the replay parser panic.
func FuzzParseReplay(f *testing.F) {
	spec, _ := Lookup("kleppmann-gc-pause")
	res, _ := Run(spec, 1, RunOptions{})
	f.Add(NewReplay(res).Marshal())
	spec, _ = Lookup("swarm")
	res, _ = Run(spec, 2, RunOptions{})
	f.Add(NewReplay(res).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReplay(b)
		if err == nil && r.Format != ReplayFormat {
			t.Fatalf("accepted format %d", r.Format)
		}
	})
}

// TestIsBuiltin: a built-in, with a planted bug or not, runs by name; a
// spec of the same name that differs, or of another name, does not.
func TestIsBuiltin(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	mutant := spec
	mutant.Mutant = "no-fence-check"
	edited := spec
	edited.Duration++
	renamed := spec
	renamed.Name = "mine"
	for _, c := range []struct {
		name string
		s    Spec
		want bool
	}{{"built-in", spec, true}, {"with a mutant", mutant, true}, {"edited", edited, false}, {"renamed", renamed, false}} {
		if got := IsBuiltin(c.s); got != c.want {
			t.Errorf("%s: IsBuiltin %v, want %v", c.name, got, c.want)
		}
	}
}
