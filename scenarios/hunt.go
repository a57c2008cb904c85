package scenarios

import (
	"context"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants"
)

// Hunted is what a hunt found.
type Hunted struct {
	Detected bool
	// Seed is the lowest seed whose run missed the expectation; SeedsTried
	// counts the seeds up to and including it (or all of them when nothing
	// was found). Both are the same for any worker count.
	Seed       uint64
	SeedsTried int
	Property   string // the violated property, or "liveness" / "unknown"
	Wall       time.Duration
	Result     Result // the detecting run
	// Unknown: a hunt of the build as it is (no mutant) stopped at Seed
	// because its run ended unknown (Cause says why, UnknownCause): a run
	// the harness could not judge is a finding too, not a seed to sweep
	// past. Result is that run.
	Unknown bool
	Cause   string
	// Unknowns counts the runs of a mutant's hunt that ended unknown: they
	// prove nothing about the planted bug, so the hunt sweeps on, but a
	// hunt that detects nothing says how many there were and the first
	// (FirstUnknown, FirstCause).
	Unknowns     int
	FirstUnknown uint64
	FirstCause   string
}

// HuntScenario is the built-in scenario that catches each planted bug
// fastest: the swarm for most, a scenario telling the one story a bug needs
// where the swarm's random mix tells it only a few seeds per hundred.
func HuntScenario(m lockservice.Mutant) string {
	switch m {
	case mutants.MutClientNoDriftMargin:
		return "lost-grant-reply"
	case mutants.MutExpiryWallclock:
		return "clock-jump-on-leader"
	case mutants.MutReleaseNoOwnerCheck:
		return "late-release"
	case mutants.MutRenewAfterExpiry, mutants.MutStoreNoFence:
		return "kleppmann-gc-pause"
	case mutants.MutStoreFenceVolatile:
		return "kleppmann-gc-pause-store-crash"
	case mutants.MutTokenUnsynced:
		return "restart-all-replicas"
	case mutants.MutLockdForgetsRequest:
		return "lockd-paused-instance"
	case mutants.MutLockdAOFEverySec:
		return "lockd-swarm"
	}
	return "swarm"
}

// Hunt sweeps spec over seeds lo..hi until the first run that misses the
// expectation — for a planted bug, the proof that the harness catches it —
// and stops there. A hunt of the build as it is (spec.Mutant empty) stops
// at a run that ends unknown as well (Hunted.Unknown).
func Hunt(ctx context.Context, spec Spec, lo, hi uint64, workers int) Hunted {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := JobSet{Specs: []Spec{spec}, Lo: lo, Hi: hi}
	out := Hunted{}
	done := 0
	Sweep(ctx, jobs.All(), SweepOptions{Workers: workers}, func(r JobResult) {
		if out.Detected || out.Unknown {
			return // jobs that finished after the first detection
		}
		done++
		// A miss proves the bug only as a violation or a liveness failure;
		// an unknown verdict (step limit, a search out of its step budget) proves nothing.
		k := r.Result.Verdict.Kind
		if r.Err == nil && k == checker.VerdictUnknown {
			if spec.Mutant == "" {
				out.Unknown, out.Seed, out.SeedsTried, out.Result = true, r.Job.Seed, r.Index+1, r.Result
				out.Property, out.Cause = "unknown", UnknownCause(r.Result)
				cancel()
				return
			}
			if out.Unknowns == 0 {
				out.FirstUnknown, out.FirstCause = r.Job.Seed, UnknownCause(r.Result)
			}
			out.Unknowns++
		}
		if r.Err == nil && !r.Result.Met(spec) && (k == checker.VerdictViolation || k == checker.VerdictLiveness) {
			out.Detected, out.Seed, out.SeedsTried, out.Result = true, r.Job.Seed, r.Index+1, r.Result
			out.Property = r.Result.Verdict.Property()
			if out.Property == "" {
				out.Property = r.Result.Verdict.Kind.String()
			}
			if r.Result.Verdict.Kind == checker.VerdictLiveness {
				out.Property = "liveness"
			}
			cancel()
		}
	})
	if !out.Detected && !out.Unknown {
		out.SeedsTried = done
	}
	out.Wall = time.Since(start)
	return out
}
