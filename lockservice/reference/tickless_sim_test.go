package reference

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// traceEvents returns the instants of the trace's events on node that
// contain every one of what (after "node=<node> ").
func traceEvents(g *replicaGroup, node string, what ...string) []time.Duration {
	var out []time.Duration
	for line := range strings.Lines(g.trace.String()) {
		if !strings.Contains(line, " node="+node+" ") {
			continue
		}
		match := true
		for _, w := range what {
			match = match && strings.Contains(line, w)
		}
		if !match {
			continue
		}
		var step, s, us int64
		if _, err := fmt.Sscanf(line, "step=%d t=%d.%ds", &step, &s, &us); err != nil {
			panic(fmt.Sprintf("trace line %q: %v", line, err))
		}
		out = append(out, time.Duration(s)*time.Second+time.Duration(us)*time.Microsecond)
	}
	return out
}

// TestTicklessIdleGroupWakesForDeadlinesOnly: an idle group of five wakes
// its leader at its heartbeats (every 2 ticks) and its followers about
// once per election timeout (they find it moved by the heartbeats and
// sleep on), instead of every tick; nobody campaigns.
func TestTicklessIdleGroupWakesForDeadlinesOnly(t *testing.T) {
	g := newReplicaGroup(t, 5, groupOpts{seed: 3, net: fixedLatency(time.Millisecond), trace: true})
	lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
	from := g.w.Now()
	const idle = 10 * time.Second
	g.runTo(t, from+idle)
	if b := g.believers(); len(b) != 1 || b[lead] != term {
		t.Fatalf("the leader changed while idle: %v, want %d in term %d", b, lead, term)
	}
	tick := DefaultReplicaConfig(nil).TickInterval
	for _, id := range g.ids {
		var n int
		for _, at := range traceEvents(g, g.w.Name(id), "event=timer") {
			if at > from {
				n++
			}
		}
		limit := int(idle / (10 * tick)) // a follower: an election timeout at least
		if id == lead {
			limit = int(idle / (2 * tick)) // the leader: every heartbeat
		}
		if n > limit+1 {
			t.Errorf("%s (leader %v) woke %d times in %v idle, want at most %d (a ticker: %d)", g.w.Name(id), id == lead, n, idle, limit+1, idle/tick)
		}
		if n == 0 {
			t.Errorf("%s never woke in %v", g.w.Name(id), idle)
		}
	}
}

// TestTicklessPausedFollowerFiresItsDeadlineOnce: a replica alone (its
// peers crashed) campaigns every randomized election timeout, on the tick
// grid; paused across many of its deadlines, it campaigns once when it
// wakes — not once per missed deadline, and not a whole timeout later —
// and counts its next timeout from then.
func TestTicklessPausedFollowerFiresItsDeadlineOnce(t *testing.T) {
	const d = time.Millisecond
	g := newReplicaGroup(t, 3, groupOpts{seed: 5, net: fixedLatency(d), trace: true})
	g.w.Crash(1)
	g.w.Crash(2)
	const pauseAt, pause = 600 * time.Millisecond, 2 * time.Second
	g.w.At(pauseAt, "pause r0", func() { g.w.Pause(0, pause) })
	wake := pauseAt + pause
	g.runTo(t, wake+500*time.Millisecond)

	cfg := DefaultReplicaConfig(nil)
	minTimeout, maxTimeout := time.Duration(cfg.ElectionTick)*cfg.TickInterval, time.Duration(2*cfg.ElectionTick)*cfg.TickInterval
	campaigns := traceEvents(g, "r1", "from=r0", "MsgPreVote ") // sent d earlier
	var before, atWake, after []time.Duration
	for _, at := range campaigns {
		switch sent := at - d; {
		case sent <= pauseAt:
			before = append(before, sent)
		case sent == wake:
			atWake = append(atWake, sent)
		case sent < wake:
			t.Fatalf("a campaign sent at %v, during the pause", sent)
		default:
			after = append(after, sent)
		}
	}
	if len(before) < 3 {
		t.Fatalf("%d campaigns before the pause, want several: %v", len(before), campaigns)
	}
	prev := time.Duration(0)
	for _, at := range before {
		if gap := at - prev; gap < minTimeout || gap >= maxTimeout || gap%cfg.TickInterval != 0 {
			t.Errorf("campaign at %v, %v after the last: want whole ticks in [%v, %v)", at, gap, minTimeout, maxTimeout)
		}
		prev = at
	}
	if len(atWake) != 1 {
		t.Fatalf("%d campaigns at the wake-up %v, want exactly one (the deadline missed during the pause, once): all %v", len(atWake), wake, campaigns)
	}
	if len(after) == 0 || after[0]-wake < minTimeout || after[0]-wake >= maxTimeout {
		t.Errorf("next campaign after the wake-up at %v: want one election timeout later, in [%v, %v): %v", wake, wake+minTimeout, wake+maxTimeout, after)
	}
}

// TestTicklessPausedFollowerHearsItsLeaderFirst: a follower paused past
// its election timeout while its leader is alive gets the heartbeats that
// fell due during the pause before its timer (in their original order),
// so it wakes to a live leader and does not campaign.
func TestTicklessPausedFollowerHearsItsLeaderFirst(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 7, net: fixedLatency(time.Millisecond), trace: true})
	lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
	f := g.ids[(int(lead)+1)%3]
	g.w.Pause(f, time.Second)
	g.runTo(t, g.w.Now()+2*time.Second)
	if b := g.believers(); len(b) != 1 || b[lead] != term {
		t.Fatalf("the leader changed: %v, want %d in term %d", b, lead, term)
	}
	if pv := traceEvents(g, g.w.Name(lead), "from="+g.w.Name(f), "MsgPreVote "); len(pv) > 0 {
		t.Errorf("the paused follower campaigned at %v", pv)
	}
}

// TestTicklessPausedLeaderHeartbeatsOnce: a leader paused across fifty
// heartbeats sends one round when it wakes, then learns of the term its
// followers moved to meanwhile and steps down.
func TestTicklessPausedLeaderHeartbeatsOnce(t *testing.T) {
	const d = time.Millisecond
	g := newReplicaGroup(t, 3, groupOpts{seed: 11, net: fixedLatency(d), trace: true})
	lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
	pauseAt := g.w.Now()
	g.w.Pause(lead, time.Second)
	wake := pauseAt + time.Second
	g.runTo(t, wake+time.Second)
	var round int
	for _, id := range g.ids {
		for _, at := range traceEvents(g, g.w.Name(id), "from="+g.w.Name(lead), "MsgHeartbeat ") {
			if at == wake+d {
				round++
			}
		}
	}
	if round > len(g.ids)-1 {
		t.Errorf("%d heartbeats sent at the wake-up, want one round at most (%d)", round, len(g.ids)-1)
	}
	newLead, newTerm := g.awaitLeader(t, g.ids, term+1, wake+2*time.Second)
	if newLead == lead {
		t.Errorf("the paused leader %d leads term %d after waking", lead, newTerm)
	}
	if r := g.replica(lead); r == nil || r.Leader() != newLead {
		t.Errorf("the old leader does not follow %d", newLead)
	}
}
