package etcdcluster

import (
	"fmt"
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

// TestVersion reads the installed etcd's version (the cluster Plan lays
// out is started and health-checked by every etcdtest.Start).
func TestVersion(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	if v := Version(bin); !strings.Contains(v, ".") {
		t.Errorf("Version = %q, want a dotted version", v)
	}
}
