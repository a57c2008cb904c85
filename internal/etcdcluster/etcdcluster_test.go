package etcdcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanRefusesMismatchedPorts(t *testing.T) {
	for _, c := range []struct{ client, peer []int }{{nil, nil}, {[]int{1, 2}, []int{3}}} {
		if _, err := Plan(func(int) string { return t.TempDir() }, c.client, c.peer, Options{}); err == nil || !strings.Contains(err.Error(), "one of each per member") {
			t.Errorf("Plan(%v, %v): got %v, want an error saying what to give", c.client, c.peer, err)
		}
	}
}

func TestPlanAdvertisesThePeerURLItIsGiven(t *testing.T) {
	plan, err := Plan(func(i int) string { return fmt.Sprintf("/d/etcd-%d", i) }, []int{1, 2}, []int{3, 4}, Options{
		ElectionTimeout: 500 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		AdvertisePeer: func(i int) string { return []string{"http://127.0.0.1:13", "http://127.0.0.1:14"}[i] },
	})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan[1].Args, " ")
	for _, want := range []string{
		"--listen-peer-urls http://127.0.0.1:4", "--initial-advertise-peer-urls http://127.0.0.1:14",
		"--initial-cluster m0=http://127.0.0.1:13,m1=http://127.0.0.1:14",
		"--election-timeout 500", "--heartbeat-interval 50", "--data-dir /d/etcd-1",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("member 1's args %q lack %q", args, want)
		}
	}
}

// TestPlannedClusterBecomesHealthy starts the three members of a plan
// and waits until each answers /health: the flags Plan writes are ones
// the installed etcd accepts and form a cluster. It skips without etcd,
// except in CI.
func TestPlannedClusterBecomesHealthy(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; CI is set: .ci/run installs etcd-server", err)
		}
		t.Skipf("skipping the real-etcd test: %v", err)
	}
	ports := freePorts(t, 6)
	dir := t.TempDir()
	plan, err := Plan(func(i int) string { return fmt.Sprintf("%s/etcd-%d", dir, i) }, ports[:3], ports[3:], Options{ElectionTimeout: 500 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond})
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
	hc := &http.Client{Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range plan {
		for {
			err := Healthy(ctx, hc, m.ClientURL)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("member %s not healthy within 30s: %v", m.Name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if v := Version(bin); v == "" || !slices.Contains([]byte(v), '.') {
		t.Errorf("Version = %q, want a dotted version", v)
	}
}

func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
