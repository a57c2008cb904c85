package simrun

import (
	"bytes"
	"strings"
	"testing"
)

// TestLiveBadFlags: every bad invocation of simrun live exits 2 and says
// what to fix, before anything is started.
func TestLiveBadFlags(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no binary anywhere: nothing could start
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"live", "-scenario", "kleppmann-gc-pause"}, "-target is required"},
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
