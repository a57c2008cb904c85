package live

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// TestEverySwarmPlanPausesAHolderAtItsWrite: every live swarm plan, for
// every target, every built-in swarm at its own length and at 30 s, and
// seeds 1..100, holds a holder paused at its write for longer than the
// target's lease plus a TTL (etcd's lease of a 500 ms TTL lives 1.5 s),
// ending within the safety phase — a trigger the live runner arms (not
// one it lists as not applicable). Without it, seeds 1, 2 and 5 of the
// swarm paused no client at all, and etcd-mutex (unsafe without fencing)
// passed them. No process runs: the plans are drawn and judged.
func TestEverySwarmPlanPausesAHolderAtItsWrite(t *testing.T) {
	var swarms []scenario.Spec
	for _, s := range scenario.Builtin() {
		if s.Swarm {
			for _, d := range []scenario.Duration{s.Duration, scenario.Duration(30 * time.Second)} {
				s.Duration = d
				swarms = append(swarms, s)
			}
		}
	}
	if len(swarms) < 4 {
		t.Fatalf("%d built-in swarm specs: want swarm and lockd-swarm", len(swarms)/2)
	}
	targets := Targets()
	for _, info := range targets {
		for _, spec := range swarms {
			ttl := spec.Cluster().TTL
			lease := info.leaseLife(ttl)
			for seed := uint64(1); seed <= 100; seed++ {
				p, _, err := NewPlan(spec, seed, info)
				if err != nil {
					t.Fatalf("%s, %s, seed %d: %v", info.Name, spec.Name, seed, err)
				}
				r := &run{opt: Options{Plan: p}, spec: p.Spec, info: info}
				found := false
				for _, op := range p.Installed() {
					if nemesis.IsStaleHolder(op, lease, ttl) && time.Duration(op.At+op.Within+op.Duration) <= time.Duration(spec.Duration) {
						if why := r.triggerNotApplicable(op); why != "" {
							t.Fatalf("%s, %s, seed %d: %s is not applicable: %s", info.Name, spec.Name, seed, op, why)
						}
						found = true
					}
				}
				if !found {
					t.Fatalf("%s, %s over %v, seed %d: no holder is paused at its write past a lease of %v and a TTL (%d operations)",
						info.Name, spec.Name, time.Duration(spec.Duration), seed, lease, len(p.Schedule))
				}
			}
		}
	}
	if etcd := etcdLeaseLife(500 * time.Millisecond); etcd != 1500*time.Millisecond {
		t.Errorf("etcd's lease of a 500ms TTL lives %v, want 1.5s (a whole second, and a 500ms expiry check)", etcd)
	}
}
