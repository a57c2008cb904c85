package scenarios

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkJudgeStandard measures the checker's part of the standard run
// (what simrun bench reports as the checker's share) on the histories of
// standard seeds 1..30, judged again and again.
func BenchmarkJudgeStandard(b *testing.B) {
	spec := StandardSpec()
	type in struct {
		p   Plan
		res Result
	}
	var runs []in
	for seed := uint64(1); seed <= 30; seed++ {
		p, err := NewPlan(spec, seed)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(spec, seed, RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, in{p, res})
	}
	var names []string
	for _, c := range spec.Clients {
		names = append(names, c.Name)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		for _, r := range runs {
			judgeRun(r.p, r.res.History, r.res.Cut, names, r.res.LeaseExcuses(), RunOptions{})
		}
	}
	// CPU time (user + system, every thread) per judged run: steadier
	// than wall time on a shared machine, and what the checker costs a
	// sweep whose workers keep every core busy.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*len(runs)), "cpu-ns/run")
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
