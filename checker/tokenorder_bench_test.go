package checker

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkTokenOrderMillion decides one resource's generated history of
// 10⁶ lock ops (13 clients, ambiguous answers, waiters) and one of 10⁶
// store ops (13 writers, unanswered writes, stale writers, readers) with
// Check, as a run's checker would: the README quotes its figure.
func BenchmarkTokenOrderMillion(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 19))
	locks := genMutexHistory(rng, mutexGenConfig{clients: 13, ops: 1_000_000, ambiguous: 0.05, wait: true, grid: 100, touch: 0.3})
	store := genHistory(rng, genConfig{resources: 1, clients: 13, ops: 1_000_000, unknownRate: 0.02, staleRate: 0.3, readers: 3})
	h := History{LockOps: locks.LockOps, Ops: store.Ops, End: max(locks.End, store.End)}
	b.ResetTimer()
	for b.Loop() {
		if v := Check(h, Options{}); v.Kind != VerdictPass {
			b.Fatalf("verdict %v: %s %+v", v.Kind, v.Unknown, v.Violations)
		}
	}
}

// BenchmarkTokenOrderPartition decides a 60,000-op lock partition and a
// 60,000-op store partition by the token-order procedure alone.
func BenchmarkTokenOrderPartition(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 19))
	locks := encodeLockOps(genMutexHistory(rng, mutexGenConfig{clients: 40, ops: 60_000, ambiguous: 0.05, wait: true, grid: 100, touch: 0.3}))[0]
	store := encodeOps(genHistory(rng, genConfig{resources: 1, clients: 40, ops: 60_000, unknownRate: 0.02, staleRate: 0.3, readers: 3}))[0]
	b.Run("lock", func(b *testing.B) {
		for b.Loop() {
			if r := lockByTokens(locks.typed); r.decision != tokenLinearizable {
				b.Fatalf("%v: %s", r.decision, r.why)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			if r := registerByTokens(store.typed); r.decision != tokenLinearizable {
				b.Fatalf("%v: %s", r.decision, r.why)
			}
		}
	})
}

var _ = time.Second
