package scenarios

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/coverage"
	"github.com/fencesim/fencesim/coverage/branches"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
)

// Guided search steers a swarm by its coverage marks, as AFL steers a
// fuzzer by its edges: it keeps a corpus of plans (seed, drawn options,
// explicit schedule, drawn knobs) whose runs reached a mark no run had
// reached, or a combination of rare marks no run had shown, and derives new
// plans from them by mutating the schedule (move, drop, add or re-aim a
// fault), the options (retune a fault kind and draw the schedule again) or
// a drawn knob, or by running a parent's schedule against a new world seed.
// Parents are chosen with more energy for the rarer marks they reach, the
// rarity counted over every run so far. A share of every round is fresh
// seeds, as the plain swarm draws them, so guidance never starves the plain
// search of its breadth.
//
// It is deterministic from its root seed and independent of the worker
// count: the search proceeds in rounds of a fixed number of plans, all
// derived before the round runs, and folds the round's results into the
// corpus in plan order. Every run is a Plan, so a finding is a replay file
// like any other (NewReplay), and replays and shrinks as usual.

// GuidedOptions tune a guided search.
type GuidedOptions struct {
	// Root is the root seed: fresh plans take seeds Root, Root+1, … in
	// order (the seeds the plain swarm would run), and every mutation is
	// drawn from a stream seeded by Root.
	Root uint64
	// Runs is how many runs the search makes (0: until ctx ends).
	Runs int
	// Round is how many plans each round derives before running them
	// (0: DefaultGuidedRound). Results depend on it, not on Workers.
	Round   int
	Workers int
	Run     RunOptions
	// Branches adds Go's coverage counters of the protocol code to the
	// marks as the search's signal (package coverage/branches): a run
	// that executes a basic block no run had, or one a number of times
	// in a hit-count bucket no run had, joins the corpus, and a parent's
	// energy counts its rare blocks as it counts its rare marks. It needs
	// a binary built with -cover -covermode=atomic (branches.Available);
	// the simulations then run one at a time (RunOptions.Branches), and
	// the search stays deterministic from its root seed and independent
	// of Workers.
	Branches bool
}

// DefaultGuidedRound is the plans per round: enough to keep two workers
// busy, few enough that the corpus learns between rounds.
const DefaultGuidedRound = 8

const (
	// corpusCap bounds the corpus; past it the entry of least energy leaves.
	corpusCap = 128
	// freshShare: one plan in freshShare of a round (after the first) is a
	// fresh seed.
	freshShare = 4
	// rareDivisor: a mark hit by fewer than one run in rareDivisor so far
	// is rare, and combinations of rare marks count as new states.
	rareDivisor = 20
	// mutateTries bounds the attempts to derive a valid plan from a parent.
	mutateTries = 8
)

// GuidedRun is one run of a guided search.
type GuidedRun struct {
	Index  int    // position in the search's order, from 0
	Origin string // "fresh" or the mutations applied, e.g. "move+reseed"
	Parent int    // the Index of the corpus run it was derived from (-1: fresh)
	Result Result
	Err    error
	// Admitted: the run joined the corpus, for Why ("new mark
	// lockd.request-remembered", "new rare combination").
	Admitted bool
	Why      string
}

// Job returns the run as a sweep's job (for reports and repro lines).
func (g GuidedRun) Job() JobResult {
	return JobResult{Index: g.Index, Job: Job{Spec: g.Result.Plan.Spec, Seed: g.Result.Plan.Seed}, Result: g.Result, Err: g.Err}
}

// CorpusEntry is a plan the search keeps to derive from.
type CorpusEntry struct {
	Index int // the run that admitted it
	Plan  Plan
	Marks *coverage.Counts
	// Branches are the run's coverage features (GuidedOptions.Branches).
	Branches []branches.Feature
	Why      string
	// Replay is the run as a replay file records it (without its
	// history, which the corpus does not keep).
	Replay Replay
}

// GuidedStats say what a guided search did.
type GuidedStats struct {
	Runs        int // runs emitted
	Interrupted int
	Corpus      []CorpusEntry // the corpus at the end, in admission order
	Tally       coverage.Tally
	// FirstHit is, per mark, the Index+1 of the first run that reached it
	// (0: never reached).
	FirstHit map[coverage.Mark]int
	// Features and Blocks count the distinct coverage features (block and
	// hit-count bucket) and blocks the runs reached, of AllBlocks in the
	// covered code (GuidedOptions.Branches).
	Features, Blocks, AllBlocks int
	Stopped                     bool // emit asked to stop
}

// guider is a guided search's state between rounds.
type guider struct {
	spec   Spec
	opt    GuidedOptions
	r      *rand.Rand
	fresh  uint64 // the next fresh seed
	corpus []CorpusEntry
	tally  coverage.Tally
	seen   map[string]bool // rare-mark signatures already in the corpus
	first  map[coverage.Mark]int
	// featureRuns counts, per coverage feature, the runs that reached it
	// (GuidedOptions.Branches).
	featureRuns map[branches.Feature]int
	meta        *branches.Meta // names the blocks (nil: by their numbers)
}

// ErrNotSwarm: guided search mutates a swarm's drawn schedule; a scripted
// scenario's faults tell a story its expectation depends on.
var ErrNotSwarm = errors.New("guided search needs a swarm scenario (spec.swarm): it mutates drawn fault schedules, and a scripted scenario's faults are its story")

// Guided runs a guided search of spec and hands every run to emit in
// order, from the caller's goroutine; emit returns false to stop the
// search after that run. A wall budget is the caller's context's deadline.
func Guided(ctx context.Context, spec Spec, opt GuidedOptions, emit func(GuidedRun) bool) (GuidedStats, error) {
	if !spec.Swarm {
		return GuidedStats{}, ErrNotSwarm
	}
	if err := spec.Validate(); err != nil {
		return GuidedStats{}, err
	}
	round := opt.Round
	if round <= 0 {
		round = DefaultGuidedRound
	}
	g := &guider{spec: spec, opt: opt, r: rand.New(rand.NewPCG(opt.Root, 0x47554944_45440000)), // "GUIDED"
		fresh: opt.Root, seen: map[string]bool{}, first: map[coverage.Mark]int{},
		featureRuns: map[branches.Feature]int{}}
	if opt.Branches {
		if err := branches.Available(); err != nil {
			return GuidedStats{}, err
		}
		opt.Run.Branches = true
		g.meta, _ = branches.ReadMeta() // names only: without them, numbers do
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var st GuidedStats
	for n := 0; opt.Runs <= 0 || n < opt.Runs; {
		if ctx.Err() != nil {
			break
		}
		k := round
		if opt.Runs > 0 {
			k = min(k, opt.Runs-n)
		}
		plans := g.derive(k, n == 0)
		sub := SweepOptions{Workers: opt.Workers, Run: opt.Run}
		stop := false
		sweep := Sweep
		if opt.Branches {
			sweep = sweepInOrder
		}
		ss := sweep(ctx, plans.jobs(), sub, func(r JobResult) {
			if stop {
				return
			}
			d := plans[r.Index]
			gr := GuidedRun{Index: n + r.Index, Origin: d.origin, Parent: d.parent, Result: r.Result, Err: r.Err}
			if r.Err == nil {
				gr.Admitted, gr.Why = g.fold(gr.Index, r.Result)
			} else {
				g.tally.Add(nil)
			}
			st.Runs++
			if !emit(gr) {
				stop = true
				st.Stopped = true
				cancel()
			}
		})
		st.Interrupted += ss.Interrupted
		if stop || !ss.Complete() {
			break
		}
		n += k
	}
	st.Corpus, st.Tally, st.FirstHit = g.corpus, g.tally, g.first
	st.Features, st.Blocks = len(g.featureRuns), g.distinctBlocks()
	if g.meta != nil {
		st.AllBlocks = g.meta.Blocks()
	}
	return st, nil
}

// distinctBlocks counts the blocks among the features reached (a block
// reached with several hit-count buckets is one).
func (g *guider) distinctBlocks() int {
	blocks := make(map[uint64]bool, len(g.featureRuns))
	for f := range g.featureRuns { //detlint:sorted (a count)
		blocks[f.Block()] = true
	}
	return len(blocks)
}

// sweepInOrder is Sweep on the caller's goroutine, one job after another,
// each emitted before the next starts (opt.Workers is not used): with
// branch coverage nothing else may execute covered code while a run
// counts, and an emit (a report, a replay file) might.
func sweepInOrder(ctx context.Context, jobs iter.Seq[Job], opt SweepOptions, emit func(JobResult)) SweepStats {
	var st SweepStats
	runOpt := opt.Run
	outer := opt.Run.Stop
	runOpt.Stop = func() bool { return ctx.Err() != nil || outer != nil && outer() }
	i := 0
	for job := range jobs {
		if ctx.Err() != nil {
			return st
		}
		res, err := RunPlan(*job.Plan, runOpt)
		if err == ErrStopped {
			st.Interrupted++
		} else {
			emit(JobResult{Index: i, Job: job, Result: res, Err: err})
			st.Emitted++
		}
		i++
	}
	st.Exhausted = true
	return st
}

// derived is one plan of a round, with where it came from.
type derived struct {
	plan   Plan
	origin string
	parent int
}

type round []derived

func (rd round) jobs() iter.Seq[Job] {
	return func(yield func(Job) bool) {
		for i := range rd {
			p := &rd[i].plan
			if !yield(Job{Spec: p.Spec, Seed: p.Seed, Plan: p}) {
				return
			}
		}
	}
}

// derive makes a round of k plans: all fresh in the first round or while
// the corpus is empty, else one in freshShare fresh and the rest mutants
// of parents chosen by energy.
func (g *guider) derive(k int, first bool) round {
	out := make(round, 0, k)
	// The corpus and the tallies change only when a round's results are
	// folded, so the parents' energies hold for the whole round.
	var es []uint64
	for i := range k {
		if first || len(g.corpus) == 0 || i%freshShare == freshShare-1 {
			out = append(out, g.freshPlan())
			continue
		}
		if es == nil {
			es = g.energies()
		}
		e := g.pick(es)
		if d, ok := g.mutate(e); ok {
			out = append(out, d)
		} else {
			out = append(out, g.freshPlan())
		}
	}
	return out
}

func (g *guider) freshPlan() derived {
	for {
		seed := g.fresh
		g.fresh++
		p, err := NewPlan(g.spec, seed)
		if err == nil { // the spec validated: a seed's plan always does
			return derived{plan: p, origin: "fresh", parent: -1}
		}
	}
}

// weight is a mark's rarity: the fewer runs reached it so far, the more
// (integers, so a choice is the same on every platform).
func (g *guider) weight(m coverage.Mark) uint64 {
	return 1_000_000 / uint64(1+g.tally.RunsHit(m))
}

// energy is an entry's share of the parents: the sum of its marks'
// rarities, so that an entry reaching what few runs reach is mutated most;
// with branch coverage, plus the rarities of its rare features (those
// fewer than one run in rareDivisor reached, as for marks' combinations):
// the common blocks every run executes would otherwise drown the marks.
func (g *guider) energy(e *CorpusEntry) uint64 {
	var s uint64
	for _, m := range coverage.All() {
		if e.Marks.Get(m) > 0 {
			s += g.weight(m)
		}
	}
	for _, f := range e.Branches {
		if n := uint64(g.featureRuns[f]); n*rareDivisor < uint64(g.tally.Runs)+rareDivisor {
			s += 1_000_000 / (1 + n)
		}
	}
	return s + 1
}

// energies are the corpus entries' energies, in corpus order.
func (g *guider) energies() []uint64 {
	es := make([]uint64, len(g.corpus))
	for i := range g.corpus {
		es[i] = g.energy(&g.corpus[i])
	}
	return es
}

// pick chooses a parent with probability proportional to its energy (es:
// the corpus entries', in order).
func (g *guider) pick(es []uint64) *CorpusEntry {
	var total uint64
	for _, e := range es {
		total += e
	}
	x := g.r.Uint64N(total)
	for i, e := range es {
		if x < e {
			return &g.corpus[i]
		}
		x -= e
	}
	return &g.corpus[len(g.corpus)-1]
}

// fold counts a run's marks and admits its plan to the corpus if it
// reached a mark no run had, or a combination of rare marks (with their
// hit counts in powers of two, AFL's buckets) no entry shows.
func (g *guider) fold(index int, res Result) (bool, string) {
	marks := res.Marks
	why := ""
	var sig []byte
	for _, m := range coverage.All() {
		n := marks.Get(m)
		if n == 0 {
			continue
		}
		if g.tally.RunsHit(m) == 0 && why == "" {
			why = "new mark " + m.String()
		}
		if g.tally.RunsHit(m)*rareDivisor < g.tally.Runs+rareDivisor {
			sig = append(sig, byte(m), byte(bucket(n)))
		}
	}
	for _, m := range coverage.All() {
		if marks.Get(m) > 0 && g.first[m] == 0 {
			g.first[m] = index + 1
		}
	}
	g.tally.Add(marks)
	if why == "" && len(sig) > 0 && !g.seen[string(sig)] {
		why = "new rare combination"
	}
	for _, f := range res.Branches { // sorted: the first new feature names the admission
		if g.featureRuns[f] == 0 && why == "" {
			why = "new branch " + g.meta.Name(f)
		}
		g.featureRuns[f]++
	}
	if why == "" {
		return false, ""
	}
	g.seen[string(sig)] = true
	e := CorpusEntry{Index: index, Plan: res.Plan, Marks: marks, Branches: res.Branches, Why: why, Replay: NewReplay(res)}
	if len(g.corpus) < corpusCap {
		g.corpus = append(g.corpus, e)
		return true, why
	}
	es := g.energies()
	low := 0
	for i := range g.corpus {
		if es[i] < es[low] {
			low = i
		}
	}
	g.corpus = append(slices.Delete(g.corpus, low, low+1), e)
	return true, why
}

// bucket is n's power-of-two bucket: 1, 2, 3, 4–7, 8–15, …
func bucket(n uint64) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// mutate derives a valid plan from e by one to three mutations, and in
// half of the cases a new world seed; ok is false if no try gave a valid
// plan.
func (g *guider) mutate(e *CorpusEntry) (derived, bool) {
	for range mutateTries {
		q, origin := g.mutateOnce(e.Plan)
		if g.valid(q) {
			return derived{plan: q, origin: origin, parent: e.Index}, true
		}
	}
	return derived{}, false
}

// mutations are the schedule and option changes, by name.
var mutations = []string{"move", "drop", "add", "re-aim", "retune", "knob"}

func (g *guider) mutateOnce(p Plan) (Plan, string) {
	r := g.r
	end := nemesis.Duration(g.spec.Duration)
	var phase, tail nemesis.Schedule // the safety phase's faults, the final heal
	for _, op := range p.Schedule {
		if op.At < end {
			phase = append(phase, op)
		} else {
			tail = append(tail, op)
		}
	}
	q := p
	origin := ""
	c := p.Cluster()
	for range 1 + r.IntN(3) {
		m := mutations[r.IntN(len(mutations))]
		if len(phase) == 0 && (m == "move" || m == "drop" || m == "re-aim") {
			m = "add"
		}
		switch m {
		case "move":
			i := r.IntN(len(phase))
			phase[i].At = nemesis.Duration(time.Duration(r.Int64N(int64(end))).Truncate(time.Millisecond))
		case "drop":
			i := r.IntN(len(phase))
			phase = slices.Delete(phase, i, i+1)
		case "add":
			// A window of another seed's schedule (with its strikes at
			// Raft's moments and its story strikes, as NewPlan draws
			// them), spliced in.
			s := rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
			fresh := nemesis.Generate(s, nemesis.DrawOptions(s, c), c, time.Duration(end))
			fresh = append(fresh, nemesis.RaftStrikes(s, c, time.Duration(end))...)
			fresh = append(fresh, nemesis.StoryStrikes(s, c, time.Duration(end))...)
			from := nemesis.Duration(r.Int64N(int64(end)))
			for _, op := range fresh {
				if op.At >= from && op.At < from+end/8 {
					phase = append(phase, op)
				}
			}
		case "re-aim":
			// A fault aimed at a named node moves to another node of its
			// role (a replica may become the leader of the moment);
			// selectors (@leader, @subject of a trigger, …) keep their aim.
			var aimed []int
			for i, op := range phase {
				if op.Node != "" && !strings.HasPrefix(op.Node, "@") {
					aimed = append(aimed, i)
				}
			}
			if len(aimed) > 0 {
				op := &phase[aimed[r.IntN(len(aimed))]]
				for ri, role := range [][]string{c.Servers, c.Clients, c.Store} {
					if slices.Contains(role, op.Node) {
						names := role
						if ri == 0 && c.LeaderSelector {
							names = append(slices.Clone(role), nemesis.Leader)
						}
						op.Node = names[r.IntN(len(names))]
						break
					}
				}
			}
		case "retune":
			if q.Options == nil {
				continue
			}
			o := *q.Options
			f := faultOf(&o, r.IntN(numFaultKinds))
			switch r.IntN(3) {
			case 0:
				f.Enabled = !f.Enabled
			case 1:
				f.Probability = min(1, f.Probability*2)
			default:
				f.Probability /= 2
			}
			if o.Validate() != nil {
				continue
			}
			q.Options = &o
			s := rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
			phase = slices.Clone(g.spec.Faults)
			phase = slices.DeleteFunc(phase, func(op nemesis.Op) bool { return op.At >= end })
			phase = append(phase, nemesis.Generate(s, o, c, time.Duration(end))...)
		case "knob":
			g.redrawKnob(&q, r)
		}
		if origin != "" {
			origin += "+"
		}
		origin += m
	}
	if r.IntN(2) == 0 {
		q.Seed = r.Uint64()
		origin += "+reseed"
	}
	if origin == "" {
		origin = "reseed"
		q.Seed = r.Uint64()
	}
	q.Schedule = append(slices.Clone(phase), tail...).Sorted()
	return q, origin
}

// numFaultKinds is how many fault kinds faultOf numbers.
const numFaultKinds = 11

// faultOf returns the i-th fault kind's settings in o.
func faultOf(o *nemesis.Options, i int) *nemesis.Fault {
	return [...]*nemesis.Fault{&o.Pause, &o.Crash, &o.Partition, &o.Loss, &o.Duplicate, &o.Delay,
		&o.Reorder, &o.Drift, &o.Jump, &o.SlowDisk, &o.Aimed}[i]
}

// redrawKnob draws one of the knobs NewPlan draws from the seed again (the
// ones the spec leaves to the draw).
func (g *guider) redrawKnob(q *Plan, r *rand.Rand) {
	seed := r.Uint64()
	switch r.IntN(7) {
	case 6:
		// From the spec's clients, so that a plan that drew none gets
		// them and one that drew some may lose them.
		q.Spec.Clients = scenario.WithThinkTimes(g.spec.Clients, seed)
	case 5:
		if g.spec.ServerSyncDelay == 0 && g.spec.StoreSyncDelay == 0 {
			q.Spec.ServerSyncDelay, q.Spec.StoreSyncDelay = scenario.DrawSyncDelays(seed)
		}
	case 4:
		if g.spec.Buggify == nil {
			q.Spec.Buggify = scenario.DrawBuggify(seed)
		}
	case 0:
		if g.spec.IngressDepth == 0 {
			q.Spec.IngressDepth = scenario.DrawIngressDepth(seed)
		}
	case 1:
		if !g.spec.GroupCommit {
			q.Spec.GroupCommit = !q.Spec.GroupCommit
		}
		if g.spec.GroupCommitWindow == 0 {
			q.Spec.GroupCommitWindow = 0
			if q.Spec.GroupCommit {
				q.Spec.GroupCommitWindow = scenario.DrawGroupCommitWindow(seed)
			}
		}
	case 2:
		if g.spec.TokenOffset == 0 {
			q.Spec.TokenOffset = scenario.DrawTokenOffset(seed)
		}
	default:
		if g.spec.SnapshotEntries == 0 && g.spec.SnapshotBytes == 0 {
			q.Spec.SnapshotEntries, q.Spec.SnapshotBytes = scenario.DrawSnapshot(seed)
		}
	}
}

// valid reports whether a derived plan is one the swarm could have drawn:
// it validates, and with a liveness phase every fault of the safety phase
// is undone by the final heal, so that liveness is judged on a healed
// cluster as in every swarm run.
func (g *guider) valid(q Plan) bool {
	if q.Validate() != nil {
		return false
	}
	if g.spec.Liveness != nil && q.Schedule.CheckUndone(time.Duration(g.spec.Duration)) != nil {
		return false
	}
	return true
}

// HuntGuided is Hunt by guided search: runs of spec from root seed lo until
// the first that misses the expectation (a violation or a liveness
// failure; for the build as it is, an unknown too), or hi-lo+1 runs.
// SeedsTried counts runs; Seed is the finding's world seed, and its plan
// (Result.Plan) is what replays it. Wall is the caller's to measure.
func HuntGuided(ctx context.Context, spec Spec, lo, hi uint64, workers int) (Hunted, error) {
	return HuntGuidedWith(ctx, spec, GuidedOptions{Root: lo, Runs: int(min(hi-lo, 1<<40)) + 1, Workers: workers})
}

// HuntGuidedWith is HuntGuided with every option of the search (opt.Runs
// bounds it; opt.Branches adds branch coverage to its signal).
func HuntGuidedWith(ctx context.Context, spec Spec, opt GuidedOptions) (Hunted, error) {
	out := Hunted{}
	_, err := Guided(ctx, spec, opt, func(gr GuidedRun) bool {
		out.SeedsTried = gr.Index + 1
		if gr.Err != nil {
			return true
		}
		res := gr.Result
		k := res.Verdict.Kind
		switch {
		case k == checker.VerdictUnknown && spec.Mutant == "":
			out.Unknown, out.Seed, out.Result = true, res.Plan.Seed, res
			out.Property, out.Cause = "unknown", UnknownCause(res)
			return false
		case k == checker.VerdictUnknown:
			if out.Unknowns == 0 {
				out.FirstUnknown, out.FirstCause = res.Plan.Seed, UnknownCause(res)
			}
			out.Unknowns++
		case !res.Met(spec) && (k == checker.VerdictViolation || k == checker.VerdictLiveness):
			out.Detected, out.Seed, out.Result = true, res.Plan.Seed, res
			out.Property = res.Verdict.Property()
			if k == checker.VerdictLiveness || out.Property == "" {
				out.Property = "liveness"
			}
			return false
		}
		return true
	})
	return out, err
}
