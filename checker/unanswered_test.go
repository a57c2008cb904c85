package checker

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// unansweredLocks is a livelocked lock history: two clients take turns
// holding resource "r" (acquire granted, release released, every 10 ms),
// while open acquires — calls never answered, a client retrying without
// end — are called from half way on, past the last answered op, alternating
// between a third and a fourth client.
func unansweredLocks(open int) History {
	var h History
	add := func(op LockOp) {
		op.ID, op.Resource, op.Request = len(h.LockOps), "r", uint64(len(h.LockOps)+1)
		h.LockOps = append(h.LockOps, op)
	}
	const turns = 100
	for k := range turns {
		c := fmt.Sprintf("c%d", k%2)
		t := ms(10 * k)
		add(LockOp{Client: c, Kind: LockAcquire, Call: t, Return: t + ms(1), Outcome: LockGranted, Token: uint64(k + 1)})
		add(LockOp{Client: c, Kind: LockRelease, Token: uint64(k + 1), Call: t + ms(5), Return: t + ms(6), Outcome: LockReleased})
	}
	span := ms(10 * turns)
	for j := range open { // from half way, on past the last answer
		at := span/2 + time.Duration(int64(span)*int64(j)/int64(open))
		add(LockOp{Client: fmt.Sprintf("ghost%d", j%2), Kind: LockAcquire, Call: at, Outcome: LockUnknown})
	}
	return h
}

// unansweredWrites is the store's side of a livelock: a holder writes and
// reads back resource "r" every 10 ms, while open writes with tokens and
// values of their own are called from half way on, past the last answered
// op, and never answered.
func unansweredWrites(open int) History {
	var h History
	add := func(op StoreOp) {
		op.ID, op.Resource = len(h.Ops), "r"
		h.Ops = append(h.Ops, op)
	}
	const turns = 100
	for k := range turns {
		t := ms(10 * k)
		v := int64(k + 1)
		add(StoreOp{Client: "c0", Kind: OpWrite, Token: 1, Value: v, Call: t, Return: t + ms(1), Outcome: OutcomeAccepted})
		add(StoreOp{Client: "c0", Kind: OpRead, Call: t + ms(5), Return: t + ms(6), Outcome: OutcomeAccepted, ReadValue: v, ReadToken: 1})
	}
	span := ms(10 * turns)
	for j := range open { // from half way, on past the last answer
		at := span/2 + time.Duration(int64(span)*int64(j)/int64(open))
		add(StoreOp{Client: "ghost", Kind: OpWrite, Token: 1, Value: int64(1000 + j), Call: at, Outcome: OutcomeUnknown})
	}
	return h
}

// BenchmarkUnanswered checks S7 and S8 on histories with 1k, 2k and 5k
// calls never answered.
func BenchmarkUnanswered(b *testing.B) {
	for _, n := range []int{1000, 2000, 5000} {
		for _, kind := range []string{"acquires", "writes"} {
			h := unansweredLocks(n)
			check := checkLockLinearizable
			if kind == "writes" {
				h, check = unansweredWrites(n), checkLinearizable
			}
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					vs, unknown := check(h, Options{})
					if len(vs) > 0 || len(unknown) > 0 {
						b.Fatalf("violations %v, unknown %v", vs, unknown)
					}
				}
			})
		}
	}
}

// TestUnansweredOpsAreCheap: thousands of calls never answered past the
// last answer (a livelocked run cut at a limit) are checked in a few model
// steps an op and a few MB. The quick search compared every state with
// every other and kept one more state per unanswered acquire (each may
// have granted a token): 5,000 took 84 s and 1.8 GB, 5,000 writes 5 s
// and 590 MB.
func TestUnansweredOpsAreCheap(t *testing.T) {
	const n = 5000
	for _, kind := range []string{"acquires", "writes"} {
		t.Run(kind, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var r searchResult[struct{}]
			if kind == "acquires" {
				res := searchPartitions(encodeLockOps(unansweredLocks(n)), nil, lockState{}, lockNext, lockStable, lockCovers, lockClass, Options{})
				r.verdict, r.steps = res[0].verdict, res[0].steps
			} else {
				res := searchPartitions(encodeOps(unansweredWrites(n)), nil, registerState{}, registerNext, registerStable, nil, nil, Options{})
				r.verdict, r.steps = res[0].verdict, res[0].steps
			}
			runtime.ReadMemStats(&after)
			if r.verdict != searchOK || r.steps > 10*n {
				t.Errorf("verdict %v after %d model steps, want linearizable within %d", r.verdict, r.steps, 10*n)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("the check allocated %d MB, want under 64 MB (it takes about 11)", alloc>>20)
			}
		})
	}
}

// TestQuickStepsAreCharged: the quick search's model steps count toward
// the partition's budget, so a budget too small for them leaves the
// partition undecided instead of proving it for free.
func TestQuickStepsAreCharged(t *testing.T) {
	parts := encodeOps(unansweredWrites(100))
	r := searchPartitions(parts, nil, registerState{}, registerNext, registerStable, nil, nil, Options{})[0]
	if r.verdict != searchOK || r.steps == 0 {
		t.Fatalf("verdict %v after %d steps, want linearizable and the steps counted", r.verdict, r.steps)
	}
	small := Options{Steps: r.steps - 1}
	if r := searchPartitions(parts, nil, registerState{}, registerNext, registerStable, nil, nil, small)[0]; r.verdict != searchExhausted || r.steps > small.Steps {
		t.Errorf("with %d steps: verdict %v after %d steps, want the budget exhausted within it", small.Steps, r.verdict, r.steps)
	}
}

// wideHistory is the complete search's worst case for memory: k writes
// of one token, all concurrent, then a read of a value none wrote, so
// that every order of every subset of the writes is a node to explore;
// and open writes called after it all, which are never candidates but
// make each memo entry's bitset of open ops long (a livelocked run's).
func wideHistory(resource string, k, open int) []StoreOp {
	var ops []StoreOp
	add := func(op StoreOp) {
		op.ID, op.Resource = len(ops), resource
		ops = append(ops, op)
	}
	for j := range k {
		add(StoreOp{Client: fmt.Sprintf("c%d", j), Kind: OpWrite, Token: 1, Value: int64(j + 1), Call: ms(j), Return: ms(100), Outcome: OutcomeAccepted})
	}
	add(StoreOp{Client: "reader", Kind: OpRead, Call: ms(200), Return: ms(201), Outcome: OutcomeAccepted, ReadValue: 999, ReadToken: 1})
	for j := range open {
		add(StoreOp{Client: "ghost", Kind: OpWrite, Token: 1, Value: int64(1000 + j), Call: ms(300 + j), Outcome: OutcomeUnknown})
	}
	return ops
}

// TestSearchMemoryIsBounded: the complete search stops at its byte bound,
// counted, so the same history gives the same verdict after the same
// steps; the verdict is unknown and says which resource and bound, unless
// another resource's violation stands. Unbounded, the search of "wide"
// held 2.0 GB of heap by its 20 M steps (20 s); bounded it stops after
// 1.5 M steps with 170 MB allocated.
func TestSearchMemoryIsBounded(t *testing.T) {
	h := History{Ops: wideHistory("wide", 22, 5000)}
	parts := encodeOps(h)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := searchPartitions(parts, nil, registerState{}, registerNext, registerStable, nil, nil, Options{})[0]
	runtime.ReadMemStats(&after)
	if r.verdict != searchMemoryFull || r.steps >= DefaultSteps {
		t.Fatalf("verdict %v after %d steps, want the byte bound reached before the step budget", r.verdict, r.steps)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*DefaultSearchBytes {
		t.Errorf("the search allocated %d MB, want under three times its bound of %d MB", alloc>>20, DefaultSearchBytes>>20)
	}
	if again := searchPartitions(parts, nil, registerState{}, registerNext, registerStable, nil, nil, Options{})[0]; again.verdict != r.verdict || again.steps != r.steps {
		t.Errorf("a second search gave %v after %d steps, the first %v after %d", again.verdict, again.steps, r.verdict, r.steps)
	}

	v := Check(h, Options{SearchBytes: 4 << 20, SearchOnly: true})
	want := `the linearizability search of the 5023 store ops on resource "wide" reached its bound of 4194304 bytes of memo and work lists (Options.SearchBytes) before deciding`
	if v.Kind != VerdictUnknown || v.Unknown != want {
		t.Errorf("verdict %v, %q; want unknown, %q", v.Kind, v.Unknown, want)
	}
	// A stale read on another resource is a violation all the same.
	h.Ops = append(h.Ops,
		StoreOp{Client: "a", Resource: "other", Kind: OpWrite, Token: 1, Value: 1, Call: ms(0), Return: ms(1), Outcome: OutcomeAccepted},
		StoreOp{Client: "b", Resource: "other", Kind: OpRead, Call: ms(2), Return: ms(3), Outcome: OutcomeAccepted})
	for i := range h.Ops {
		h.Ops[i].ID = i
	}
	if v := Check(h, Options{SearchBytes: 4 << 20, SearchOnly: true}); v.Kind != VerdictViolation || v.Property() != "S8" {
		t.Errorf("verdict %v %s, want the other resource's S8 violation", v.Kind, v.Property())
	}
}
