package live

import (
	"errors"
	"strings"
	"testing"
)

// TestMissingBinaryHints: the error for a missing executable says how to
// get that one — a package for the outside servers, the etcd client's own
// module — not a ./cmd directory that does not exist.
func TestMissingBinaryHints(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, want := range map[string]string{
		"redis-server":          "apt-get install redis-server",
		"etcd":                  "apt-get install etcd-server",
		"fencesim-live-etcd":    "go -C live/etcdclient build -o DIR/fencesim-live-etcd .",
		"fencesim-live-redlock": "go build -o DIR ./cmd/fencesim-live-redlock",
	} {
		_, err := findBin([]string{t.TempDir()}, name)
		if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrNoBinary saying %q", name, err, want)
		}
	}
}
