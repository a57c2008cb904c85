package checker

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
)

// corrupt changes one outcome of h so that it is (most likely) no longer
// linearizable: a read returns another value, or a grant reuses a token.
func corrupt(rng *rand.Rand, h *History) {
	var reads, grants []int
	for i, op := range h.Ops {
		if op.Kind == OpRead && op.Outcome == OutcomeAccepted {
			reads = append(reads, i)
		}
	}
	for i, op := range h.LockOps {
		if op.Kind == LockAcquire && op.Outcome == LockGranted && op.Token > 1 {
			grants = append(grants, i)
		}
	}
	if len(grants) > 0 && rng.IntN(2) == 0 {
		h.LockOps[grants[rng.IntN(len(grants))]].Token--
		return
	}
	if len(reads) > 0 {
		h.Ops[reads[rng.IntN(len(reads))]].ReadValue += 7
	}
}

// TestQuickSearch: the search backtracks out of a wrong first choice, and
// refuses a history no order explains.
func TestQuickSearch(t *testing.T) {
	model := FencedMutexModel()
	op := func(client string, kind LockKind, token uint64, out LockStatus, outToken uint64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: lockInput{Resource: "r", Client: client, Kind: kind, Token: token},
			Output: lockOutput{Outcome: out, Token: outToken}, Call: call, Return: ret}
	}
	// B's acquire is called first but answered busy only after A released:
	// it must go before the release, although A's release was called and
	// answered... inside B's interval.
	ok := []porcupine.Operation{
		op("A", LockAcquire, 0, LockGranted, 1, 0, 10),
		op("B", LockAcquire, 0, LockBusy, 0, 20, 60),
		op("A", LockRelease, 1, LockReleased, 0, 30, 40),
		op("B", LockAcquire, 0, LockGranted, 2, 50, 70),
	}
	if !proved(linearizableQuickly(lockState{}, lockNext, lockCovers, lockClass, typedOf[lockInput, lockOutput](ok), 1<<20)) {
		t.Fatalf("a linearizable history was not proven")
	}
	// The same, but B's busy answer is called after the release returned.
	bad := slices.Clone(ok)
	bad[1].Call, bad[1].Return = 45, 48
	if proved(linearizableQuickly(lockState{}, lockNext, lockCovers, lockClass, typedOf[lockInput, lockOutput](bad), 1<<20)) {
		t.Fatalf("a busy answer after the release was linearized")
	}
	if res := porcupine.CheckOperations(model, bad); res {
		t.Fatalf("sanity: porcupine calls the bad history linearizable")
	}
}

// TestQuickSearchDefersUnansweredWrites is the shape of the standard run's
// seed 2838: an unanswered write took effect only after a read that did
// not see it, and dozens of other unanswered writes follow. Call order
// commits to the write before the read and drowns in the others'
// combinations; the second order places unanswered ops only when an
// answered one needs them, and finds the linearization at once.
func TestQuickSearchDefersUnansweredWrites(t *testing.T) {
	const open = math.MaxInt64
	write := func(value int64, out Outcome, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: registerInput{Resource: "r", Kind: OpWrite, Token: 1, Value: value},
			Output: registerOutput{Outcome: out}, Call: call, Return: ret}
	}
	read := func(value int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: registerInput{Resource: "r", Kind: OpRead},
			Output: registerOutput{Outcome: OutcomeAccepted, Value: value, Token: 1}, Call: call, Return: ret}
	}
	ops := []porcupine.Operation{
		write(1, OutcomeAccepted, 0, 10),
		write(2, OutcomeUnknown, 20, open), // took effect after the next read
		read(1, 25, 30),
	}
	for j := range int64(30) { // lost
		ops = append(ops, write(100+j, OutcomeUnknown, 40+10*j, open))
	}
	ops = append(ops, read(2, 500, 510))
	if proved(newQuickSearch(registerState{}, registerNext, nil, nil, typedOf[registerInput, registerOutput](ops)).run(false, 1<<20)) {
		t.Fatalf("call order proved it: the test no longer needs the second order")
	}
	if !proved(linearizableQuickly(registerState{}, registerNext, nil, nil, typedOf[registerInput, registerOutput](ops), 1<<20)) {
		t.Fatalf("the second order did not find the linearization")
	}
	// The complete search decides it too, within a few hundred steps.
	if r := searchLinearization(registerState{}, registerNext, registerStable, nil, nil, typedOf[registerInput, registerOutput](ops), searchBudget{1000, DefaultSearchBytes}); r.verdict != searchOK {
		t.Fatalf("the complete search gave %v after %d steps", r.verdict, r.steps)
	}
	// And refutes it at once if the last read saw a value nobody wrote.
	ops[len(ops)-1].Output = registerOutput{Outcome: OutcomeAccepted, Value: 999, Token: 1}
	if r := searchLinearization(registerState{}, registerNext, registerStable, nil, nil, typedOf[registerInput, registerOutput](ops), searchBudget{100_000, DefaultSearchBytes}); r.verdict != searchIllegal {
		t.Fatalf("the complete search gave %v after %d steps on an illegal history", r.verdict, r.steps)
	}
}

// typedOf turns hand-built porcupine operations into the searches' (an op
// returning at math.MaxInt64 is open).
func typedOf[I, O any](ops []porcupine.Operation) []typedOp[I, O] {
	out := make([]typedOp[I, O], len(ops))
	for i, op := range ops {
		out[i] = typedOp[I, O]{In: op.Input.(I), Out: op.Output.(O), Call: op.Call, Return: op.Return, Client: op.ClientId, Open: op.Return == math.MaxInt64}
	}
	return out
}

// proved drops the steps a quick search used.
func proved(ok bool, _ int64) bool { return ok }
