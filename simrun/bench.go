package simrun

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/fencesim/fencesim/internal/cpuprofile"
	"github.com/fencesim/fencesim/scenarios"
	"github.com/fencesim/fencesim/sim"
)

// benchJSON is what `bench -json` prints.
type benchJSON struct {
	Seeds                      int     `json:"seeds"`
	Acceleration               float64 `json:"acceleration"`
	EventsPerSecond            float64 `json:"events_per_second"`
	EventsPerRun               float64 `json:"events_per_run"`
	CalibrationEventsPerSecond float64 `json:"calibration_events_per_second"`
	Ratio                      float64 `json:"ratio"`
	SeedsPerSecond1            float64 `json:"seeds_per_second_1"`
	SeedsPerSecondAll          float64 `json:"seeds_per_second_all"`
	Workers                    int     `json:"workers"`
	Scaling                    float64 `json:"scaling"`
	CheckerShare               float64 `json:"checker_share"`
	PeakHeapBytes              uint64  `json:"peak_heap_bytes"`
	AllocatedBytesPerRun       uint64  `json:"allocated_bytes_per_run"`
	HeapAfterFirstBytes        uint64  `json:"heap_after_first_bytes"`
	HeapAfterAllBytes          uint64  `json:"heap_after_all_bytes"`
	HeapFirstSeeds             int     `json:"heap_first_seeds"`
	HeapAllSeeds               int     `json:"heap_all_seeds"`
	Misses                     int     `json:"misses"`
}

// cmdBench measures, in one process, the bare event loop (the calibration),
// the standard run (5 replicas, 10 clients, 3 resources, 60 simulated
// seconds, swarm faults, checker included) on one worker and on every core,
// and the heap across many seeds.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 20, "standard runs per speed measurement")
	memSeeds := fs.Int("memory", 0, "also sweep this many seeds on every core and compare the heap after the first 1% (at least 100) with the heap after all; 0 compares the first tenth of -seeds with all of them")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the one-worker runs to `file` (go tool pprof)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 || *seeds < 1 || *memSeeds < 0 {
		fmt.Fprintln(stderr, "simrun bench: usage: simrun bench [-seeds N ≥ 1] [-memory M ≥ 0] [-json] [-cpuprofile file]")
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
	stopProfile := func() {}
	if *cpuProfile != "" {
		stop, err := cpuprofile.Start(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "simrun bench: -cpuprofile: %v\n", err)
			return exitUsage
		}
		stopProfile = stop
		defer stop() // on an early return; stopProfile below ends it otherwise
	}
	spec := scenarios.StandardSpec()
	var events uint64
	var simTime, wall, check time.Duration
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	allocStart := ms.TotalAlloc
	peak := startPeakSampler()
	for i := range *seeds {
		res, err := scenarios.Run(spec, uint64(i+1), scenarios.RunOptions{})
		if err != nil {
			peak.stop()
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
		if *memSeeds == 0 && i == (*seeds-1)/10 {
			out.HeapFirstSeeds = i + 1
			out.HeapAfterFirstBytes = heapAfterGC()
		}
	}
	out.PeakHeapBytes = peak.stop()
	runtime.ReadMemStats(&ms)
	out.AllocatedBytesPerRun = (ms.TotalAlloc - allocStart) / uint64(*seeds)
	if *memSeeds == 0 {
		out.HeapAllSeeds = *seeds
		out.HeapAfterAllBytes = heapAfterGC()
	}
	stopProfile()
	out.Acceleration = simTime.Seconds() / wall.Seconds()
	out.EventsPerRun = float64(events) / float64(*seeds)
	out.EventsPerSecond = float64(events) / (wall - check).Seconds()
	out.Ratio = out.EventsPerSecond / out.CalibrationEventsPerSecond
	out.CheckerShare = check.Seconds() / wall.Seconds()
	out.SeedsPerSecond1 = float64(*seeds) / wall.Seconds()

	// Every core: the same seeds again through the sweep's workers.
	out.Workers = runtime.NumCPU()
	jobs := scenarios.JobSet{Specs: []scenarios.Spec{spec}, Lo: 1, Hi: uint64(*seeds)}
	start = time.Now()
	scenarios.Sweep(context.Background(), jobs.All(), scenarios.SweepOptions{Workers: out.Workers}, func(scenarios.JobResult) {})
	out.SeedsPerSecondAll = float64(*seeds) / time.Since(start).Seconds()
	out.Scaling = out.SeedsPerSecondAll / out.SeedsPerSecond1

	// Memory over many seeds: the heap after the first 1% (at least 100)
	// against the heap after all of them, each read after a collection
	// with no run in flight.
	if *memSeeds > 0 {
		out.HeapFirstSeeds = min(*memSeeds, max(100, *memSeeds/100))
		out.HeapAllSeeds = *memSeeds
		first := scenarios.JobSet{Specs: []scenarios.Spec{spec}, Lo: 1, Hi: uint64(out.HeapFirstSeeds)}
		rest := scenarios.JobSet{Specs: []scenarios.Spec{spec}, Lo: first.Hi + 1, Hi: uint64(*memSeeds)}
		count := func(r scenarios.JobResult) {
			if r.Err != nil || !r.Result.Met(spec) {
				out.Misses++
				fmt.Fprintf(stderr, "simrun bench: seed %d missed the expectation: %v %s\n", r.Job.Seed, r.Err, r.Result.Verdict.Kind)
			}
		}
		opt := scenarios.SweepOptions{Workers: out.Workers}
		scenarios.Sweep(context.Background(), first.All(), opt, count)
		out.HeapAfterFirstBytes = heapAfterGC()
		scenarios.Sweep(context.Background(), rest.All(), opt, count)
		out.HeapAfterAllBytes = heapAfterGC()
	}

	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, `standard run: 5 replicas, 10 clients, 3 resources, 60 simulated s, swarm faults, checker included; %d seeds
calibration (bare event loop, 10k pending)  %12.0f events/s
protocol events (checker excluded)          %12.0f events/s  = %.1f%% of the calibration  (%.0f events per run)
time acceleration (simulated ÷ wall)        %12.0f×
checker share of wall time                  %11.1f%%
seeds/s, 1 worker                           %12.2f
seeds/s, %d workers                          %12.2f  (scaling %.2f×)
peak heap, one worker                       %12d bytes  (%d bytes allocated per run)
heap after %d seeds / after %d             %12d / %d bytes
runs that missed the expectation            %12d
`, out.Seeds, out.CalibrationEventsPerSecond, out.EventsPerSecond, 100*out.Ratio, out.EventsPerRun, out.Acceleration,
			100*out.CheckerShare, out.SeedsPerSecond1, out.Workers, out.SeedsPerSecondAll, out.Scaling, out.PeakHeapBytes,
			out.AllocatedBytesPerRun, out.HeapFirstSeeds, out.HeapAllSeeds, out.HeapAfterFirstBytes, out.HeapAfterAllBytes, out.Misses)
	}
	if out.Misses > 0 {
		return exitViolation
	}
	return exitPass
}

// heapAfterGC collects and returns the bytes of live heap objects.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakSampler reads the heap every millisecond from its own goroutine (the
// simulation runs on the caller's), so that the peak within a run is seen,
// not only the heap between runs. runtime/metrics reads without stopping
// the world.
type peakSampler struct {
	quit chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func startPeakSampler() *peakSampler {
	p := &peakSampler{quit: make(chan struct{})}
	p.wg.Go(func() {
		sample := []metrics.Sample{{Name: heapObjects}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				p.peak = max(p.peak, sample[0].Value.Uint64())
			}
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
		}
	})
	return p
}

// stop ends the sampling and returns the highest reading.
func (p *peakSampler) stop() uint64 {
	close(p.quit)
	p.wg.Wait()
	return p.peak
}
