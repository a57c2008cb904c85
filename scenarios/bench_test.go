package scenarios

import "testing"

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
