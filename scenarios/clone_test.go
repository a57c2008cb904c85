package scenarios

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs"
	"github.com/fencesim/fencesim/nemesis"
)

// renamedDesign is a built-in design under another name, with the same
// answers to every question the harness asks (DesignInfo but the name).
type renamedDesign struct {
	lockservice.Design
	name string
}

func (d renamedDesign) Info() lockservice.DesignInfo {
	info := d.Design.Info()
	info.Name = d.name
	return info
}

func init() {
	for _, c := range []struct{ of, name string }{{designs.DesignSingleNode, "single-node-clone"}, {designs.DesignReplicated, "replicated-clone"}} {
		d, _ := LookupDesign(c.of)
		if err := RegisterDesign(renamedDesign{d, c.name}); err != nil {
			panic(err)
		}
	}
}

// TestDesignsAreAskedNotNamed: a design registered under another name with
// the same DesignInfo flags runs exactly as the original — the same trace,
// the same history (decisions a crash took back included) and the same
// verdict — so nothing in the harness compares a design's name. On the
// single node, a slow disk and a crash aimed at the moment of a grant
// (a trigger) crash it while the decision's slow sync is in flight: the
// recorder takes those decisions back only because the design says
// SyncedDecisions, whatever its name.
func TestDesignsAreAskedNotNamed(t *testing.T) {
	lost := 0
	for _, c := range []struct {
		spec     Spec
		replicas int
		clone    string
	}{
		{crashAtGrant(mustLookup(t, "swarm")), 0, "single-node-clone"},
		{mustLookup(t, "partitioned-leader"), 5, "replicated-clone"},
		{mustLookup(t, "restart-all-replicas"), 3, "replicated-clone"},
	} {
		orig := c.spec
		orig.Replicas = c.replicas
		if c.clone == "single-node-clone" {
			orig.Design = designs.DesignSingleNode
		}
		clone := orig
		clone.Design = c.clone
		for _, seed := range []uint64{1, 2, 3, 151, 232} {
			a, err := Run(orig, seed, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(clone, seed, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a.TraceHash != b.TraceHash || !reflect.DeepEqual(a.History, b.History) || !reflect.DeepEqual(a.Verdict, b.Verdict) {
				t.Fatalf("%s seed %d: %s and %s differ: hash %016x vs %016x, verdict %v vs %v",
					orig.Name, seed, orig.Design, c.clone, a.TraceHash, b.TraceHash, a.Verdict.Kind, b.Verdict.Kind)
			}
			for _, g := range a.History.Grants {
				if g.Lost {
					lost++
				}
			}
			for _, e := range a.History.Ends {
				if e.Lost {
					lost++
				}
			}
		}
	}
	if lost == 0 {
		t.Fatal("no run took a decision back: the test cannot tell whether the clone's decisions wait for their sync")
	}
	t.Logf("%d decisions taken back by crashes during their sync", lost)
}

// crashAtGrant adds to spec a slow disk on its first service node and a
// crash of that node right after a grant, during the grant's sync.
func crashAtGrant(spec Spec) Spec {
	spec.Faults = append(slices.Clone(spec.Faults),
		nemesis.Op{At: Duration(time.Second), Kind: nemesis.SlowDisk, Node: nemesis.Replica(1), Delay: Duration(5 * time.Millisecond), Duration: Duration(2 * time.Second)},
		nemesis.Op{At: Duration(time.Second), Kind: nemesis.Crash, Node: nemesis.Replica(1), Duration: Duration(100 * time.Millisecond),
			When: nemesis.MomentGranted, Within: Duration(time.Second)})
	return spec
}

func mustLookup(t *testing.T, name string) Spec {
	t.Helper()
	s, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return s
}
