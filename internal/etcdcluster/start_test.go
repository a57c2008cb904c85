package etcdcluster_test

import (
	"testing"

	"github.com/fencesim/fencesim/internal/etcdtest"
)

// TestPlannedClusterBecomesHealthy starts the three members of a plan
// (etcdtest.Start) and waits until each answers /health: the flags Plan
// writes are ones the installed etcd accepts and form a cluster. It
// skips without etcd, except in CI.
func TestPlannedClusterBecomesHealthy(t *testing.T) {
	if members := etcdtest.Start(t); len(members) != 3 {
		t.Fatalf("%d members, want 3", len(members))
	}
}
