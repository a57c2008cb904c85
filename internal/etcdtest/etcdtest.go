// Package etcdtest starts a real three-member etcd-server cluster for
// tests (the members of etcdcluster.Plan, as the live targets run them:
// 500ms election timeout, 50ms heartbeats), on free loopback ports, in a
// temporary directory, killed when the test ends.
package etcdtest

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/etcdcluster"
)

// Start returns the running members once each reports healthy (at most
// 30s). Without etcd the test is skipped, except in CI (CI set), where
// it fails: the etcd tests must not silently vanish there.
func Start(t testing.TB) []etcdcluster.Member {
	t.Helper()
	bin, err := etcdcluster.Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; CI is set: .ci/run installs etcd-server", err)
		}
		t.Skipf("skipping the real-etcd test: %v", err)
	}
	var ports []int
	for range 6 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close() // the member binds it; a thief shows as a member not healthy
	}
	dir := t.TempDir()
	plan, err := etcdcluster.Plan(func(i int) string { return filepath.Join(dir, "etcd-"+strconv.Itoa(i)) }, ports[:3], ports[3:],
		etcdcluster.Options{ElectionTimeout: 500 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range plan {
		cmd := exec.Command(bin, m.Args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for _, m := range plan {
		for {
			err := etcdcluster.Healthy(ctx, hc, m.ClientURL)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("etcd member %s not healthy within 30s: %v", m.Name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return plan
}
