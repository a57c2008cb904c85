package live

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// readyFake is a fake target whose one server is up at once; client, if
// set, replaces the client program.
func readyFake(client ...string) fakeTarget {
	return fakeTarget{script: "exec sleep 60", ready: func(context.Context) error { return nil }, client: client}
}

// TestDeadClientIsUnknown: a client binary that exits at start (a stale
// or broken build) leaves every lock operation unanswered; the run is
// unknown naming the dead clients and that nothing was granted, never a
// pass.
func TestDeadClientIsUnknown(t *testing.T) {
	res, err := runFake(t, readyFake("/bin/sh", "-c", "echo broken-client >&2; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, res.PIDs)
	if res.Verdict.Kind != checker.VerdictUnknown {
		t.Fatalf("verdict %v, want unknown: %+v", res.Verdict.Kind, res.Verdict)
	}
	for _, want := range []string{"client processes died", "a (exit status 3, its last words \"broken-client\"", "b (exit status 3", "no lock was granted"} {
		if !strings.Contains(res.Verdict.Unknown, want) {
			t.Errorf("unknown reason %q lacks %q", res.Verdict.Unknown, want)
		}
	}
	if d := res.Clients["a"].Died; len(d) == 0 {
		t.Errorf("client a's death not counted: %+v", res.Clients)
	}
}

// TestTooFewFaultsIsUnknown: a schedule of which fewer than the rule's
// fraction was carried out is unknown; the spec's live.min_faults_done
// lowers the rule.
func TestTooFewFaultsIsUnknown(t *testing.T) {
	p := shortPlan(t)
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	p.Schedule = nemesis.Schedule{
		{At: d(10 * ms), Kind: nemesis.Pause, Node: "n1", Duration: d(20 * ms)},
		{At: d(20 * ms), Kind: nemesis.Restart, Node: "n1"}, // not crashed: skipped
		{At: d(30 * ms), Kind: nemesis.Restart, Node: "n1"},
		{At: d(40 * ms), Kind: nemesis.Restart, Node: "n1"},
	}
	res := runFakePlan(t, readyFake(), p, false)
	if res.FaultCounts != (FaultCounts{Done: 1, Skipped: 3}) {
		t.Fatalf("fault counts %+v, want 1 done, 3 skipped: %v", res.FaultCounts, res.Faults)
	}
	if !strings.Contains(res.Verdict.Unknown, "only 1 of the schedule's 4 fault operations") {
		t.Errorf("unknown reason %q does not name the faults", res.Verdict.Unknown)
	}
}

// TestInapplicableScriptedFaults: a scripted fault the target cannot
// carry out at all (a clock fault on a target without the clock
// endpoint) is refused before anything starts, naming it; allowed, it
// runs and is listed as not applicable.
func TestInapplicableScriptedFaults(t *testing.T) {
	p := shortPlan(t)
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	p.Spec.Faults = nemesis.Schedule{{At: d(10 * ms), Kind: nemesis.Drift, Node: "n1", PPM: 500, Duration: d(100 * ms)}}
	p.Schedule = p.Spec.Faults
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{Target: readyFake(), Plan: p, BinDirs: []string{binDir}, Dir: t.TempDir()})
	if !errors.Is(err, ErrInapplicable) || !strings.Contains(err.Error(), "drift n1") {
		t.Fatalf("error %v, want ErrInapplicable naming the drift", err)
	}
	if len(res.PIDs) != 0 {
		t.Errorf("processes were started for a refused plan: %v", res.PIDs)
	}
	res = runFakePlan(t, readyFake(), p, true)
	if res.FaultCounts.NotApplicable != 1 || res.Faults[0].Outcome != FaultNotApplicable {
		t.Errorf("faults %v, want the drift not applicable", res.Faults)
	}
}

func runFakePlan(t *testing.T, f fakeTarget, p scenario.Plan, allow bool) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{Target: f, Plan: p, BinDirs: []string{binDir}, Dir: t.TempDir(), AllowInapplicable: allow,
		StartTimeout: 1500 * time.Millisecond, StopGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, res.PIDs)
	return res
}

// TestScriptedTriggers: a scripted trigger on a moment the clients report
// is accepted as it stands (@subject stands for the client the moment is
// about); one on a moment no live client reports is refused, naming it.
func TestScriptedTriggers(t *testing.T) {
	d := func(v time.Duration) scenario.Duration { return scenario.Duration(v) }
	for _, tc := range []struct {
		when nemesis.MomentKind
		ok   bool
	}{{nemesis.MomentAcquired, true}, {nemesis.MomentVoted, false}} {
		p := shortPlan(t)
		p.Spec.Faults = nemesis.Schedule{{At: d(10 * ms), Kind: nemesis.Pause, Node: nemesis.Subject, Duration: d(50 * ms), When: tc.when, Within: d(time.Second)}}
		p.Schedule = p.Spec.Faults
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := Run(ctx, Options{Target: readyFake(), Plan: p, BinDirs: []string{binDir}, Dir: t.TempDir(),
			StartTimeout: 1500 * time.Millisecond, StopGrace: 500 * time.Millisecond})
		cancel()
		if err == nil {
			noLeftovers(t, res.PIDs)
		}
		refused := errors.Is(err, ErrInapplicable)
		switch {
		case tc.ok && err != nil:
			t.Errorf("trigger on %s: %v, want it run", tc.when, err)
		case !tc.ok && (!refused || !strings.Contains(err.Error(), "does not report voted moments")):
			t.Errorf("trigger on %s: error %v, want ErrInapplicable naming the moment", tc.when, err)
		}
	}
}
