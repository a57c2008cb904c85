package scenarios

import (
	"slices"
	"testing"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// TestLeaderPicksRecorded: the runner records which node each @leader fault
// hit when it fired, so the report can draw it on that node's row; and
// recording it does not change the run.
func TestLeaderPicksRecorded(t *testing.T) {
	spec, _ := Lookup("partitioned-leader")
	res, err := Run(spec, 1, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	servers := spec.ServerNames()
	var at []time.Duration
	for _, p := range res.Picks {
		if p.Selector != nemesis.Leader || !slices.Contains(servers, p.Node) {
			t.Errorf("pick %+v: want @leader resolved to one of %v", p, servers)
		}
		at = append(at, p.At)
	}
	if want := []time.Duration{700 * time.Millisecond, 3500 * time.Millisecond}; !slices.Equal(at, want) {
		t.Errorf("picks at %v, want %v (the two isolate @leader ops)", at, want)
	}
	again, _ := Run(spec, 1, RunOptions{})
	if again.TraceHash != res.TraceHash || !slices.Equal(again.Picks, res.Picks) {
		t.Error("two runs of one seed differ")
	}
}
