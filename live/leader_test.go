package live

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// An @leader fault due while an election is under way waits for the
// election to end (a leader crash the schedule made a moment ago), and
// the schedule's later operations slip by as long.
func TestLeaderFaultWaitsForAnElection(t *testing.T) {
	asked := 0
	r := &run{layout: Layout{Leader: func(context.Context) (string, bool) {
		asked++
		return "n2", asked > 3 // three probes find no leader
	}}}
	node, why := r.resolve(context.Background(), nemesis.Leader)
	if why != "" || node != "n2" {
		t.Fatalf("resolve(@leader) = %q, %q; want n2 after the election", node, why)
	}
	if w := r.leaderWaited(); w < 100*time.Millisecond {
		t.Fatalf("waited %v for three empty probes 50ms apart; want at least 100ms", w)
	}
	if w := r.leaderWaited(); w != 0 {
		t.Fatalf("a second leaderWaited = %v; want 0 (forgotten)", w)
	}
}

// With no leader at all, @leader gives up within leaderWait with a reason.
func TestLeaderFaultGivesUpWithoutALeader(t *testing.T) {
	r := &run{layout: Layout{Leader: func(context.Context) (string, bool) { return "", false }}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	node, why := r.resolve(ctx, nemesis.Leader)
	if node != "" || !strings.Contains(why, "no server led") {
		t.Fatalf("resolve(@leader) with no leader = %q, %q; want no node and why", node, why)
	}
}
