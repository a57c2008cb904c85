package scenarios

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// TestJobSetMatchesTheDefinition: All generates exactly the seeds of the
// range in the shard, seed-major, and Seeds and Len count them, including
// at the ends of the uint64 range, where a loop that steps past Hi wraps.
func TestJobSetMatchesTheDefinition(t *testing.T) {
	specs := []Spec{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, c := range []struct{ lo, hi uint64 }{{1, 1}, {0, 20}, {5, 4}, {7, 30}, {math.MaxUint64 - 9, math.MaxUint64}} {
		for n := 1; n <= 4; n++ {
			for i := 0; i <= n; i++ { // i = 0: the zero value, the whole range
				set := JobSet{Specs: specs, Lo: c.lo, Hi: c.hi, Shard: i, Shards: n}
				if i == 0 {
					set.Shards = 0
				}
				var want []Job
				for s := c.lo; s <= c.hi && c.lo <= c.hi; s++ {
					if set.Shards == 0 || int(s%uint64(n))+1 == i {
						for _, sp := range specs {
							want = append(want, Job{Spec: sp, Seed: s})
						}
					}
					if s == math.MaxUint64 {
						break
					}
				}
				var got []Job
				for j := range set.All() {
					got = append(got, j)
					if len(got) > len(want)+3 {
						break // a wrap-around would never end
					}
				}
				if !slices.EqualFunc(got, want, func(a, b Job) bool { return a.Seed == b.Seed && a.Spec.Name == b.Spec.Name }) {
					t.Errorf("%d..%d shard %d/%d: got %v, want %v", c.lo, c.hi, i, n, got, want)
				}
				if set.Len() != uint64(len(want)) || set.Seeds()*3 != uint64(len(want)) {
					t.Errorf("%d..%d shard %d/%d: Len %d, Seeds %d, want %d jobs", c.lo, c.hi, i, n, set.Len(), set.Seeds(), len(want))
				}
			}
		}
	}
	huge := JobSet{Specs: specs, Lo: 0, Hi: math.MaxUint64}
	if huge.Len() != math.MaxUint64 {
		t.Errorf("Len of every seed × 3 specs: got %d, want it saturated", huge.Len())
	}
}

// TestPlanRunStops: a run asks its stop hook every few thousand events and
// gives up with ErrStopped when told to; a hook that never says stop does
// not change the run.
func TestPlanRunStops(t *testing.T) {
	spec, _ := Lookup("partitioned-leader")
	p, err := NewPlan(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := RunPlan(p, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if whole.Events <= 3*stopChunk { // stopped at the third look below
		t.Fatalf("the run fires %d events: too few to be stopped mid-way", whole.Events)
	}
	asked := 0
	never, err := RunPlan(p, RunOptions{Stop: func() bool { asked++; return false }})
	if err != nil || never.TraceHash != whole.TraceHash || never.Verdict.Kind != whole.Verdict.Kind {
		t.Fatalf("with a stop hook that never stops: hash %016x %v, want %016x (%v)", never.TraceHash, never.Verdict.Kind, whole.TraceHash, err)
	}
	if want := int(whole.Events / stopChunk); asked < want {
		t.Fatalf("the hook was asked %d times in %d events, want at least %d", asked, whole.Events, want)
	}
	asked = 0
	_, err = RunPlan(p, RunOptions{Stop: func() bool { asked++; return asked == 3 }})
	if !errors.Is(err, ErrStopped) || asked != 3 {
		t.Fatalf("stopped at the third look: got %v after %d looks, want ErrStopped after 3", err, asked)
	}
}

// TestSweepStreamsAndStops: a sweep over a billion seeds starts only what
// its workers can take, stops every run in flight when its budget runs
// out, drops them without a verdict and returns. Materializing the jobs
// first (what Sweep did) would take tens of gigabytes before the first run.
func TestSweepStreamsAndStops(t *testing.T) {
	spec, _ := Lookup("kleppmann-gc-pause")
	jobs := JobSet{Specs: []Spec{spec}, Lo: 1, Hi: 1_000_000_000}
	last := -1
	st := Sweep(context.Background(), jobs.All(), SweepOptions{Workers: 2, Budget: 300 * time.Millisecond}, func(r JobResult) {
		if r.Index != last+1 && r.Index <= last {
			t.Errorf("emitted job %d after job %d", r.Index, last)
		}
		if r.Err != nil {
			t.Errorf("seed %d: %v", r.Job.Seed, r.Err)
		}
		last = r.Index
	})
	if !st.BudgetSpent || st.Exhausted || st.Complete() || st.Emitted == 0 {
		t.Fatalf("got %+v, want a spent budget, some runs emitted, the rest not started", st)
	}
}

// TestSweepDropsStoppedRuns: runs stopped in flight are counted as
// interrupted, never emitted (so never counted as passes), and the sweep
// says it is not complete.
func TestSweepDropsStoppedRuns(t *testing.T) {
	spec, _ := Lookup("swarm")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := JobSet{Specs: []Spec{spec}, Lo: 1, Hi: 100}
	stopAll := func() bool { cancel(); return true } // the first look stops every run
	emitted := 0
	st := Sweep(ctx, jobs.All(), SweepOptions{Workers: 2, Run: RunOptions{Stop: stopAll}}, func(JobResult) { emitted++ })
	if emitted != 0 || st.Emitted != 0 || st.Interrupted == 0 || st.Interrupted > 4 || st.Complete() || st.BudgetSpent {
		t.Fatalf("got %+v and %d emitted; want no run emitted, 1..4 interrupted, not complete", st, emitted)
	}
	// The same sweep left alone completes, in order.
	jobs.Hi = 6
	var seeds []uint64
	st = Sweep(context.Background(), jobs.All(), SweepOptions{Workers: 2}, func(r JobResult) { seeds = append(seeds, r.Job.Seed) })
	if !st.Complete() || !slices.Equal(seeds, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("got %+v, seeds %v; want complete, 1..6 in order", st, seeds)
	}
}
