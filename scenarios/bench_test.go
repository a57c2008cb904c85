package scenarios

import (
	"fmt"
	"testing"

	"github.com/fencesim/fencesim/lockservice/designs"
)

// BenchmarkKleppmannGCPause measures one whole run of the scenario, checker
// included, and reports events per run and simulated seconds per wall second.
func BenchmarkKleppmannGCPause(b *testing.B) {
	spec, _ := Lookup("kleppmann-gc-pause")
	var events, simNS, wallNS float64
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		res, err := Run(spec, uint64(i+1), RunOptions{})
		if err != nil || !res.Met(spec) {
			b.Fatalf("seed %d: %v %+v", i+1, err, res.Verdict)
		}
		events += float64(res.Events)
		simNS += float64(res.SimTime)
		wallNS += float64(res.Wall)
	}
	b.ReportMetric(events/float64(b.N), "events/run")
	b.ReportMetric(simNS/wallNS, "sim/wall")
}

// quietSpec is a 5-replica, 10-client, 3-resource run of 60 simulated
// seconds with no faults: the service's own cost.
func quietSpec() Spec {
	s := Spec{Version: SpecVersion, Name: "bench-5x10", Expect: Expectation{Verdict: "pass"}, Design: designs.DesignReplicated,
		Replicas: 5, LatencyMin: Duration(500e3), LatencyMean: Duration(1e6), LatencyMax: Duration(5e6),
		Duration: Duration(60e9), StepLimit: 50_000_000}
	for i := range 10 {
		s.Clients = append(s.Clients, ClientSpec{Name: fmt.Sprintf("c%d", i), Resource: fmt.Sprintf("r%d", i%3),
			TTL: Duration(1e9), StartDelay: Duration(300e6), Cycles: 1000, WritesPerHold: 2, WorkDuration: Duration(10e6), DriftBoundPPM: 1000})
	}
	return s
}

// BenchmarkReplicated5x10 reports what one acquire costs in messages, how
// many events a simulated second takes, and simulated ÷ wall time.
func BenchmarkReplicated5x10(b *testing.B) {
	spec := quietSpec()
	var events, simNS, wallNS, msgs, acquires float64
	for i := 0; b.Loop(); i++ {
		res, err := Run(spec, uint64(i+1), RunOptions{})
		if err != nil || !res.Met(spec) {
			b.Fatalf("seed %d: %v %+v", i+1, err, res.Verdict)
		}
		events += float64(res.Events)
		simNS += float64(res.SimTime)
		wallNS += float64(res.Wall)
		msgs += float64(res.Stats.Network.Sent)
		acquires += float64(len(res.History.Grants))
	}
	b.ReportMetric(msgs/acquires, "msgs/grant")
	b.ReportMetric(events/(simNS/1e9), "events/sim-s")
	b.ReportMetric(simNS/wallNS, "sim/wall")
	b.ReportMetric(acquires/float64(b.N), "grants/run")
}

// BenchmarkStandardRun is one standard run (simrun bench's: 5 replicas, 10
// clients, 3 resources, 60 simulated s, swarm faults, checker included),
// seeds 1..10 in turn, with its allocations.
func BenchmarkStandardRun(b *testing.B) {
	spec := StandardSpec()
	var events, simNS, wallNS float64
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		res, err := Run(spec, uint64(i%10+1), RunOptions{})
		if err != nil || !res.Met(spec) {
			b.Fatalf("seed %d: %v %+v", i%10+1, err, res.Verdict)
		}
		events += float64(res.Events)
		simNS += float64(res.SimTime)
		wallNS += float64(res.Wall)
	}
	b.ReportMetric(events/float64(b.N), "events/run")
	b.ReportMetric(simNS/wallNS, "sim/wall")
}

// BenchmarkCheckStandard is the checker's part of standard runs (seeds
// 1..5, run once, outside the timing): what simrun bench reports as the
// checker's share, to profile on its own (-cpuprofile, -memprofile).
func BenchmarkCheckStandard(b *testing.B) {
	spec := StandardSpec()
	var runs []Result
	var live []string
	for _, c := range spec.Clients {
		live = append(live, c.Name)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		res, err := Run(spec, seed, RunOptions{})
		if err != nil || res.Cut != "" {
			b.Fatalf("seed %d: %v %s", seed, err, res.Cut)
		}
		runs = append(runs, res)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := runs[i%len(runs)]
		if v := judgeRun(r.Plan, r.History, "", live, r.LeaseExcuses(), RunOptions{}); v.Kind != r.Verdict.Kind {
			b.Fatalf("seed %d: verdict %v, the run had %v", r.Seed, v.Kind, r.Verdict.Kind)
		}
	}
}
