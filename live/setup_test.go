package live

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/internal/freeport"
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

// TestFreeBelowEphemeral: Free draws its ports below the kernel's
// ephemeral range (no connect can take one between its release and the
// server's bind), holds each until release, and a server can then bind
// it.
func TestFreeBelowEphemeral(t *testing.T) {
	lo := freeport.EphemeralLow()
	if lo-freeport.Low < 1000 {
		t.Skipf("no room below the ephemeral range (it starts at %d)", lo)
	}
	s := &Setup{}
	var addrs []string
	for range 5 {
		a, err := s.Free()
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(a)
		if p, _ := strconv.Atoi(ps); p < freeport.Low || p >= lo {
			t.Errorf("Free gave %s, want a port in [%d, %d)", a, freeport.Low, lo)
		}
		if ln, err := net.Listen("tcp", a); err == nil {
			ln.Close()
			t.Errorf("%s was not held", a)
		}
		addrs = append(addrs, a)
	}
	s.release()
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		ln.Close()
	}
}
