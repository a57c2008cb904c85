package scenarios

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Job is one (scenario, seed) pair of a sweep.
type Job struct {
	Spec Spec
	Seed uint64
}

// Jobs lists every (spec, seed) pair for seeds in [lo, hi] that falls in
// shard i of n (1-based): seed s belongs to shard (s mod n) + 1. Shards are
// disjoint and together give the whole range, whatever the worker count.
func Jobs(specs []Spec, lo, hi uint64, shard, shards int) []Job {
	var jobs []Job
	if hi < lo || shards < 1 || shard < 1 || shard > shards {
		return nil
	}
	for _, s := range specs {
		for seed := lo; ; seed++ {
			if int(seed%uint64(shards))+1 == shard {
				jobs = append(jobs, Job{Spec: s, Seed: seed})
			}
			if seed == hi {
				break
			}
		}
	}
	return jobs
}

// SweepOptions tunes a sweep.
type SweepOptions struct {
	Workers int           // simulations at once; each owns its World, nothing is shared
	Budget  time.Duration // stop starting new jobs after this much wall time (0: none)
	Run     RunOptions
}

// Outcome of one job of a sweep.
type JobResult struct {
	Index  int // position in the job list
	Job    Job
	Result Result
	Err    error
}

// Sweep runs jobs on opt.Workers goroutines, one simulation each, and
// hands every finished job to emit in job order, from the caller's
// goroutine, so output is identical for any worker count. It stops
// starting jobs when ctx is cancelled or the budget runs out, finishes the
// ones in flight, and returns how many jobs were emitted.
func Sweep(ctx context.Context, jobs []Job, opt SweepOptions, emit func(JobResult)) int {
	workers := max(opt.Workers, 1)
	start := time.Now()
	next := make(chan int)
	results := make(chan JobResult, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := Run(jobs[i].Spec, jobs[i].Seed, opt.Run)
				results <- JobResult{Index: i, Job: jobs[i], Result: res, Err: err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range jobs {
			if opt.Budget > 0 && time.Since(start) > opt.Budget {
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()

	// Emit in job order: hold early finishers until their predecessors end.
	pending := map[int]JobResult{}
	want, emitted := 0, 0
	for r := range results {
		pending[r.Index] = r
		for {
			p, ok := pending[want]
			if !ok {
				break
			}
			delete(pending, want)
			emit(p)
			want++
			emitted++
		}
	}
	// Stopped early: what finished beyond a gap, still in order.
	rest := make([]int, 0, len(pending))
	for i := range pending {
		rest = append(rest, i)
	}
	sort.Ints(rest)
	for _, i := range rest {
		emit(pending[i])
		emitted++
	}
	return emitted
}

// Summary aggregates a sweep's results for one scenario.
type Summary struct {
	Scenario   string
	Expect     Expectation
	Seeds      int
	Passes     int
	Violations map[string]int // by property (each run's headline: Expectation.Headline)
	Liveness   int
	Unknowns   int
	Errors     int
	Misses     int // runs that missed the scenario's expectation
	SimTime    time.Duration
	Wall       time.Duration // summed over runs (CPU-ish time, not elapsed)
	Events     uint64
}

// Add folds one job's result into the summary.
func (s *Summary) Add(r JobResult) {
	if r.Err != nil {
		s.Seeds++
		s.Errors++
		s.Misses++
		return
	}
	v := r.Result.Verdict
	s.AddVerdict(v.Kind.String(), r.Job.Spec.Expect.Headline(v), r.Result.Met(r.Job.Spec), r.Result.SimTime, r.Result.Wall, r.Result.Events)
}

// AddVerdict folds one run given by its parts (as a merged JSON result
// carries them) into the summary.
func (s *Summary) AddVerdict(kind, property string, met bool, sim, wall time.Duration, events uint64) {
	s.Seeds++
	switch kind {
	case "pass":
		s.Passes++
	case "violation":
		if s.Violations == nil {
			s.Violations = map[string]int{}
		}
		s.Violations[property]++
	case "liveness":
		s.Liveness++
	case "error":
		s.Errors++
	default:
		s.Unknowns++
	}
	if !met {
		s.Misses++
	}
	s.SimTime += sim
	s.Wall += wall
	s.Events += events
}
