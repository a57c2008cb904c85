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
	var slip time.Duration
	node, why := r.resolve(context.WithValue(context.Background(), leaderWaitKey{}, &slip), nemesis.Leader)
	if why != "" || node != "n2" {
		t.Fatalf("resolve(@leader) = %q, %q; want n2 after the election", node, why)
	}
	if slip < 100*time.Millisecond {
		t.Fatalf("the schedule slipped %v for three empty probes 50ms apart; want at least 100ms", slip)
	}
	// A trigger's resolution (a client's goroutine, no slip in its
	// context) slips nothing, and a wait that found no leader slips the
	// schedule as much as it waited.
	asked = 0
	if node, _ := r.resolve(context.Background(), nemesis.Leader); node != "n2" {
		t.Fatalf("resolve without a slip: %q", node)
	}
	none := &run{layout: Layout{Leader: func(context.Context) (string, bool) { return "", false }}}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), leaderWaitKey{}, &slip), 200*time.Millisecond)
	defer cancel()
	before := slip
	if node, _ := none.resolve(ctx, nemesis.Leader); node != "" || slip-before < 150*time.Millisecond {
		t.Fatalf("a wait for no leader: %q, slipped %v; want none, and the ~200ms waited", node, slip-before)
	}
}

// firesAt: a slipped operation comes as much later, never past the end of
// the safety phase; the final heal (at the end) and the liveness phase
// after it do not slip, so the liveness bound is whole.
func TestSlipNeverDelaysTheHeal(t *testing.T) {
	const end = 10 * time.Second
	for _, c := range []struct{ at, slip, want time.Duration }{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, time.Second, 3 * time.Second},
		{9500 * time.Millisecond, time.Second, end},
		{end, 3 * time.Second, end},
		{end + time.Second, time.Second, end + time.Second},
	} {
		if got := firesAt(c.at, c.slip, end); got != c.want {
			t.Errorf("firesAt(%v, slip %v) = %v, want %v", c.at, c.slip, got, c.want)
		}
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
