package nemesis

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)) }

var (
	replicated = Cluster{
		Servers: []string{"n1", "n2", "n3", "n4", "n5"}, Store: []string{"store"}, Clients: []string{"a", "b", "c", "d"},
		LeaderSelector: true, TTL: 800 * ms, DriftBoundPPM: 1000,
	}
	singleNode = Cluster{Servers: []string{"lock"}, Store: []string{"store"}, Clients: []string{"a"}, TTL: 2 * time.Second}
	tiny       = Cluster{Servers: []string{"n1", "n2", "n3"}, Store: []string{"store"}, Clients: []string{"a", "b"}, LeaderSelector: true, TTL: 300 * ms, DriftBoundPPM: 500}
)

// allOn turns every kind on with every target, shape and a brisk rate.
func allOn(c Cluster) Options {
	o := DrawOptions(rng(1), c)
	for _, k := range faultKinds {
		f := k.fault(&o)
		f.Enabled, f.Probability = true, 0.05
		if k.targeted {
			f.Targets = c.roles()
		}
	}
	o.PartitionShapes = slices.Clone(shapes)
	o.Aims = slices.DeleteFunc(slices.Clone(aims), func(a string) bool { return !c.LeaderSelector && needsLeader(a) })
	o.TornProbability = 0.5
	return o
}

const safety = 20 * time.Second

func TestGenerateIsDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		o1, o2 := DrawOptions(rng(seed), replicated), DrawOptions(rng(seed), replicated)
		if !reflect.DeepEqual(o1, o2) {
			t.Fatalf("seed %d: DrawOptions differs between two draws:\n%v\n%v", seed, o1, o2)
		}
		s1, s2 := Generate(rng(seed), o1, replicated, safety), Generate(rng(seed), o1, replicated, safety)
		if !reflect.DeepEqual(s1, s2) {
			t.Fatalf("seed %d: Generate differs between two draws", seed)
		}
	}
}

func TestGenerateDiffersAcrossSeeds(t *testing.T) {
	o := allOn(replicated)
	seenOps, seenOpts := map[string]uint64{}, map[string]uint64{}
	for seed := range uint64(50) {
		b, _ := json.Marshal(Generate(rng(seed), o, replicated, safety))
		if prev, dup := seenOps[string(b)]; dup {
			t.Errorf("seeds %d and %d generate the same schedule", prev, seed)
		}
		seenOps[string(b)] = seed
		ob, _ := json.Marshal(DrawOptions(rng(seed), replicated))
		if prev, dup := seenOpts[string(ob)]; dup {
			t.Errorf("seeds %d and %d draw the same options", prev, seed)
		}
		seenOpts[string(ob)] = seed
	}
}

// TestGeneratedSchedulesAreSound: over 500 seeds and three clusters, every
// drawn option set is valid, and every generated schedule validates
// against its cluster, is sorted, is undone by the end of the safety phase
// and survives a JSON round trip. Together the seeds use every kind.
func TestGeneratedSchedulesAreSound(t *testing.T) {
	used := map[Kind]int{}
	shapesUsed := map[string]int{}
	torn := 0
	for seed := range uint64(500) {
		for _, c := range []Cluster{replicated, singleNode, tiny} {
			r := rng(seed)
			o := DrawOptions(r, c)
			DrawRecoveryAim(&o, rng(seed+1_000_000), c)
			if err := o.Validate(); err != nil {
				t.Fatalf("seed %d: DrawOptions gave invalid options: %v\n%v", seed, err, o)
			}
			s := Generate(r, o, c, safety)
			if err := s.Validate(c.Names()); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if !slices.IsSortedFunc(s, func(a, b Op) int { return int(a.At - b.At) }) {
				t.Fatalf("seed %d: schedule not sorted", seed)
			}
			if err := s.CheckUndone(safety); err != nil {
				t.Fatalf("seed %d: %v\noptions:\n%v", seed, err, o)
			}
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(b)
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("seed %d: JSON round trip: %v", seed, err)
			}
			for _, op := range s {
				used[op.Kind]++
				if op.Mode == CrashTorn {
					torn++
				}
				if !c.LeaderSelector && (op.Node == Leader || op.To == Leader) {
					t.Fatalf("seed %d: %v aims at the leader of a cluster without one", seed, op)
				}
			}
			for _, sh := range o.PartitionShapes {
				shapesUsed[sh]++
			}
		}
	}
	for _, k := range Kinds() {
		if k == NetworkReset || k == ClockReset {
			continue // only HealAll and hand-written schedules use them
		}
		if used[k] == 0 {
			t.Errorf("no seed generated a %s", k)
		}
	}
	if torn == 0 || len(shapesUsed) != len(shapes) {
		t.Errorf("torn crashes %d, shapes %v: want some of each", torn, shapesUsed)
	}
	t.Logf("ops per kind over 1500 schedules: %v", used)
}

// TestGenerateRespectsOptions: kinds that are off never appear; targets
// limit the nodes hit; durations stay within stability and max (unless cut
// at the end of the phase); drift within the bound stays within it.
func TestGenerateRespectsOptions(t *testing.T) {
	o := allOn(replicated)
	o.Loss.Enabled, o.Jump.Enabled = false, false
	o.Pause.Targets = []string{RoleClients}
	o.Pause.Stability, o.Pause.Max = Duration(40*ms), Duration(3*time.Second)
	o.DriftPPMMax = 1000
	o.PartitionShapes = []string{ShapeBlock}
	o.Aimed.Enabled = false // aimed faults draw their own kinds and lengths (trigger_test.go)
	for seed := range uint64(100) {
		for _, op := range Generate(rng(seed), o, replicated, safety) {
			switch op.Kind {
			case Loss, Jump, Isolate, Partition:
				t.Fatalf("seed %d: %v generated while off", seed, op)
			case Pause:
				if !slices.Contains(replicated.Clients, op.Node) {
					t.Fatalf("seed %d: pause of %s, want clients only", seed, op.Node)
				}
				end := op.At + op.Duration
				if op.Duration > o.Pause.Max || (op.Duration < o.Pause.Stability && end != Duration(safety)) {
					t.Fatalf("seed %d: pause of %v outside [40ms, 3s]", seed, time.Duration(op.Duration))
				}
			case Drift:
				if op.PPM == 0 || op.PPM > 1000 || op.PPM < -1000 {
					t.Fatalf("seed %d: drift %d ppm beyond ±1000", seed, op.PPM)
				}
			}
		}
	}
}

// TestGenerateStaysQuietForStability: a kind does not strike again until
// its stability has passed since its last fault was undone, so two faults
// of one kind never overlap.
func TestGenerateStaysQuietForStability(t *testing.T) {
	o := allOn(tiny)
	o.Partition.Probability = 1
	o.Partition.Stability, o.Partition.Max = Duration(100*ms), Duration(200*ms)
	o.Aimed.Enabled = false // an aimed isolation is no partition of this kind
	s := Generate(rng(3), o, tiny, 5*time.Second)
	var lastHeal time.Duration = -time.Hour
	starts := 0
	for _, op := range s {
		switch op.Kind {
		case Isolate, Partition, Block:
			if gap := time.Duration(op.At) - lastHeal; gap < 100*ms {
				t.Fatalf("a partition started %v after the last heal, want ≥ 100ms", gap)
			}
			starts++
		case Heal:
			lastHeal = time.Duration(op.At)
		}
	}
	if starts < 10 {
		t.Errorf("%d partitions with probability 1 over 5s, want many", starts)
	}
}

func TestCheckUndone(t *testing.T) {
	tests := []struct {
		name string
		s    Schedule
		want string // "" = undone
	}{
		{"empty", nil, ""},
		{"pause ends in time", Schedule{op(time.Second, Pause, "a", time.Second)}, ""},
		{"pause ends late", Schedule{op(time.Second, Pause, "a", 10*time.Second)}, "still on at 5s"},
		{"crash restarted", Schedule{op(0, Crash, "a", 0), op(time.Second, Restart, "a", 0)}, ""},
		{"crash restarted by selector", Schedule{op(0, Crash, "a", 0), op(0, Crash, Leader, 0), op(time.Second, Restart, Crashed, 0)}, ""},
		{"crash of another node restarted", Schedule{op(0, Crash, "a", 0), op(time.Second, Restart, "b", 0)}, "fault 0 (crash a) is never undone"},
		{"restart before the crash", Schedule{op(time.Second, Crash, "a", 0), op(0, Restart, "a", 0)}, "never undone"},
		{"isolate healed", Schedule{op(0, Isolate, "a", 0), op(time.Second, Heal, "", 0)}, ""},
		{"block not healed", Schedule{{Kind: Block, Node: "a", To: "b"}}, "block a"},
		{"permanent loss reset", Schedule{{Kind: Loss, Probability: 1}, {At: Duration(time.Second), Kind: NetworkReset}}, ""},
		{"permanent loss", Schedule{{Kind: Loss, Probability: 1}}, "never undone"},
		{"drift back to 0", Schedule{{Kind: Drift, Node: "a", PPM: 5}, {Kind: Drift, Node: "a"}}, ""},
		{"jump reset", Schedule{{Kind: Jump, Node: "a", By: 1}, {Kind: ClockReset, Node: "a"}}, ""},
		{"jump reset on another node", Schedule{{Kind: Jump, Node: "a", By: 1}, {Kind: ClockReset, Node: "b"}}, "never undone"},
		{"slow disk made fast", Schedule{{Kind: SlowDisk, Node: "a", Delay: 1}, {Kind: SlowDisk, Node: "a"}}, ""},
		{"fault after the end", Schedule{op(6*time.Second, Heal, "", 0)}, "after the phase ends"},
	}
	for _, tt := range tests {
		err := tt.s.CheckUndone(5 * time.Second)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestHealAllAppendsSortedResets(t *testing.T) {
	s := Schedule{op(2*time.Second, Heal, "", 0), op(time.Second, Crash, "a", 0)}
	got := s.HealAll(time.Second, singleNode)
	var kinds []string
	for _, op := range got {
		kinds = append(kinds, op.String())
	}
	want := []string{"crash a", "heal", "network-reset", "restart @crashed",
		"clock-reset lock", "slow-disk lock", "clock-reset store", "slow-disk store", "clock-reset a", "slow-disk a", "heal"}
	if !slices.Equal(kinds, want) {
		t.Errorf("got %q, want %q", kinds, want)
	}
	if len(s) != 2 || s[0].Kind != Heal {
		t.Errorf("HealAll changed its receiver: %v", s)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := allOn(replicated)
	if err := good.Validate(); err != nil {
		t.Fatalf("allOn: %v", err)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v, want valid", err)
	}
	tests := []struct {
		name   string
		change func(o *Options)
		want   string
	}{
		{"no step", func(o *Options) { o.Step = 0 }, "step must be positive"},
		{"probability", func(o *Options) { o.Pause.Probability = 1.5 }, "pause: probability 1.5"},
		{"stability", func(o *Options) { o.Crash.Stability = 0 }, "crash: stability must be positive"},
		{"max below stability", func(o *Options) { o.Drift.Max = o.Drift.Stability - 1 }, "drift: max"},
		{"no targets", func(o *Options) { o.SlowDisk.Targets = nil }, "slow-disk: targets is empty"},
		{"unknown target", func(o *Options) { o.Pause.Targets = []string{"everyone"} }, `unknown target "everyone"`},
		{"targets on a network fault", func(o *Options) { o.Loss.Targets = []string{RoleServers} }, "loss: targets do not apply"},
		{"torn", func(o *Options) { o.TornProbability = -1 }, "torn_probability"},
		{"shapes", func(o *Options) { o.PartitionShapes = []string{"triangle"} }, `unknown partition shape "triangle"`},
		{"no shapes", func(o *Options) { o.PartitionShapes = nil }, "partition_shapes is empty"},
		{"loss max", func(o *Options) { o.LossMax = 0 }, "loss_max"},
		{"drift max", func(o *Options) { o.DriftPPMMax = 1_000_000 }, "drift_ppm_max"},
		{"sync delay max", func(o *Options) { o.SyncDelayMax = 0 }, "sync_delay_max"},
	}
	for _, tt := range tests {
		o := allOn(replicated)
		o.PartitionShapes = slices.Clone(o.PartitionShapes)
		tt.change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestOptionsPrintReadably(t *testing.T) {
	o := DrawOptions(rng(4), replicated)
	o.Crash.Enabled = false
	s := o.String()
	lines := strings.Split(s, "\n")
	if len(lines) != 1+len(faultKinds) || !strings.HasPrefix(lines[0], "step 10ms") {
		t.Fatalf("got %d lines:\n%s\nwant a step line and one per kind", len(lines), s)
	}
	for i, k := range faultKinds {
		line := lines[i+1]
		if !strings.HasPrefix(line, k.name) {
			t.Errorf("line %q, want it to start with %s", line, k.name)
		}
		if on := k.fault(&o).Enabled; on == strings.HasSuffix(line, " off") {
			t.Errorf("line %q does not say whether %s is on (%v)", line, k.name, on)
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back Options
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, o) {
		t.Errorf("JSON round trip: %v\n%s", err, b)
	}
	t.Logf("\n%s", s)
}

func TestDrawOptionsScalesToTheCluster(t *testing.T) {
	for seed := range uint64(200) {
		o := DrawOptions(rng(seed), replicated)
		if o.Pause.Max < Duration(replicated.TTL/2) || o.Pause.Max > Duration(4*replicated.TTL) {
			t.Fatalf("seed %d: longest pause %v, want within [TTL/2, 4·TTL]", seed, time.Duration(o.Pause.Max))
		}
		if o.DriftBoundPPM != replicated.DriftBoundPPM || o.DriftPPMMax < replicated.DriftBoundPPM {
			t.Fatalf("seed %d: drift max %d, bound %d", seed, o.DriftPPMMax, o.DriftBoundPPM)
		}
		if !slices.ContainsFunc(faultKinds, func(k faultKind) bool { return k.fault(&o).Enabled }) {
			t.Fatalf("seed %d: no kind on", seed)
		}
	}
}

func TestSpread(t *testing.T) {
	r := rng(1)
	for _, c := range []struct{ lo, hi time.Duration }{{ms, 10 * time.Second}, {40 * ms, 41 * ms}, {5 * ms, 5 * ms}, {0, 0}, {time.Second, ms}} {
		for range 1000 {
			d := spread(r, c.lo, c.hi)
			lo := max(c.lo, ms)
			if d < lo || (d > c.hi && c.hi > lo) || d%ms != 0 && d != lo {
				t.Fatalf("spread(%v, %v) = %v", c.lo, c.hi, d)
			}
		}
	}
	// Orders of magnitude are all reached.
	short := 0
	for range 1000 {
		if spread(r, ms, 10*time.Second) < 100*ms {
			short++
		}
	}
	if short < 300 {
		t.Errorf("%d of 1000 draws in [1ms, 10s] were under 100ms, want a log-like spread", short)
	}
}

func TestClusterValidate(t *testing.T) {
	for _, c := range []Cluster{replicated, singleNode, tiny} {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", c.Nodes(), err)
		}
	}
	for _, bad := range []struct {
		c    Cluster
		want string
	}{
		{Cluster{}, "no nodes"},
		{Cluster{Servers: []string{"a"}, Clients: []string{"a"}}, `node "a" twice`},
		{Cluster{Servers: []string{"@leader"}}, "looks like a selector"},
		{Cluster{Servers: []string{"a"}, DriftBoundPPM: -1}, "drift bound"},
	} {
		if err := bad.c.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: got %v, want %q", bad.c, err, bad.want)
		}
	}
}

// TestCrashRecoveringAim: the aim crashes one replica, torn, on a slow
// disk, and crashes it again, torn, 1–30 ms after its restart, the disk
// still slow; DrawRecoveryAim adds it only with aimed faults on, for about
// half of the draws.
func TestCrashRecoveringAim(t *testing.T) {
	o := allOn(replicated)
	o.Aims = []string{AimCrashRecovering}
	o.Aimed.Probability = 0.05
	for _, k := range faultKinds {
		if f := k.fault(&o); f != &o.Aimed {
			f.Enabled = false
		}
	}
	found := 0
	for seed := range uint64(50) {
		s := Generate(rng(seed), o, replicated, safety)
		if err := s.Validate(replicated.Names()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i, op := range s {
			if op.Kind != Crash {
				continue
			}
			if op.Mode != CrashTorn {
				t.Fatalf("seed %d: %v is not torn", seed, op)
			}
			for _, next := range s[i+1:] {
				if next.Kind != Crash || next.Node != op.Node {
					continue
				}
				gap := time.Duration(next.At - op.At - op.Duration)
				if gap >= time.Millisecond && gap <= 30*time.Millisecond {
					found++
					slow := false
					for _, sd := range s {
						slow = slow || sd.Kind == SlowDisk && sd.Node == op.Node && sd.At <= op.At && sd.At+sd.Duration > next.At
					}
					if !slow {
						t.Errorf("seed %d: no slow disk on %s over both crashes", seed, op.Node)
					}
				}
				break
			}
		}
	}
	if found < 50 {
		t.Errorf("%d crashes during a recovery over 50 seeds, want at least one a seed", found)
	}
	drawn := 0
	for seed := range uint64(200) {
		o := DrawOptions(rng(seed), replicated)
		DrawRecoveryAim(&o, rng(seed+1), replicated)
		if slices.Contains(o.Aims, AimCrashRecovering) {
			drawn++
			if !o.Aimed.Enabled {
				t.Fatalf("seed %d: the aim drawn with aimed faults off", seed)
			}
		}
	}
	if drawn == 0 || drawn > 150 {
		t.Errorf("DrawRecoveryAim added the aim in %d of 200 draws", drawn)
	}
}

// TestRaftStrikes: for about one seed in raftStrikeShare, one or two strikes at
// Raft's moments, each telling its story — minority-tail isolates the
// leader on a follower's append (and, mostly, that follower too), and
// stale-append reorders messages from before it pauses the leader until
// inside the window — all valid, undone by the end of the safety phase,
// and the same for the same stream; none for a cluster without a leader
// or a minority to leave a tail on.
func TestRaftStrikes(t *testing.T) {
	struck, tails, follower, stale, crashes := 0, 0, 0, 0, 0
	for seed := range uint64(300) {
		s := RaftStrikes(rng(seed), replicated, safety)
		if !reflect.DeepEqual(s, RaftStrikes(rng(seed), replicated, safety)) {
			t.Fatalf("seed %d: two draws from one stream differ", seed)
		}
		if err := s.ValidateFor(replicated); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := s.CheckUndone(safety); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !slices.IsSortedFunc(s, func(a, b Op) int { return int(a.At - b.At) }) {
			t.Fatalf("seed %d: not sorted", seed)
		}
		if len(s) > 0 {
			struck++
		}
		for i, op := range s {
			switch {
			case op.Kind == Isolate && op.When == MomentAppended && op.Node == Leader:
				tails++
			case op.Kind == Isolate && op.When == MomentAppended && op.Node == Subject:
				follower++
			case op.Kind == Crash && (op.When == MomentAppended || op.When == MomentVoted):
				crashes++
			case op.Kind == Crash && op.Node == Leader, op.Kind == SlowDisk:
				// a crash-voter's leader crash, a crash aim's slow disk
			case op.Kind == Isolate && op.When == MomentElected && op.Node == Subject:
				// a crash-voter's winner cut off
			case op.Kind == Isolate || op.When != "":
				t.Errorf("seed %d: unexpected trigger %v", seed, op)
			case op.Kind == Reorder:
				stale++
				paused := false
				for _, p := range s[i:] {
					paused = paused || p.Kind == Pause && p.Node == Leader && p.At > op.At && p.At+p.Duration <= op.At+op.Duration+Duration(replicated.TTL/4)
				}
				if !paused {
					t.Errorf("seed %d: reorder %v without a pause of the leader after it", seed, op)
				}
			}
		}
	}
	if struck < 300/raftStrikeShare/2 || struck > 2*300/raftStrikeShare {
		t.Errorf("%d of 300 seeds struck at Raft's moments, want about one in %d", struck, raftStrikeShare)
	}
	if tails == 0 || follower == 0 || follower >= tails || stale == 0 || crashes == 0 {
		t.Errorf("leader isolations at an append %d, of the follower too %d, stale appends %d, crashes at a vote or an append %d: want some of each, the follower's in most", tails, follower, stale, crashes)
	}
	for _, c := range []Cluster{singleNode, {Servers: []string{"n1", "n2"}, Clients: []string{"a"}, LeaderSelector: true, TTL: time.Second}} {
		for seed := range uint64(50) {
			if s := RaftStrikes(rng(seed), c, safety); len(s) > 0 {
				t.Fatalf("servers %v: strikes %v", c.Servers, s)
			}
		}
	}
	// The aims can also be named in a spec's options, as any other.
	o := allOn(replicated)
	o.Aims = []string{AimMinorityTail, AimStaleAppend}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestStoryStrikes: every seed draws three story strikes on top of its
// schedule, each in its sharp variant — a forward jump on the leader as it
// grants, a crash at a vote on a slow disk with the winner cut off, a
// holder paused just past its lease, the store crashed under a paused
// holder — all valid, undone by the end of the safety phase, and the same
// for the same stream; a design without a leader gets no crash at a vote
// and its jumps land on a client, and a cluster without clients gets none.
func TestStoryStrikes(t *testing.T) {
	seen, empty := map[string]int{}, map[int]int{}
	for _, c := range []Cluster{replicated, tiny, singleNode} {
		ttl := Duration(c.TTL)
		for seed := range uint64(300) {
			s := StoryStrikes(rng(seed), c, safety)
			if !reflect.DeepEqual(s, StoryStrikes(rng(seed), c, safety)) {
				t.Fatalf("seed %d: two draws from one stream differ", seed)
			}
			if err := s.ValidateFor(c); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if err := s.CheckUndone(safety); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if len(s) == 0 {
				empty[len(c.Servers)]++
			}
			slow := 0
			for _, op := range s {
				if op.Kind == SlowDisk {
					slow++
				}
			}
			for _, op := range s {
				switch {
				case op.Kind == Jump:
					seen["jump"]++
					if op.By <= 0 {
						t.Errorf("seed %d: jump %v is not forward", seed, op)
					}
					if c.LeaderSelector && (op.Node != Leader || op.When != MomentGranted) {
						t.Errorf("seed %d: jump %v is not on the leader as it grants", seed, op)
					}
					if !c.LeaderSelector && (op.Node != Subject || op.When != MomentAcquired) {
						t.Errorf("seed %d: jump %v is not on a client as it learns of its grant", seed, op)
					}
				case op.Kind == Crash && op.When == MomentVoted:
					seen["crash-voter"]++
					if !c.LeaderSelector {
						t.Errorf("seed %d: a crash at a vote without a leader", seed)
					}
					if op.After != 0 || slow < len(c.Servers) {
						t.Errorf("seed %d: crash %v is not right after the vote on slow disks (%d slow)", seed, op, slow)
					}
					if !slices.ContainsFunc(s, func(o Op) bool { return o.Kind == Isolate && o.When == MomentElected }) {
						t.Errorf("seed %d: crash at a vote without the winner cut off", seed)
					}
				case op.Kind == Crash && op.When == MomentAcquired:
					seen["store-paused"]++
					if op.Node != c.Store[0] {
						t.Errorf("seed %d: crash %v on acquired is not the store's", seed, op)
					}
				case op.Kind == Pause && op.When == MomentAcquired && op.After == 0 && op.Duration > ttl && op.Duration <= ttl+ttl/4:
					seen["pause-holder"]++
				case op.Kind == Pause && op.When == MomentAcquired && op.Duration > 2*ttl:
					// a store-paused strike's holder
				case op.Kind == Pause || op.When == MomentRead:
					t.Errorf("seed %d: pause %v is not just past the lease", seed, op)
				}
			}
		}
	}
	// A strike that would outlast the safety phase is not drawn: a seed
	// is rarely left with none (more often with singleNode's TTL of 2 s,
	// a tenth of the phase, against which a store-paused strike can
	// last 14 s).
	if empty[5] > 3 || empty[3] > 3 || empty[1] > 30 {
		t.Errorf("seeds with no story strike, by number of servers: %v (of 300 each)", empty)
	}
	for _, story := range []string{"jump", "crash-voter", "store-paused", "pause-holder"} {
		if seen[story] < 50 {
			t.Errorf("story %s told %d times in 900 draws", story, seen[story])
		}
	}
	if s := StoryStrikes(rng(1), Cluster{Servers: []string{"n1"}, TTL: time.Second}, safety); s != nil {
		t.Errorf("a cluster without clients: %v", s)
	}
	// Without a store, the strikes tell the other stories.
	storeless := Cluster{Servers: []string{"n1", "n2", "n3"}, Clients: []string{"a", "b"}, LeaderSelector: true, TTL: 300 * ms}
	none := 0
	for seed := range uint64(300) {
		s := StoryStrikes(rng(seed), storeless, safety)
		if err := s.ValidateFor(storeless); err != nil {
			t.Fatalf("storeless, seed %d: %v", seed, err)
		}
		if len(s) == 0 {
			none++
		}
	}
	if none > 3 {
		t.Errorf("storeless: %d of 300 seeds with no story strike", none)
	}
}

// TestDrawsArePinned pins what the swarm draws from a seed: the options,
// the generated schedule, the strikes at Raft's moments and the story
// strikes, over 100 seeds of three clusters. A change to any of them moves
// every seed's run (a finding's seed no longer reproduces it, measured
// rates shift): if it is meant, bump scenario.ProgramVersion and pin the
// new hash here.
func TestDrawsArePinned(t *testing.T) {
	const want = "937f20336a17939a"
	h := fnv.New64a()
	for _, c := range []Cluster{replicated, tiny, singleNode} {
		for seed := range uint64(100) {
			r := rng(seed)
			o := DrawOptions(r, c)
			DrawRecoveryAim(&o, rng(seed+1000), c)
			s := Generate(r, o, c, safety)
			s = append(s, RaftStrikes(rng(seed+2000), c, safety)...)
			s = append(s, StoryStrikes(rng(seed+3000), c, safety)...)
			b, err := json.Marshal(struct {
				O Options
				S Schedule
			}{o, s})
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
		}
	}
	if got := fmt.Sprintf("%016x", h.Sum64()); got != want {
		t.Errorf("the swarm's draws changed: hash %s, pinned %s (if meant, bump scenario.ProgramVersion and pin the new hash)", got, want)
	}
}
