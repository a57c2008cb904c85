package checker

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestProgramOrder: an op called at the very instant its own client's
// previous op returned follows it (the recorder stamps both with one
// instant); the same tie with another client's op stays concurrent. In S8
// and S7 alike.
func TestProgramOrder(t *testing.T) {
	write := StoreOp{ID: 1, Client: "A", Resource: "r", Kind: OpWrite, Token: 1, Value: 7, Call: ms(0), Return: ms(10), Outcome: OutcomeAccepted}
	read := func(client string) StoreOp { // the register as it was before the write
		return StoreOp{ID: 2, Client: client, Resource: "r", Kind: OpRead, Call: ms(10), Return: ms(20), Outcome: OutcomeAccepted}
	}
	if got, want := properties(Check(History{Ops: []StoreOp{write, read("A")}}, Options{})), []string{"S8"}; !slices.Equal(got, want) {
		t.Errorf("A's read after its own write: got %v, want %v", got, want)
	}
	if got := Check(History{Ops: []StoreOp{write, read("B")}}, Options{}); got.Kind != VerdictPass {
		t.Errorf("B's read concurrent with A's write: got %v %+v, want pass", got.Kind, got.Violations)
	}

	// A released token 1 and, at that instant, asked again: answered with
	// token 1, as if it still held the lock.
	locks := []LockOp{
		lockOp(1, "A", "r", LockAcquire, 1, ms(0), ms(5), LockGranted),
		lockOp(2, "A", "r", LockRelease, 1, ms(5), ms(10), LockReleased),
		lockOp(3, "A", "r", LockAcquire, 1, ms(10), ms(20), LockGranted),
	}
	if got, want := properties(Check(History{LockOps: locks}, Options{})), []string{"S7"}; !slices.Equal(got, want) {
		t.Errorf("A's grant after its own release: got %v, want %v", got, want)
	}
	locks[2].Call = ms(9) // truly concurrent: the grant may come first
	if got := Check(History{LockOps: locks}, Options{}); got.Kind != VerdictPass {
		t.Errorf("A's grant concurrent with its release: got %v %+v, want pass", got.Kind, got.Violations)
	}

	// rapid's history shrunk (TestGenLocksClientsSequential): A, holding
	// token 1, is granted token 2 at the instant it calls the release of
	// token 1. The grant came first, so token 1 had expired and the
	// release could not succeed; porcupine's view agrees. Had B been
	// granted token 2, the release could have come first.
	locks = []LockOp{
		lockOp(1, "A", "r", LockAcquire, 1, ms(0), ms(1), LockGranted),
		lockOp(2, "A", "r", LockAcquire, 2, ms(8), ms(10), LockGranted),
		lockOp(3, "A", "r", LockRelease, 1, ms(10), ms(11), LockReleased),
	}
	if got, want := properties(Check(History{LockOps: locks}, Options{})), []string{"S7"}; !slices.Equal(got, want) {
		t.Errorf("A's new grant before its own release of the old: got %v, want %v", got, want)
	}
	if _, _, res, _, exact := LockLinearizabilityInfo(History{LockOps: locks}, 10*time.Second); res != porcupine.Illegal || !exact {
		t.Errorf("porcupine on A's new grant before its own release: got %v (exact %v), want %v", res, exact, porcupine.Illegal)
	}
	locks[1].Client = "B"
	if got := Check(History{LockOps: locks}, Options{}); got.Kind != VerdictPass {
		t.Errorf("B's grant at the instant A released: got %v %+v, want pass", got.Kind, got.Violations)
	}
}

// TestSearchDecidesAmbiguousLocks: a long lock history with unanswered
// and ambiguous ops, and a grant of a token the service never issued half
// way through, is refuted within the default budget, not left unknown.
// Porcupine alone does not decide it in 10 s; without the mutex's
// simulation preorder in the memo, nor does the search within 20 M steps.
func TestSearchDecidesAmbiguousLocks(t *testing.T) {
	h := genHistory(rand.New(rand.NewPCG(1, 2)), genConfig{resources: 1, clients: 3, ops: 2000, unknownRate: 0.05, locks: true})
	for i := len(h.LockOps) / 2; i < len(h.LockOps); i++ {
		if op := &h.LockOps[i]; op.Kind == LockAcquire && op.Outcome == LockGranted {
			op.Token += 1000
			break
		}
	}
	p := encodeLockOps(h)[0]
	r := searchLinearization(lockState{}, lockNext, lockStable, lockCovers, lockClass, p.typed, searchBudget{DefaultSteps, DefaultSearchBytes})
	if r.verdict != searchIllegal {
		t.Fatalf("got verdict %v after %d steps, want illegal", r.verdict, r.steps)
	}
}

// TestUnansweredReadsAreDropped: a read without an answer constrains
// nothing, so it is not searched over (nor shown to porcupine).
func TestUnansweredReadsAreDropped(t *testing.T) {
	h := History{Ops: []StoreOp{
		{ID: 1, Client: "A", Resource: "r", Kind: OpWrite, Token: 1, Value: 7, Call: ms(0), Return: ms(10), Outcome: OutcomeAccepted},
		{ID: 2, Client: "B", Resource: "r", Kind: OpRead, Call: ms(1), Outcome: OutcomeUnknown},
	}}
	parts := encodeOps(h)
	if len(parts) != 1 || len(parts[0].typed) != 1 || parts[0].src(0).ID != 1 {
		t.Fatalf("got partitions %+v, want only the write", parts)
	}
}

// TestOptionsHaveNoClock: no field of Options is a duration, so no
// wall-clock budget can change a verdict; a verdict depends on the step
// budget only.
func TestOptionsHaveNoClock(t *testing.T) {
	typ := reflect.TypeFor[Options]()
	for f := range typ.Fields() {
		if f.Type == reflect.TypeFor[time.Duration]() {
			t.Errorf("Options.%s is a duration: a verdict would depend on the machine's load", f.Name)
		}
	}
}

// agreementCorpus generates n histories of small partitions, the odd ones
// corrupted (a read sees another value, or a grant reuses a token), with
// unanswered ops, stale writers, readers and sometimes lock ops.
func agreementCorpus(n int) []History {
	hs := make([]History, n)
	for k := range hs {
		rng := rand.New(rand.NewPCG(uint64(k+1), 2026))
		cfg := genConfig{resources: 1 + rng.IntN(3), clients: 2 + rng.IntN(3), ops: 20 + rng.IntN(100),
			unknownRate: rng.Float64() * 0.25, staleRate: rng.Float64() * 0.5, readers: rng.IntN(3), locks: rng.IntN(2) == 0}
		hs[k] = genHistory(rng, cfg)
		if k%4 >= 2 {
			tieProgramOrder(&hs[k])
		}
		if k%2 == 1 {
			corrupt(rng, &hs[k])
		}
	}
	return hs
}

// tieProgramOrder moves every store op's call back to the instant its
// client's previous op returned, when that is at most 3ms earlier, as the
// recorder stamps them: the widened intervals keep a linearizable history
// linearizable, and give both encodings of program order work.
func tieProgramOrder(h *History) {
	last := make(map[string]int) // client → index of its latest op
	for i := range h.Ops {       // genHistory's ops are in call order per client
		op := &h.Ops[i]
		if j, ok := last[op.Client]; ok {
			prev := h.Ops[j]
			if prev.Outcome != OutcomeUnknown && prev.Return <= op.Call && op.Call-prev.Return <= ms(3) {
				op.Call = prev.Return
			}
		}
		last[op.Client] = i
	}
}

// corpusTally counts what a search gave on the corpus's partitions.
type corpusTally struct {
	partitions, ok, illegal, unknown int
	illegalHistories                 int // with at least one illegal partition
	slowest                          time.Duration
}

// searchCorpus decides every partition of hs with searchLinearization and
// calls each with the partition's porcupine ops, exactness and verdict.
func searchCorpus(hs []History, each func(ops []porcupine.Operation, model porcupine.Model, exact bool, v searchVerdict)) (t corpusTally) {
	add := func(v searchVerdict, d time.Duration) {
		t.partitions++
		t.slowest = max(t.slowest, d)
		switch v {
		case searchOK:
			t.ok++
		case searchIllegal:
			t.illegal++
		default:
			t.unknown++
		}
	}
	timed := func(search func() searchVerdict) searchVerdict {
		start := time.Now()
		v := search()
		add(v, time.Since(start))
		return v
	}
	if each == nil {
		each = func([]porcupine.Operation, porcupine.Model, bool, searchVerdict) {}
	}
	for _, h := range hs {
		before := t.illegal
		for _, p := range encodeOps(h) {
			v := timed(func() searchVerdict {
				return searchLinearization(registerState{}, registerNext, registerStable, nil, nil, p.typed, searchBudget{DefaultSteps, DefaultSearchBytes}).verdict
			})
			each(p.ops(), FencedRegisterModel(), p.exact, v)
		}
		for _, p := range encodeLockOps(h) {
			v := timed(func() searchVerdict {
				return searchLinearization(lockState{}, lockNext, lockStable, lockCovers, lockClass, p.typed, searchBudget{DefaultSteps, DefaultSearchBytes}).verdict
			})
			each(p.ops(), FencedMutexModel(), p.exact, v)
		}
		if t.illegal > before {
			t.illegalHistories++
		}
	}
	return t
}

// TestSearchAgreesWithPorcupine: on 1,000 generated histories, half of
// them corrupted, the project's search decides every partition, and
// porcupine, where it decides within its budget and sees the same order
// (exact), gives the same verdict; it must decide at least 90% of them.
func TestSearchAgreesWithPorcupine(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 histories")
	}
	hs := agreementCorpus(1000)
	compared, porcupineUnknown, inexact, tied, exactN := 0, 0, 0, 0, 0
	tally := searchCorpus(hs, func(ops []porcupine.Operation, model porcupine.Model, exact bool, v searchVerdict) {
		if !exact {
			inexact++
		}
		if !exact || v == searchExhausted {
			return
		}
		exactN++
		if slices.ContainsFunc(ops, func(op porcupine.Operation) bool { return op.Call%3 == 1 }) {
			tied++ // program order re-timed for porcupine, exactly
		}
		res, _ := porcupine.CheckOperationsVerbose(model, ops, 200*time.Millisecond)
		switch {
		case res == porcupine.Unknown:
			porcupineUnknown++
		case (res == porcupine.Ok) != (v == searchOK):
			t.Errorf("porcupine says %v, the search %v, on %d ops", res, v, len(ops))
		default:
			compared++
		}
	})
	t.Logf("%d histories, %d illegal; %d partitions: %d linearizable, %d not, %d unknown; %d compared with porcupine, which gave %d unknown within 200ms; %d not exact",
		len(hs), tally.illegalHistories, tally.partitions, tally.ok, tally.illegal, tally.unknown, compared, porcupineUnknown, inexact)
	t.Logf("%d of the compared partitions hold ops ordered by program order alone", tied)
	// Porcupine has 200 ms of wall time a partition: were it to run out
	// everywhere (a slow or loaded machine), nothing would be compared.
	if compared*10 < exactN*9 {
		t.Errorf("porcupine decided only %d of the %d exact partitions (%d unknown): fewer than 90%% compared", compared, exactN, porcupineUnknown)
	}
	if tied < 200 {
		t.Errorf("only %d compared partitions have program-order ties: the corpus does not test their encoding", tied)
	}
	if tally.unknown > 0 {
		t.Errorf("the search left %d partitions undecided", tally.unknown)
	}
	if tally.illegalHistories < len(hs)*45/100 {
		t.Errorf("only %d of %d histories illegal: the corpus does not test refutation", tally.illegalHistories, len(hs))
	}
}

// BenchmarkCorpusSearch times the project's search on the agreement
// corpus, and reports the slowest partition and the undecided ones.
func BenchmarkCorpusSearch(b *testing.B) {
	hs := agreementCorpus(1000)
	var tally corpusTally
	for b.Loop() {
		tally = searchCorpus(hs, nil)
	}
	b.ReportMetric(float64(tally.slowest.Microseconds())/1000, "max-partition-ms")
	b.ReportMetric(float64(tally.unknown), "unknown")
	b.ReportMetric(float64(tally.partitions), "partitions")
}

// BenchmarkCorpusPorcupine times porcupine alone on the same corpus with
// the old checker's budget (10 s per partition), and reports the slowest
// partition and its undecided ones: "old" in the old checker's encoding
// (unanswered reads kept, open to the end; ties concurrent), "new" in
// LinearizabilityInfo's.
func BenchmarkCorpusPorcupine(b *testing.B) {
	hs := agreementCorpus(1000)
	for _, enc := range []string{"old", "new"} {
		b.Run(enc, func(b *testing.B) {
			var unknown, partitions int
			var slowest time.Duration
			check := func(model porcupine.Model, ops []porcupine.Operation) {
				start := time.Now()
				if res, _ := porcupine.CheckOperationsVerbose(model, ops, 10*time.Second); res == porcupine.Unknown {
					unknown++
				}
				partitions++
				slowest = max(slowest, time.Since(start))
			}
			for b.Loop() {
				unknown, partitions, slowest = 0, 0, 0
				for _, h := range hs {
					if enc == "new" {
						for _, p := range encodeOps(h) {
							check(FencedRegisterModel(), p.ops())
						}
						for _, p := range encodeLockOps(h) {
							check(FencedMutexModel(), p.ops())
						}
						continue
					}
					for _, ops := range oldEncoding(h) {
						check(FencedRegisterModel(), ops)
					}
					for _, p := range encodeLockOps(h) {
						check(FencedMutexModel(), plainTimes(p.typed))
					}
				}
			}
			b.ReportMetric(float64(slowest.Microseconds())/1000, "max-partition-ms")
			b.ReportMetric(float64(unknown), "unknown")
			b.ReportMetric(float64(partitions), "partitions")
		})
	}
}

// oldEncoding is the old checker's S8 encoding, for the benchmark: every
// store op, unanswered reads included, per resource, real time with ties
// concurrent, unanswered ops open to the end.
func oldEncoding(h History) [][]porcupine.Operation {
	all := h
	all.Ops = nil
	for _, op := range h.Ops {
		if op.Kind == OpRead && op.Outcome == OutcomeUnknown {
			op.Kind = OpWrite // stand-in to get through encodeOps; restored below
			op.Token = math.MaxUint64
		}
		all.Ops = append(all.Ops, op)
	}
	var out [][]porcupine.Operation
	for _, p := range encodeOps(all) {
		for i := range p.typed {
			if in := &p.typed[i].In; in.Kind == OpWrite && in.Token == math.MaxUint64 {
				in.Kind, in.Token = OpRead, 0
			}
		}
		out = append(out, plainTimes(p.typed))
	}
	return out
}

// plainTimes boxes ops with their true times, ties concurrent and open ops
// returning after everything, as the old checker did.
func plainTimes[I, O any](ops []typedOp[I, O]) []porcupine.Operation {
	var last int64
	for _, op := range ops {
		last = max(last, op.Call)
		if !op.Open {
			last = max(last, op.Return)
		}
	}
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		ret := op.Return
		if op.Open {
			ret = last + 1
		}
		out[i] = porcupine.Operation{ClientId: op.Client, Input: op.In, Call: op.Call, Output: op.Out, Return: ret}
	}
	return out
}

// TestSearchDoesNotForceEqualWrite: an accepted write equal to the
// register (same token and value) leaves this state unchanged but not a
// later one, so the complete search must not place it at once. W(1,7),
// then W'(1,7) and W(1,8) concurrent, then a read of 7: W, W(1,8), W',
// read is a linearization.
func TestSearchDoesNotForceEqualWrite(t *testing.T) {
	w := func(id, v int, call, ret int) StoreOp {
		return StoreOp{ID: id, Client: string(rune('A' + id)), Resource: "r", Kind: OpWrite, Token: 1, Value: int64(v), Call: ms(call), Return: ms(ret), Outcome: OutcomeAccepted}
	}
	h := History{Ops: []StoreOp{
		w(1, 7, 0, 10),
		w(2, 7, 20, 40),
		w(3, 8, 20, 40),
		{ID: 4, Client: "C4", Resource: "r", Kind: OpRead, ReadValue: 7, ReadToken: 1, Call: ms(50), Return: ms(60), Outcome: OutcomeAccepted},
	}}
	p := encodeOps(h)[0]
	r := searchLinearization(registerState{}, registerNext, registerStable, nil, nil, p.typed, searchBudget{DefaultSteps, DefaultSearchBytes})
	if r.verdict != searchOK {
		t.Fatalf("the complete search gave %v after %d steps, want ok (W, W(1,8), W', read)", r.verdict, r.steps)
	}
}
