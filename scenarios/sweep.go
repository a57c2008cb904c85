package scenarios

import (
	"context"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Job is one (scenario, seed) pair of a sweep.
type Job struct {
	Spec Spec
	Seed uint64
	// Plan, if set, is run as written instead of drawn from Spec and Seed
	// (guided search's mutated plans; Spec and Seed are its own).
	Plan *Plan
}

// JobSet is a sweep's work: every (spec, seed) pair for seeds in [Lo, Hi]
// that falls in shard Shard of Shards (1-based; zero means the whole
// range): seed s belongs to shard (s mod n) + 1. Shards are disjoint and
// together give the whole range, whatever the worker count. A JobSet is a
// description, not a list: All generates the pairs one at a time, so a
// sweep over a billion seeds costs no more memory than one over ten.
type JobSet struct {
	Specs         []Spec
	Lo, Hi        uint64
	Shard, Shards int
}

// shard returns the set's shard i of n, the zero value meaning 1/1.
func (j JobSet) shard() (uint64, uint64) {
	return uint64(max(j.Shard, 1)), uint64(max(j.Shards, 1))
}

// firstSeed returns the lowest seed of the range in the set's shard.
func (j JobSet) firstSeed() (uint64, bool) {
	i, n := j.shard()
	if j.Hi < j.Lo || i > n {
		return 0, false
	}
	// The wanted residue is i-1; step from Lo up to it.
	d := (i - 1 + n - j.Lo%n) % n
	if j.Hi-j.Lo < d {
		return 0, false
	}
	return j.Lo + d, true
}

// Seeds counts the seeds of the range that fall in the set's shard,
// saturating at the largest uint64 (the whole range holds one more).
func (j JobSet) Seeds() uint64 {
	first, ok := j.firstSeed()
	if !ok {
		return 0
	}
	_, n := j.shard()
	return min((j.Hi-first)/n, math.MaxUint64-1) + 1
}

// Len counts the jobs (seeds × specs), saturating at the largest uint64.
func (j JobSet) Len() uint64 {
	s, k := j.Seeds(), uint64(len(j.Specs))
	if k != 0 && s > math.MaxUint64/k {
		return math.MaxUint64
	}
	return s * k
}

// All generates the jobs in seed-major order: every spec of a seed before
// the next seed. A sweep stopped early (a budget, SIGINT) has therefore run
// every scenario over the same seeds, never the first scenario alone.
func (j JobSet) All() iter.Seq[Job] {
	return func(yield func(Job) bool) {
		seed, ok := j.firstSeed()
		if !ok {
			return
		}
		_, n := j.shard()
		for {
			for _, s := range j.Specs {
				if !yield(Job{Spec: s, Seed: seed}) {
					return
				}
			}
			if j.Hi-seed < n { // the next seed would pass Hi (or wrap around)
				return
			}
			seed += n
		}
	}
}

// SweepOptions tunes a sweep.
type SweepOptions struct {
	Workers int // simulations at once; each owns its World, nothing is shared
	// Budget is the sweep's wall time (0: none): when it runs out, no job
	// starts and the runs in flight are stopped and dropped.
	Budget time.Duration
	Run    RunOptions
}

// JobResult is the outcome of one job of a sweep.
type JobResult struct {
	Index  int // position in the job order
	Job    Job
	Result Result
	Err    error
}

// SweepStats says how much of its work a sweep did.
type SweepStats struct {
	Emitted int // jobs run to a verdict (or an error) and handed to emit
	// Interrupted counts the runs stopped in flight by the budget or the
	// context: they have no verdict, were not emitted, and count as
	// neither pass nor failure.
	Interrupted int
	// Exhausted: every job of the sequence was started.
	Exhausted   bool
	BudgetSpent bool // the budget, not the caller's context, stopped the sweep
}

// Complete reports whether every job ran to a verdict.
func (s SweepStats) Complete() bool { return s.Exhausted && s.Interrupted == 0 }

// indexed is a job with its position in the job order.
type indexed struct {
	i   int
	job Job
}

// Sweep runs jobs on opt.Workers goroutines, one simulation each, and hands
// every finished job to emit in job order, from the caller's goroutine, so
// output is identical for any worker count. At most 2·Workers jobs are
// started and not yet emitted at any time, which bounds what waits for a
// slow predecessor whatever the number of jobs. When ctx is cancelled or
// the budget runs out, no job starts, the runs in flight stop within a few
// thousand events (RunOptions.Stop) and are dropped, and Sweep returns.
func Sweep(ctx context.Context, jobs iter.Seq[Job], opt SweepOptions, emit func(JobResult)) SweepStats {
	workers := max(opt.Workers, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var budgetSpent, stopped, exhausted atomic.Bool
	if opt.Budget > 0 {
		t := time.AfterFunc(opt.Budget, func() { budgetSpent.Store(true); cancel() })
		defer t.Stop()
	}
	defer context.AfterFunc(ctx, func() { stopped.Store(true) })()
	runOpt := opt.Run
	if outer := opt.Run.Stop; outer != nil {
		runOpt.Stop = func() bool { return stopped.Load() || outer() }
	} else {
		runOpt.Stop = stopped.Load
	}

	window := 2 * workers
	slots := make(chan struct{}, window) // one per job started and not yet emitted
	next := make(chan indexed)
	results := make(chan JobResult, window)
	go func() {
		defer close(next)
		i := 0
		for job := range jobs {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil {
				return
			}
			select {
			case next <- indexed{i, job}:
			case <-ctx.Done():
				return
			}
			i++
		}
		exhausted.Store(true)
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				var res Result
				var err error
				if j.job.Plan != nil {
					res, err = RunPlan(*j.job.Plan, runOpt)
				} else {
					res, err = Run(j.job.Spec, j.job.Seed, runOpt)
				}
				results <- JobResult{Index: j.i, Job: j.job, Result: res, Err: err}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	// Emit in job order: hold early finishers until their predecessors end.
	// Every started job sends exactly one result, so nothing is left over.
	var st SweepStats
	pending := make(map[int]JobResult, window)
	want := 0
	for r := range results {
		pending[r.Index] = r
		for p, ok := pending[want]; ok; p, ok = pending[want] {
			delete(pending, want)
			want++
			<-slots
			if p.Err == ErrStopped {
				st.Interrupted++
				continue
			}
			emit(p)
			st.Emitted++
		}
	}
	st.Exhausted, st.BudgetSpent = exhausted.Load(), budgetSpent.Load()
	return st
}

// Summary aggregates a sweep's results for one scenario. It counts runs
// by the verdict's kind as a word ("pass", "violation", "liveness",
// "unknown", "error" for a run that could not start, and any kind the
// checker adds later), so neither a sweep nor a merge needs to know every
// kind to count it.
type Summary struct {
	Scenario   string
	Expect     Expectation
	Seeds      int
	Kinds      map[string]int // runs by verdict kind
	Violations map[string]int // by property (each run's headline: Expectation.Headline)
	Missed     map[string]int // runs that missed the scenario's expectation, by verdict kind
	Misses     int
	SimTime    time.Duration
	Wall       time.Duration // summed over runs (CPU-ish time, not elapsed)
	Events     uint64
}

// Add folds one job's result into the summary.
func (s *Summary) Add(r JobResult) {
	if r.Err != nil {
		s.AddVerdict("error", "", false, 0, 0, 0)
		return
	}
	v := r.Result.Verdict
	s.AddVerdict(v.Kind.String(), r.Job.Spec.Expect.Headline(v), r.Result.Met(r.Job.Spec), r.Result.SimTime, r.Result.Wall, r.Result.Events)
}

// AddVerdict folds one run given by its parts (as a merged JSON result
// carries them) into the summary.
func (s *Summary) AddVerdict(kind, property string, met bool, sim, wall time.Duration, events uint64) {
	s.Seeds++
	bump(&s.Kinds, kind)
	if kind == "violation" {
		bump(&s.Violations, property)
	}
	if !met {
		s.Misses++
		bump(&s.Missed, kind)
	}
	s.SimTime += sim
	s.Wall += wall
	s.Events += events
}

func bump(m *map[string]int, k string) {
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[k]++
}
