package nemesis

import (
	"reflect"
	"testing"
	"time"
)

// TestStaleHolders: one pause per 5 s of the safety phase (at least
// one; or one per lease and five TTLs, if longer), each a trigger on the write moment aimed at its subject, longer
// than the world's lease plus a TTL, armed and ended within its own
// stretch of the phase; the same stream draws the same pauses, a cluster
// without clients or a phase too short for one gets none.
func TestStaleHolders(t *testing.T) {
	for _, tc := range []struct {
		c             Cluster
		safety, lease time.Duration
		want          int
	}{
		{tiny, 8 * time.Second, 0, 1},
		{tiny, 30 * time.Second, 1500 * ms, 6},
		{replicated, 25 * time.Second, 0, 5},
		{singleNode, 60 * time.Second, 3 * time.Second, 4}, // stretches of 15s: the lease and five TTLs
		{tiny, 600 * ms, 0, 0},                             // no room for a pause past the lease and a window
		{Cluster{Servers: []string{"n1"}}, safety, 0, 0},   // no clients
	} {
		for seed := uint64(1); seed <= 50; seed++ {
			s := StaleHolders(rng(seed), tc.c, tc.safety, tc.lease)
			if len(s) != tc.want {
				t.Fatalf("%v over %v, seed %d: %d pauses %v, want %d", tc.c.Clients, tc.safety, seed, len(s), s, tc.want)
			}
			if !reflect.DeepEqual(s, StaleHolders(rng(seed), tc.c, tc.safety, tc.lease)) {
				t.Fatalf("seed %d: two draws from one stream differ", seed)
			}
			if err := s.ValidateFor(tc.c); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for i, op := range s {
				stretch := tc.safety / time.Duration(tc.want)
				from, to := time.Duration(i)*stretch, time.Duration(i+1)*stretch
				switch {
				case !IsStaleHolder(op, tc.lease, tc.c.TTL):
					t.Errorf("seed %d: %s is not a holder paused at its write past a lease of %v and a TTL of %v", seed, op, tc.lease, tc.c.TTL)
				case time.Duration(op.At) < from || op.latest()+time.Duration(op.Duration) > to:
					t.Errorf("seed %d: %s (at %v) leaves its stretch %v..%v", seed, op, time.Duration(op.At), from, to)
				case op.Within < Duration(tc.c.TTL):
					t.Errorf("seed %d: %s is armed for less than a TTL", seed, op)
				}
			}
			if err := s.CheckUndone(tc.safety); err != nil {
				t.Errorf("seed %d: %v", seed, err)
			}
		}
	}
	short := Op{Kind: Pause, Node: Subject, When: MomentWrite, Within: Duration(time.Second), Duration: Duration(2 * time.Second)}
	if IsStaleHolder(short, 1500*ms, 500*ms) {
		t.Errorf("%s counts as past a lease of 1.5s and a TTL of 500ms", short)
	}
}
