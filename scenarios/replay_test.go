package scenarios

import (
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
		again, err := r.Plan().Run(RunOptions{})
		if err != nil || again.TraceHash != res.TraceHash || again.Verdict.Kind != res.Verdict.Kind {
			t.Fatalf("%s: replay gave %016x %s, want %016x %s (%v)", spec.Name, again.TraceHash, again.Verdict.Kind, res.TraceHash, res.Verdict.Kind, err)
		}
	}
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
		{"format", strings.Replace(good, `"format": 1`, `"format": 7`, 1), "format 7 is not supported"},
		{"unknown node", strings.Replace(good, `"node": "c1"`, `"node": "zz"`, 1), "unknown node"},
		{"trailing", good + "{}", "trailing data"},
		{"missing hash", strings.Replace(good, `"trace_hash"`, `"trace_hash_x"`, 1), "unknown field"},
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
