package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/fencesim/fencesim/scenarios"
	"github.com/fencesim/fencesim/sim"
)

// benchJSON is what `bench -json` prints.
type benchJSON struct {
	Seeds                      int     `json:"seeds"`
	Acceleration               float64 `json:"acceleration"`
	EventsPerSecond            float64 `json:"events_per_second"`
	CalibrationEventsPerSecond float64 `json:"calibration_events_per_second"`
	Ratio                      float64 `json:"ratio"`
	SeedsPerSecond1            float64 `json:"seeds_per_second_1"`
	SeedsPerSecondAll          float64 `json:"seeds_per_second_all"`
	Workers                    int     `json:"workers"`
	Scaling                    float64 `json:"scaling"`
	CheckerShare               float64 `json:"checker_share"`
	PeakHeapBytes              uint64  `json:"peak_heap_bytes"`
	HeapAfterFirstTenthBytes   uint64  `json:"heap_after_first_tenth_bytes"`
	HeapAfterAllBytes          uint64  `json:"heap_after_all_bytes"`
	Misses                     int     `json:"misses"`
}

// cmdBench measures, in one process, the bare event loop (the calibration),
// the standard run (5 replicas, 10 clients, 3 resources, 60 simulated
// seconds, swarm faults, checker included) on one worker and on every core,
// and the heap across the seeds.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 20, "standard runs per measurement")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the one-worker runs to `file` (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *seeds < 1 {
		fmt.Fprintln(stderr, "simrun bench: usage: simrun bench [-seeds N ≥ 1] [-json]")
		return exitUsage
	}
	var out benchJSON
	out.Seeds = *seeds

	// Calibration: the bare loop over 10k pending events.
	const calEvents = 20_000_000
	start := time.Now()
	sim.BareLoop(10_000, calEvents)
	out.CalibrationEventsPerSecond = calEvents / time.Since(start).Seconds()

	// The standard run, one worker, one seed after another.
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "simrun bench: -cpuprofile: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "simrun bench: -cpuprofile: %v\n", err)
			return exitUsage
		}
	}
	spec := scenarios.StandardSpec()
	var events uint64
	var simTime, wall, check time.Duration
	var ms runtime.MemStats
	for i := range *seeds {
		res, err := scenarios.Run(spec, uint64(i+1), scenarios.RunOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "simrun bench: %v\n", err)
			return exitUsage
		}
		if !res.Met(spec) {
			out.Misses++
		}
		events += res.Events
		simTime += res.SimTime
		wall += res.Wall
		check += res.CheckWall
		runtime.ReadMemStats(&ms)
		out.PeakHeapBytes = max(out.PeakHeapBytes, ms.HeapAlloc)
		if i == (*seeds-1)/10 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			out.HeapAfterFirstTenthBytes = ms.HeapAlloc
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	out.HeapAfterAllBytes = ms.HeapAlloc
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	out.Acceleration = simTime.Seconds() / wall.Seconds()
	out.EventsPerSecond = float64(events) / (wall - check).Seconds()
	out.Ratio = out.EventsPerSecond / out.CalibrationEventsPerSecond
	out.CheckerShare = check.Seconds() / wall.Seconds()
	out.SeedsPerSecond1 = float64(*seeds) / wall.Seconds()

	// Every core: the same seeds again through the sweep's workers.
	out.Workers = runtime.NumCPU()
	jobs := scenarios.Jobs([]scenarios.Spec{spec}, 1, uint64(*seeds), 1, 1)
	start = time.Now()
	scenarios.Sweep(context.Background(), jobs, scenarios.SweepOptions{Workers: out.Workers}, func(scenarios.JobResult) {})
	out.SeedsPerSecondAll = float64(*seeds) / time.Since(start).Seconds()
	out.Scaling = out.SeedsPerSecondAll / out.SeedsPerSecond1

	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, `standard run: 5 replicas, 10 clients, 3 resources, 60 simulated s, swarm faults, checker included; %d seeds
calibration (bare event loop, 10k pending)  %12.0f events/s
protocol events (checker excluded)          %12.0f events/s  = %.1f%% of the calibration
time acceleration (simulated ÷ wall)        %12.0f×
checker share of wall time                  %11.1f%%
seeds/s, 1 worker                           %12.2f
seeds/s, %d workers                          %12.2f  (scaling %.2f×)
peak heap after a run                       %12d bytes
heap after the first tenth / after all      %12d / %d bytes
runs that missed the expectation            %12d
`, out.Seeds, out.CalibrationEventsPerSecond, out.EventsPerSecond, 100*out.Ratio, out.Acceleration, 100*out.CheckerShare,
			out.SeedsPerSecond1, out.Workers, out.SeedsPerSecondAll, out.Scaling, out.PeakHeapBytes,
			out.HeapAfterFirstTenthBytes, out.HeapAfterAllBytes, out.Misses)
	}
	if out.Misses > 0 {
		return exitViolation
	}
	return exitPass
}
