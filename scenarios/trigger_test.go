package scenarios

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/nemesis"
)

// triggerSpec is a small replicated run with one trigger (and extra faults).
func triggerSpec(t *testing.T, trigger nemesis.Op, extra ...nemesis.Op) Spec {
	t.Helper()
	spec := mustLookup(t, "swarm")
	spec.Name, spec.Swarm, spec.Liveness = "trigger", false, nil
	spec.Clients = spec.Clients[:2]
	spec.Duration = Duration(3 * time.Second)
	spec.Faults = append(nemesis.Schedule{trigger}, extra...)
	return spec
}

var traceLine = regexp.MustCompile(`^step=(\d+) t=(\S+) node=(\S*) event=(\S+)`)

// TestTriggersFireAtTheirMoment: each moment's trigger fires at the
// instant the run reported the moment, right after the event that
// reported it, aimed at the moment's subject, once.
func TestTriggersFireAtTheirMoment(t *testing.T) {
	electionAt := nemesis.Op{At: Duration(time.Second), Kind: nemesis.Crash, Node: nemesis.Leader, Duration: Duration(100 * time.Millisecond)}
	for _, c := range []struct {
		when   nemesis.MomentKind
		extra  []nemesis.Op
		client bool // the subject is a client (else a replica)
		// reporter is the node whose event reports the moment: the
		// subject, or a replica for a grant the service decided.
		bySubject bool
	}{
		{nemesis.MomentGranted, nil, true, false},
		{nemesis.MomentAcquired, nil, true, true},
		{nemesis.MomentWrite, nil, true, true},
		{nemesis.MomentRead, nil, true, true},
		{nemesis.MomentRenewed, nil, true, true},
		{nemesis.MomentElected, []nemesis.Op{electionAt}, false, true},
		{nemesis.MomentVoted, []nemesis.Op{electionAt}, false, true},
		{nemesis.MomentAppended, nil, false, true},
	} {
		t.Run(string(c.when), func(t *testing.T) {
			trig := nemesis.Op{At: Duration(900 * time.Millisecond), Kind: nemesis.Pause, Node: nemesis.Subject, Duration: Duration(time.Millisecond),
				When: c.when, Within: Duration(time.Second)}
			spec := triggerSpec(t, trig, c.extra...)
			if c.when == nemesis.MomentRenewed {
				for i := range spec.Clients { // holds long enough to renew
					spec.Clients[i].WorkDuration = Duration(800 * time.Millisecond)
				}
			}
			var trace bytes.Buffer
			res, err := Run(spec, 1, RunOptions{Trace: &trace})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Fired) != 1 {
				t.Fatalf("fired %v, want one pause", res.Fired)
			}
			fired := res.Fired[0]
			if isClient := strings.HasPrefix(fired.Node, "c"); isClient != c.client {
				t.Fatalf("the trigger paused %s", fired.Node)
			}
			if fired.At < Duration(900*time.Millisecond) || fired.At > Duration(1900*time.Millisecond) {
				t.Fatalf("fired at %v, outside the window", time.Duration(fired.At))
			}
			// The event just before the fault is the one that reported the
			// moment, at the same instant.
			var prev []string
			found := false
			for _, line := range strings.Split(trace.String(), "\n") {
				m := traceLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				if m[4] == "action" && strings.Contains(line, " on "+string(c.when)+" of "+fired.Node) {
					found = true
					if prev == nil || prev[2] != m[2] {
						t.Fatalf("the fault %q fired after %q, not at the moment's instant", line, prev)
					}
					if c.bySubject && prev[3] != fired.Node {
						t.Fatalf("the fault %q fired after an event of %s, not of %s", line, prev[3], fired.Node)
					}
					if !c.bySubject && !strings.HasPrefix(prev[3], "n") {
						t.Fatalf("the fault %q fired after an event of %s, not of a replica", line, prev[3])
					}
					break
				}
				prev = m
			}
			if !found {
				t.Fatalf("no fault line for the trigger in the trace")
			}
			// Where the history shows the moment, it is at the same instant.
			at := time.Duration(fired.At)
			h := res.History
			switch c.when {
			case nemesis.MomentAcquired:
				if !hasLockOp(h, fired.Node, checker.LockAcquire, at) {
					t.Errorf("no acquire by %s returned granted at %v", fired.Node, at)
				}
			case nemesis.MomentRenewed:
				if !hasLockOp(h, fired.Node, checker.LockRenew, at) {
					t.Errorf("no renewal by %s returned at %v", fired.Node, at)
				}
			case nemesis.MomentWrite:
				if !slices.ContainsFunc(h.Ops, func(op checker.StoreOp) bool {
					return op.Client == fired.Node && op.Kind == checker.OpWrite && op.Call == at
				}) {
					t.Errorf("no write by %s called at %v", fired.Node, at)
				}
			case nemesis.MomentGranted:
				if !slices.ContainsFunc(h.Grants, func(g checker.Grant) bool { return g.Client == fired.Node && g.Start == at }) {
					t.Errorf("no grant to %s at %v", fired.Node, at)
				}
			case nemesis.MomentElected:
				if !slices.ContainsFunc(h.Elections, func(e checker.Election) bool { return e.Node == fired.Node && e.At == at }) {
					t.Errorf("no election of %s at %v", fired.Node, at)
				}
			}
		})
	}
}

func hasLockOp(h checker.History, client string, kind checker.LockKind, at time.Duration) bool {
	for _, op := range h.LockOps {
		if op.Client == client && op.Kind == kind && op.Return == at && op.Outcome != checker.LockUnknown {
			return true
		}
	}
	return false
}

// TestTriggerRunReplaysAndShrinks: a swarm run that a trigger made fail
// (the store crashed while a holder was paused) replays from its replay
// file to the same trace, and shrinks to fewer faults that keep the
// trigger.
func TestTriggerRunReplaysAndShrinks(t *testing.T) {
	spec := mustLookup(t, "swarm")
	spec.Mutant = string(mutants.MutStoreFenceVolatile)
	var res Result
	for seed := uint64(1); seed <= 50; seed++ {
		r, err := Run(spec, seed, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict.Kind == checker.VerdictViolation && len(r.Fired) > 0 {
			res = r
			break
		}
	}
	if res.Verdict.Kind != checker.VerdictViolation {
		t.Fatal("no swarm seed in 1..50 caught store-fence-volatile with a trigger fired")
	}
	replay, err := ParseReplay(NewReplay(res).Marshal())
	if err != nil {
		t.Fatal(err)
	}
	again, err := RunPlan(replay.Plan(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.TraceHash != res.TraceHash || again.Verdict.Property() != res.Verdict.Property() {
		t.Fatalf("replay of seed %d: hash %016x, %s; want %016x, %s", res.Seed, again.TraceHash, again.Verdict.Property(), res.TraceHash, res.Verdict.Property())
	}
	shrunk, err := Shrink(res.Plan, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if shrunk.After.Faults >= shrunk.Before.Faults {
		t.Errorf("shrink kept %d of %d faults", shrunk.After.Faults, shrunk.Before.Faults)
	}
	triggers := 0
	for _, op := range shrunk.Result.Plan.Schedule {
		if op.When != "" {
			triggers++
		}
	}
	if triggers == 0 || len(shrunk.Result.Fired) == 0 {
		t.Errorf("the shrunk schedule %v holds no trigger that fired: the violation needs one", shrunk.Result.Plan.Schedule)
	}
	t.Logf("seed %d: %d faults shrunk to %d: %v", res.Seed, shrunk.Before.Faults, shrunk.After.Faults, shrunk.Result.Plan.Schedule)
}
