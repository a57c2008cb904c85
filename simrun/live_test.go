package simrun

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLiveBadFlags: every bad invocation of simrun live exits 2 and says
// what to fix, before anything is started.
func TestLiveBadFlags(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no binary anywhere: nothing could start
	badNode := filepath.Join(t.TempDir(), "bad-node.json")
	spec := `{"version": 1, "name": "bad-node", "description": "aims at a server no target has", "expect": {"verdict": "pass"},
  "design": "replicated", "replicas": 3, "store": {}, "latency_min": "500µs", "latency_mean": "1ms", "latency_max": "5ms",
  "clients": [{"name": "a", "resource": "r", "ttl": "1s", "cycles": 1}],
  "faults": [{"at": "1s", "kind": "pause", "node": "@nosuch", "duration": "100ms"}], "duration": "2s", "step_limit": 100000}`
	if err := os.WriteFile(badNode, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"live", "-scenario", "kleppmann-gc-pause"}, "or -target-file FILE is required"},
		{[]string{"live", "-target", "reference", "-target-file", "x.json", "-scenario", "kleppmann-gc-pause"}, "exclude each other"},
		{[]string{"live", "-target-file", "no-such.json", "-scenario", "kleppmann-gc-pause"}, "-target-file"},
		{[]string{"live", "-target", "lockd", "-spec", badNode}, `unknown node "@nosuch"`},
		{[]string{"live", "-target", "nope", "-scenario", "kleppmann-gc-pause"}, `unknown -target "nope"`},
		{[]string{"live", "-target", "reference"}, "scenario"},
		{[]string{"live", "-target", "reference", "-scenario", "no-such"}, "no-such"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "-duration", "5ms"}, "-duration"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "-replay", "x.json"}, "-replay carries its scenario"},
		{[]string{"live", "-replay", "x.json", "-seed", "7"}, "leave -seed and -duration out"},
		{[]string{"live", "-replay", "x.json", "-duration", "30s"}, "leave -seed and -duration out"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "-opt", "novalue"}, "key=value"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "extra"}, "unexpected argument"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "-opt", "bogus=1"}, "-opt bogus: the target takes none"},
		{[]string{"live", "-target", "etcd-mutex", "-scenario", "kleppmann-gc-pause", "-opt", "fenced=true"}, "-opt fenced: the target takes prefix"},
		{[]string{"live", "-target", "reference", "-scenario", "kleppmann-gc-pause", "-bin", t.TempDir()}, "go build"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %s)", c.args, code, exitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: stderr %q lacks %q", c.args, errb.String(), c.want)
		}
	}
}
