package scenario

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// replayed is p written to a replay file and read back.
func replayed(t *testing.T, p Plan) Plan {
	t.Helper()
	r := Replay{Program: ProgramVersion, Seed: p.Seed, Spec: p.Spec, Options: p.Options, Schedule: p.Schedule, Verdict: "pass", TraceHash: "0"}
	back, err := ParseReplay(r.Marshal())
	if err != nil {
		t.Fatalf("seed %d: %v", p.Seed, err)
	}
	return back.Plan()
}

// TestSwarmDrawsTokenOffsets: the swarm's plan carries the offset drawn
// from its seed (so a replay file keeps it), every boundary is drawn
// within 100 seeds, each offset lies just below its boundary, and a spec
// with its own offset keeps it.
func TestSwarmDrawsTokenOffsets(t *testing.T) {
	swarm, _ := Lookup("swarm")
	seen := map[uint64]bool{}
	for seed := uint64(1); seed <= 100; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		o := p.Spec.TokenOffset
		if o != DrawTokenOffset(seed) {
			t.Fatalf("seed %d: plan offset %d, drawn %d", seed, o, DrawTokenOffset(seed))
		}
		found := false
		for _, b := range TokenOffsets {
			if o == b || (b > 0 && o < b && b-o <= tokenMargin) {
				seen[b], found = true, true
			}
		}
		if !found {
			t.Errorf("seed %d: offset %d is near no boundary", seed, o)
		}
		if again := replayed(t, p); again.Spec.TokenOffset != o {
			t.Errorf("seed %d: the replay's plan has offset %d, want %d", seed, again.Spec.TokenOffset, o)
		}
	}
	if len(seen) != len(TokenOffsets) {
		t.Errorf("seeds 1..100 drew offsets near %d of the %d boundaries", len(seen), len(TokenOffsets))
	}
	own := swarm
	own.TokenOffset = 12345
	if p, _ := NewPlan(own, 7); p.Spec.TokenOffset != 12345 {
		t.Errorf("a spec's own offset became %d", p.Spec.TokenOffset)
	}
	own.TokenOffset = MaxTokenOffset + 1
	if err := own.Validate(); err == nil || !strings.Contains(err.Error(), "token_offset") {
		t.Errorf("an offset past MaxTokenOffset: %v, want an error naming token_offset", err)
	}
}

// TestSwarmDrawsIngressDepth: the swarm's plan carries the ingress bound
// drawn from its seed (so a replay keeps it): the default in most seeds, a
// bound of 1..3 in some, every one of them within 100 seeds; a spec with
// its own bound keeps it.
func TestSwarmDrawsIngressDepth(t *testing.T) {
	swarm, _ := Lookup("swarm")
	seen := map[int]int{}
	for seed := uint64(1); seed <= 100; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		d := p.Spec.IngressDepth
		if d < 0 || d > 3 {
			t.Fatalf("seed %d: ingress depth %d, want 0 or 1..3", seed, d)
		}
		seen[d]++
		if again := replayed(t, p); again.Spec.IngressDepth != d {
			t.Errorf("seed %d: the replay's plan has ingress depth %d, want %d", seed, again.Spec.IngressDepth, d)
		}
	}
	for d := 0; d <= 3; d++ {
		if seen[d] == 0 {
			t.Errorf("seeds 1..100 never drew ingress depth %d (drawn: %v)", d, seen)
		}
	}
	if seen[0] < 50 {
		t.Errorf("only %d of 100 seeds kept the default ingress depth; the bound is meant for a minority", seen[0])
	}
	own := swarm
	own.IngressDepth = 9
	if p, _ := NewPlan(own, 7); p.Spec.IngressDepth != 9 {
		t.Errorf("a spec's own ingress depth became %d", p.Spec.IngressDepth)
	}
}

// TestWorldAddsStaleHoldersOnly: a world that asks for stale holders gets
// the simulator's plan of the seed and, on top of it, the holder pauses
// at the write moment (WorldOps of them, at least one in every seed; a
// replay file keeps them); the simulator's plan (the zero World) holds
// none, so its draws — and the trace hashes pinned on them — stay.
func TestWorldAddsStaleHoldersOnly(t *testing.T) {
	swarm, _ := Lookup("swarm")
	w := World{StaleHolders: true, Lease: 1500 * time.Millisecond}
	ttl := swarm.Cluster().TTL
	for seed := uint64(1); seed <= 100; seed++ {
		sim, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPlanIn(swarm, seed, w)
		if err != nil {
			t.Fatal(err)
		}
		var rest nemesis.Schedule
		stale := 0
		for _, op := range p.Schedule {
			if nemesis.IsStaleHolder(op, w.Lease, ttl) {
				stale++
				continue
			}
			rest = append(rest, op)
		}
		for _, op := range sim.Schedule {
			if nemesis.IsStaleHolder(op, w.Lease, ttl) {
				t.Fatalf("seed %d: the simulator's plan holds %s", seed, op)
			}
		}
		switch {
		case stale == 0 || stale != p.WorldOps:
			t.Fatalf("seed %d: %d stale-holder pauses, WorldOps %d; want at least one, counted", seed, stale, p.WorldOps)
		case !reflect.DeepEqual(rest, sim.Schedule) || !reflect.DeepEqual(p.Spec, sim.Spec) || !reflect.DeepEqual(p.Options, sim.Options):
			t.Fatalf("seed %d: the world's plan is not the simulator's and its pauses", seed)
		case !reflect.DeepEqual(replayed(t, p).Schedule, p.Schedule):
			t.Fatalf("seed %d: a replay file lost the world's pauses", seed)
		}
	}
	scripted, _ := Lookup("kleppmann-gc-pause")
	if p, _ := NewPlanIn(scripted, 1, w); p.WorldOps != 0 {
		t.Errorf("a scripted scenario got %d world pauses; only a swarm's draw takes them", p.WorldOps)
	}
}

// TestSwarmDrawsSyncDelays: about one swarm seed in four draws slow disks
// for the whole run (the servers', the store's or both, 1–20 ms), a
// replay file keeps them, a spec's own are kept, and out-of-range ones
// are refused with the field named.
func TestSwarmDrawsSyncDelays(t *testing.T) {
	swarm, _ := Lookup("swarm")
	slow, servers, store := 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		sv, st := p.Spec.ServerSyncDelay, p.Spec.StoreSyncDelay
		for _, d := range []Duration{sv, st} {
			if d != 0 && (d < Duration(time.Millisecond) || d > Duration(20*time.Millisecond)) {
				t.Fatalf("seed %d: sync delay %v, want 0 or 1..20ms", seed, time.Duration(d))
			}
		}
		if sv != 0 || st != 0 {
			slow++
		}
		if sv != 0 {
			servers++
		}
		if st != 0 {
			store++
		}
		if again := replayed(t, p); again.Spec.ServerSyncDelay != sv || again.Spec.StoreSyncDelay != st {
			t.Errorf("seed %d: the replay's plan has sync delays %v/%v, want %v/%v", seed, again.Spec.ServerSyncDelay, again.Spec.StoreSyncDelay, sv, st)
		}
	}
	if slow < 25 || slow > 80 || servers == 0 || store == 0 {
		t.Errorf("of 200 seeds %d drew slow disks (%d the servers', %d the store's); want about a quarter, of both kinds", slow, servers, store)
	}
	own := swarm
	own.StoreSyncDelay = Duration(7 * time.Millisecond)
	if p, _ := NewPlan(own, 7); p.Spec.StoreSyncDelay != own.StoreSyncDelay || p.Spec.ServerSyncDelay != 0 {
		t.Errorf("a spec's own sync delays became %v/%v", p.Spec.ServerSyncDelay, p.Spec.StoreSyncDelay)
	}
	for _, bad := range []Duration{-1, MaxSyncDelay + 1} {
		s := swarm
		s.ServerSyncDelay = bad
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "server_sync_delay") {
			t.Errorf("server_sync_delay %v: got %v, want an error naming the field", bad, err)
		}
	}
}

// TestSwarmDrawsGroupCommitWindows: half of the swarm's seeds that commit
// in groups draw a window of 1–5 ms, none without group commit; a replay
// keeps it; a window without group commit, or out of range, is refused
// with the field named.
func TestSwarmDrawsGroupCommitWindows(t *testing.T) {
	swarm, _ := Lookup("swarm")
	grouped, windowed := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		w := p.Spec.GroupCommitWindow
		switch {
		case !p.Spec.GroupCommit && w != 0:
			t.Fatalf("seed %d: window %v without group commit", seed, time.Duration(w))
		case w != 0 && (w < Duration(time.Millisecond) || w > Duration(5*time.Millisecond)):
			t.Fatalf("seed %d: window %v, want 1..5ms", seed, time.Duration(w))
		}
		if p.Spec.GroupCommit {
			grouped++
		}
		if w != 0 {
			windowed++
		}
		if again := replayed(t, p); again.Spec.GroupCommitWindow != w {
			t.Errorf("seed %d: the replay's window is %v, want %v", seed, again.Spec.GroupCommitWindow, w)
		}
	}
	if windowed < grouped/4 || windowed > 3*grouped/4 {
		t.Errorf("%d of %d seeds with group commit drew a window; want about half", windowed, grouped)
	}
	for _, bad := range []struct {
		group  bool
		window Duration
		want   string
	}{{false, Duration(time.Millisecond), "needs"}, {true, -1, "group_commit_window"}, {true, MaxGroupCommitWindow + 1, "group_commit_window"}} {
		s := swarm
		s.GroupCommit, s.GroupCommitWindow = bad.group, bad.window
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("group_commit %v, window %v: got %v, want an error with %q", bad.group, bad.window, err, bad.want)
		}
	}
}

// TestSwarmDrawsThinkTimes: about half of the swarm's seeds draw think
// times, each a whole number of 1 to 4 of its client's TTLs or 0 (the
// workload's default), for some clients or all; the plan carries them (so
// a replay file keeps them); the draw moves no other knob; a spec whose
// client sets its own keeps every client's as written, and a scripted
// scenario draws none.
func TestSwarmDrawsThinkTimes(t *testing.T) {
	swarm, _ := Lookup("swarm")
	drew, allOf, someOf := 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		p, err := NewPlan(swarm, seed)
		if err != nil {
			t.Fatal(err)
		}
		idle := 0
		for i, c := range p.Spec.Clients {
			k := c.ThinkTime / c.TTL
			if c.ThinkTime%c.TTL != 0 || k < 0 || k > 4 {
				t.Fatalf("seed %d: client %s thinks %v, want 0 or 1..4 TTLs of %v", seed, c.Name, time.Duration(c.ThinkTime), time.Duration(c.TTL))
			}
			if k > 0 {
				idle++
			}
			if swarm.Clients[i].ThinkTime != 0 {
				t.Fatalf("the built-in spec's client %s changed: %v", c.Name, time.Duration(swarm.Clients[i].ThinkTime))
			}
		}
		switch {
		case idle == len(p.Spec.Clients):
			allOf++
		case idle > 0:
			someOf++
		}
		if DrawThinkTimes(seed, swarm.Clients) != nil {
			drew++
		}
		if again := replayed(t, p); !reflect.DeepEqual(again.Spec.Clients, p.Spec.Clients) {
			t.Errorf("seed %d: the replay's clients %+v, want %+v", seed, again.Spec.Clients, p.Spec.Clients)
		}
		busy := swarm
		busy.Clients = append([]ClientSpec(nil), swarm.Clients...)
		busy.Clients[0].ThinkTime = Duration(time.Millisecond)
		q, err := NewPlan(busy, seed)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.Spec.Clients, busy.Clients) {
			t.Fatalf("seed %d: a spec's own think time drew others: %+v", seed, q.Spec.Clients)
		}
		// Nothing else moves: the plans differ in their clients only.
		q.Spec.Clients = p.Spec.Clients
		if !reflect.DeepEqual(q.Spec, p.Spec) || !reflect.DeepEqual(q.Schedule, p.Schedule) {
			t.Fatalf("seed %d: drawing think times moved another draw", seed)
		}
	}
	if drew < 70 || drew > 130 || allOf == 0 || someOf == 0 {
		t.Errorf("seeds 1..200: %d drew think times (%d for every client, %d for some), want about half, both kinds", drew, allOf, someOf)
	}
	scripted, _ := Lookup("kleppmann-gc-pause")
	if p, _ := NewPlan(scripted, 3); !reflect.DeepEqual(p.Spec.Clients, scripted.Clients) {
		t.Errorf("a scripted scenario drew think times: %+v", p.Spec.Clients)
	}
	bad := swarm
	bad.Clients = append([]ClientSpec(nil), swarm.Clients...)
	bad.Clients[1].ThinkTime = -1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "think_time") {
		t.Errorf("a negative think time: %v, want an error naming think_time", err)
	}
}
