package scenarios

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/nemesis"
)

// everyDesign lists the built-in designs with each replica count the
// cross-design test runs them on.
var everyDesign = []struct {
	design   string
	replicas int
}{
	{"replicated", 3}, {"replicated", 5},
	{"lease-only", 3}, {"lease-only", 5},
	{"single-node", 0},
	{"redlock", 3}, {"redlock", 5},
	{"lockd", 2}, {"lockd", 3},
}

// needs is what a spec's faults ask of a design: the highest @replica:N
// they name, and whether they aim at @leader.
func needs(t *testing.T, s Spec) (replicas int, leader bool) {
	t.Helper()
	for _, op := range s.Faults {
		for _, n := range append([]string{op.Node, op.To}, op.Group...) {
			if n == nemesis.Leader {
				leader = true
			}
			if arg, ok := strings.CutPrefix(n, "@replica:"); ok {
				k, err := strconv.Atoi(arg)
				if err != nil {
					t.Fatalf("%s: fault %s: bad role %q", s.Name, op, n)
				}
				replicas = max(replicas, k)
			}
		}
	}
	return replicas, leader
}

// TestBuiltinsRunOnEveryDesign runs every built-in scenario on every
// built-in design whose roles its faults name (enough replicas for its
// @replica:N, a leader for its @leader), for two seeds: the spec with the
// design switched must parse, run and produce a verdict — pass or not:
// Redlock fails the pause, lease-only the canary. On a design that lacks a
// role the spec must be refused, saying which.
func TestBuiltinsRunOnEveryDesign(t *testing.T) {
	for _, spec := range Builtin() {
		wantReplicas, wantLeader := needs(t, spec)
		for _, d := range everyDesign {
			name := fmt.Sprintf("%s/%s-%d", spec.Name, d.design, d.replicas)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				info := designInfo(t, d.design)
				s := spec
				s.Name, s.Design, s.Replicas, s.Expect = spec.Name+"-on-"+d.design, d.design, d.replicas, Expectation{Verdict: "pass"}
				des, _ := LookupDesign(d.design)
				nodes, err := des.Nodes(d.replicas)
				if err != nil {
					t.Fatal(err)
				}
				servers := len(nodes) // lockd's Redis counts: @replica:N+1 is it
				fits := wantReplicas <= servers && (!wantLeader || info.Leader)
				b, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				parsed, err := Parse(b)
				switch {
				case !fits && err == nil:
					t.Fatalf("parsed, but its faults need %d replicas (leader: %v) and the design has %d (leader: %v)",
						wantReplicas, wantLeader, servers, info.Leader)
				case !fits:
					if !strings.Contains(err.Error(), s.Name) || !strings.Contains(err.Error(), "fault ") {
						t.Errorf("refused without naming the scenario and the fault: %v", err)
					}
					return
				case err != nil:
					t.Fatalf("refused: %v", err)
				}
				for seed := uint64(1); seed <= 2; seed++ {
					res, err := Run(parsed, seed, RunOptions{})
					if err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					switch res.Verdict.Kind {
					case checker.VerdictPass, checker.VerdictViolation, checker.VerdictLiveness, checker.VerdictUnknown:
					default:
						t.Fatalf("seed %d: no verdict (%v)", seed, res.Verdict.Kind)
					}
					if res.Events == 0 || len(res.History.LockOps) == 0 {
						t.Fatalf("seed %d: nothing ran (%d events, %d lock ops)", seed, res.Events, len(res.History.LockOps))
					}
				}
			})
		}
	}
}

// TestBuiltinsFitTheirOwnDesigns: the cross-design test above is not
// vacuous — most built-ins run on every design; the rest aim at the leader
// (3) or at several replicas (5), and are refused where those are missing.
func TestBuiltinsFitTheirOwnDesigns(t *testing.T) {
	everywhere := 0
	for _, spec := range Builtin() {
		r, leader := needs(t, spec)
		if r <= 1 && !leader {
			everywhere++
		}
	}
	if everywhere < 10 {
		t.Errorf("%d of %d built-ins run on every design, want at least 10", everywhere, len(Builtin()))
	}
}

// designInfo looks a design up by name.
func designInfo(t *testing.T, name string) lockservice.DesignInfo {
	t.Helper()
	d, ok := LookupDesign(name)
	if !ok {
		t.Fatalf("no design %q", name)
	}
	return d.Info()
}
