package checker

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// mutexGenConfig shapes a generated lock history (genMutexHistory).
type mutexGenConfig struct {
	clients   int     // clients contending for the one resource
	ops       int     // lock ops to generate
	ambiguous float64 // probability that an answer is ambiguous
	wait      bool    // acquires wait for the lock (waiters granted out of call order)
	grid      int64   // times are multiples of grid µs: ties at one instant
	touch     float64 // probability that a client's next call is at its previous return
}

// simEvent is one event of genMutexHistory's simulation: a client's
// next call (op < 0), or an attempt of op to take effect.
type simEvent struct {
	at     time.Duration
	seq    int
	client int
	op     int  // index in the history's LockOps, -1 for a call
	last   bool // a waiting acquire's last attempt: busy if still held
	silent bool // an ambiguous op's effect after its answer: no answer now
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(q[i].at, q[j].at), cmp.Compare(q[i].seq, q[j].seq)) < 0
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// genMutexHistory simulates a correct fenced mutex with leases and many
// clients on one resource, and records what the clients saw: acquires
// (waiting ones granted when the lock frees, to whichever waiter tries
// first, so not in call order), renewals and releases of the token a
// client believes it holds, and ambiguous answers (unknown, overloaded,
// not-leader, stale) whose op takes effect before the answer, long after
// it, or never. Every effect happens at one instant inside its op's
// interval, in the simulated service's order, so the history is
// linearizable by construction; ties at one instant come from a coarse
// clock and from calls at the very instant of the previous return.
func genMutexHistory(rng *rand.Rand, cfg mutexGenConfig) History {
	grid := time.Duration(max(1, cfg.grid)) * time.Microsecond
	snap := func(d time.Duration) time.Duration { return (d + grid - 1) / grid * grid }
	tokens := make([]uint64, cfg.clients) // the token each client believes it holds
	var h History
	var q simQueue
	seq := 0
	push := func(e simEvent) { e.seq = seq; seq++; heap.Push(&q, e) }
	for c := range cfg.clients {
		push(simEvent{at: snap(time.Duration(rng.IntN(5000)) * time.Microsecond), client: c, op: -1})
	}
	var holder string
	var token, lastToken uint64
	var expires time.Duration
	const ttl = 20 * time.Millisecond
	ambiguous := []LockStatus{LockUnknown, LockOverloaded, LockNotLeader, LockStale}
	// answer ends op at now with status s (kept if the op was made
	// ambiguous at its call) and schedules its client's next call.
	answer := func(i int, now time.Duration, s LockStatus) {
		op := &h.LockOps[i]
		if op.Outcome == "" {
			op.Outcome = s
		}
		c := 0
		fmt.Sscanf(op.Client, "c%d", &c)
		ret := now
		if op.Outcome == LockUnknown {
			ret = op.Call + 40*time.Millisecond // the client gives up
		} else {
			op.Return = snap(now)
			ret = op.Return
		}
		switch {
		case lockEffectOf(op.Kind, op.Outcome) == effAmbiguous, op.Outcome == LockReleased, op.Outcome == LockNotHolder, op.Outcome == LockBusy:
			tokens[c] = 0
		case op.Outcome == LockGranted:
			tokens[c] = op.Token
		}
		next := ret
		if rng.Float64() >= cfg.touch {
			next = snap(ret + time.Duration(1+rng.IntN(3000))*time.Microsecond)
		}
		push(simEvent{at: next, client: c, op: -1})
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		now := e.at
		if e.op < 0 {
			if len(h.LockOps) >= cfg.ops {
				continue
			}
			op := LockOp{ID: len(h.LockOps) + 1, Client: fmt.Sprintf("c%d", e.client), Resource: "r", Call: now}
			switch t := tokens[e.client]; {
			case t == 0:
				op.Kind = LockAcquire
			case rng.IntN(3) == 0:
				op.Kind, op.Token = LockRelease, t
			default:
				op.Kind, op.Token = LockRenew, t
			}
			i := len(h.LockOps)
			at := snap(now + time.Duration(rng.IntN(1500))*time.Microsecond)
			if rng.Float64() < cfg.ambiguous {
				op.Outcome = ambiguous[rng.IntN(len(ambiguous))]
				h.LockOps = append(h.LockOps, op)
				switch rng.IntN(3) {
				case 0: // no effect
					answer(i, at, op.Outcome)
				case 1: // effect long after the answer: a parked or retried copy
					answer(i, at, op.Outcome)
					push(simEvent{at: snap(at + time.Duration(rng.IntN(60_000))*time.Microsecond), client: e.client, op: i, silent: true})
				default: // effect, then the ambiguous answer
					push(simEvent{at: at, client: e.client, op: i})
				}
				continue
			}
			h.LockOps = append(h.LockOps, op)
			push(simEvent{at: at, client: e.client, op: i})
			continue
		}
		if holder != "" && now >= expires {
			holder, token = "", 0
		}
		op := &h.LockOps[e.op]
		var s LockStatus
		granted := uint64(0)
		switch op.Kind {
		case LockAcquire:
			switch {
			case holder == "":
				lastToken += 1 + uint64(rng.IntN(2)) // other resources' grants skip tokens
				holder, token, expires = op.Client, lastToken, now+ttl
				s, granted = LockGranted, token
			case holder == op.Client:
				expires, s, granted = now+ttl, LockGranted, token
			case cfg.wait && !e.last && !e.silent:
				retry := now + time.Duration(200+rng.IntN(2000))*time.Microsecond
				limit := op.Call + 15*time.Millisecond
				push(simEvent{at: snap(min(retry, limit)), client: e.client, op: e.op, last: retry >= limit})
				continue
			default:
				s = LockBusy
			}
		case LockRenew:
			s = LockNotHolder
			if holder == op.Client && token == op.Token {
				expires, s = now+ttl, LockRenewed
			}
		case LockRelease:
			s = LockNotHolder
			if holder == op.Client && token == op.Token {
				holder, token, s = "", 0, LockReleased
			}
		}
		if e.silent {
			continue
		}
		if op.Outcome == "" && s == LockGranted {
			op.Token = granted
		}
		answer(e.op, now, s)
	}
	for _, op := range h.LockOps {
		h.End = max(h.End, op.Return+time.Second)
	}
	return h
}

// corruptLocks changes one answer of a lock history: a grant reuses the
// token before it, or a busy, not-holder or release answer flips.
func corruptLocks(rng *rand.Rand, h *History) {
	for range 100 {
		op := &h.LockOps[rng.IntN(len(h.LockOps))]
		switch {
		case op.Outcome == LockGranted && op.Token > 1:
			op.Token--
		case op.Outcome == LockBusy:
			op.Outcome, op.Token = LockGranted, uint64(1+rng.IntN(3))
		case op.Outcome == LockReleased:
			op.Outcome = LockNotHolder
		case op.Outcome == LockNotHolder && op.Kind == LockRenew:
			op.Outcome = LockRenewed
		default:
			continue
		}
		return
	}
}

// tokenCorpus generates n lock histories of one resource with many
// clients, ambiguity and ties, and n store histories, the odd ones
// corrupted.
func tokenCorpus(n int) []History {
	hs := make([]History, 0, 2*n)
	for k := range n {
		rng := rand.New(rand.NewPCG(uint64(k+1), 19))
		cfg := mutexGenConfig{clients: 2 + rng.IntN(16), ops: 40 + rng.IntN(160), ambiguous: rng.Float64() * 0.3,
			wait: rng.IntN(2) == 0, grid: []int64{1, 100, 1000}[rng.IntN(3)], touch: rng.Float64() * 0.5}
		h := genMutexHistory(rng, cfg)
		if k%2 == 1 {
			corruptLocks(rng, &h)
		}
		hs = append(hs, h)
		scfg := genConfig{resources: 1, clients: 2 + rng.IntN(14), ops: 20 + rng.IntN(120),
			unknownRate: rng.Float64() * 0.3, staleRate: rng.Float64() * 0.7, readers: rng.IntN(4)}
		sh := genHistory(rng, scfg)
		if k%4 >= 2 {
			tieProgramOrder(&sh)
		}
		if k%2 == 1 {
			corrupt(rng, &sh)
		}
		hs = append(hs, sh)
	}
	return hs
}

// TestTokenOrderAgreesWithSearch: on every partition the complete search
// decides, the token-order procedure decides the same or leaves it
// undecided, and it decides almost all of them.
func TestTokenOrderAgreesWithSearch(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 150
	}
	var decided, undecidedN, agree, searchOpen, illegal int
	for k, h := range tokenCorpus(n) {
		lockParts, storeParts := encodeLockOps(h), encodeOps(h)
		check := func(kind string, r tokenResult, v searchVerdict) {
			if r.decision == tokenUndecided {
				undecidedN++
				t.Logf("history %d (corrupted %v) %s undecided: %s", k, k/2%2 == 1, kind, r.why)
				return
			}
			decided++
			if r.decision == tokenIllegal {
				illegal++
			}
			switch {
			case v == searchExhausted || v == searchMemoryFull:
				searchOpen++
			case (v == searchIllegal) != (r.decision == tokenIllegal):
				t.Errorf("%s: the token-order procedure says %v (%s), the search %v", kind, r.decision, r.why, v)
			default:
				agree++
			}
		}
		budget := searchBudget{steps: 5_000_000, bytes: DefaultSearchBytes}
		for _, p := range lockParts {
			v := searchLinearization(lockState{}, lockNext, lockStable, lockCovers, lockClass, p.typed, budget).verdict
			check("lock", lockByTokens(p.typed), v)
		}
		for _, p := range storeParts {
			v := searchLinearization(registerState{}, registerNext, registerStable, nil, nil, p.typed, budget).verdict
			check("store", registerByTokens(p.typed), v)
		}
	}
	t.Logf("%d partitions decided (%d illegal), %d undecided; %d agree with the search, %d the search did not decide", decided, illegal, undecidedN, agree, searchOpen)
	if illegal == 0 || decided < 20*undecidedN {
		t.Errorf("want illegal partitions found and at most one undecided in twenty: %d decided, %d undecided, %d illegal", decided, undecidedN, illegal)
	}
}

// TestTokenOrderCanaries: each refutation rule of the token-order
// procedure fires on a history built to break it, the complete search
// agrees that the history is illegal, and Check reports the property; and
// each history, with the one answer that breaks it put right, passes.
func TestTokenOrderCanaries(t *testing.T) {
	const R = "r"
	acq := func(id int, c string, tok uint64, call, ret int) LockOp {
		return lockOp(id, c, R, LockAcquire, 0, ms(call), ms(ret), LockGranted).withToken(tok)
	}
	lockCases := []struct {
		name      string
		ops, good []LockOp
		rule      string
	}{
		{"two clients succeed with one token",
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), acq(3, "b", 1, 4, 5)},
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), acq(3, "b", 2, 4, 5)},
			"both succeeded with token 1"},
		{"a token released twice",
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), lockOp(3, "a", R, LockRelease, 1, ms(4), ms(5), LockReleased)},
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), lockOp(3, "a", R, LockRelease, 1, ms(4), ms(5), LockNotHolder)},
			"released token 1 twice"},
		{"a lower token's grant after a higher token's",
			[]LockOp{acq(1, "a", 2, 0, 1), acq(2, "b", 1, 2, 3)},
			[]LockOp{acq(1, "a", 2, 0, 1), acq(2, "b", 3, 2, 3)},
			"cannot take effect after every op of a lower token"},
		{"a release answered before its hold's renewal was called",
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), lockOp(3, "a", R, LockRenew, 1, ms(4), ms(5), LockRenewed)},
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "a", R, LockRelease, 1, ms(2), ms(3), LockReleased), lockOp(3, "a", R, LockRenew, 1, ms(4), ms(5), LockNotHolder)},
			"release by \"a\" cannot take effect"},
		{"a renewal of a token nobody could hold yet",
			[]LockOp{lockOp(1, "a", R, LockRenew, 5, ms(0), ms(1), LockRenewed), acq(2, "a", 5, 2, 3)},
			[]LockOp{lockOp(1, "a", R, LockAcquire, 0, ms(0), ms(1), LockUnknown), lockOp(2, "a", R, LockRenew, 5, ms(2), ms(3), LockRenewed), acq(3, "a", 5, 4, 5)},
			"must begin before any grant of it could take effect"},
		{"an answer the service never gives",
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "b", R, LockAcquire, 0, ms(2), ms(3), LockReleased)},
			[]LockOp{acq(1, "a", 1, 0, 1), lockOp(2, "b", R, LockAcquire, 0, ms(2), ms(3), LockBusy)},
			"which the service never answers to it"},
	}
	for _, tc := range lockCases {
		t.Run(tc.name, func(t *testing.T) {
			p := encodeLockOps(History{LockOps: tc.ops})[0]
			r := lockByTokens(p.typed)
			if r.decision != tokenIllegal || !strings.Contains(r.why, tc.rule) {
				t.Fatalf("got %v (%s), want illegal by %q", r.decision, r.why, tc.rule)
			}
			if v := searchLinearization(lockState{}, lockNext, lockStable, lockCovers, lockClass, p.typed, searchBudget{-1, -1}).verdict; v != searchIllegal {
				t.Errorf("the complete search says %v", v)
			}
			if v := Check(History{LockOps: tc.ops}, Options{}); v.Property() != propLockLinearizable {
				t.Errorf("Check: %v %v", v.Kind, v.Violations)
			}
			good := encodeLockOps(History{LockOps: tc.good})[0]
			if r := lockByTokens(good.typed); r.decision != tokenLinearizable {
				t.Errorf("the history put right: %v (%s)", r.decision, r.why)
			}
		})
	}

	storeCases := []struct {
		name      string
		ops, good []StoreOp
		rule      string
	}{
		{"a read of a value nobody wrote",
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), read(2, "b", R, ms(2), ms(3), 11, 1)},
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), read(2, "b", R, ms(2), ms(3), 10, 1)},
			"which no write wrote"},
		{"a read with another write's token",
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), read(2, "b", R, ms(2), ms(3), 10, 2)},
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), read(2, "b", R, ms(2), ms(3), 10, 1)},
			"but the write of value 10 carried token 1"},
		{"a read of a rejected write",
			[]StoreOp{write(1, "a", R, 2, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeRejected), read(3, "c", R, ms(4), ms(5), 11, 1)},
			[]StoreOp{write(1, "a", R, 2, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeRejected), read(3, "c", R, ms(4), ms(5), 10, 2)},
			"which the store rejected"},
		{"a stale read after a newer write returned",
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 2, 11, ms(2), ms(3), OutcomeAccepted), read(3, "c", R, ms(4), ms(5), 10, 1)},
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 2, 11, ms(2), ms(3), OutcomeAccepted), read(3, "c", R, ms(4), ms(5), 11, 2)},
			"cannot take effect"},
		{"a lower token accepted after a higher one returned",
			[]StoreOp{write(1, "a", R, 2, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeAccepted)},
			[]StoreOp{write(1, "a", R, 2, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeRejected)},
			"cannot take effect"},
		{"a rejection with no higher write applied",
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeRejected)},
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(1), OutcomeAccepted), write(2, "b", R, 1, 11, ms(2), ms(3), OutcomeAccepted)},
			"needs a write of a higher token applied before it returned"},
		{"two writes of one token each read before the other",
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(10), OutcomeAccepted), write(2, "b", R, 1, 11, ms(0), ms(10), OutcomeAccepted),
				read(3, "c", R, ms(1), ms(2), 10, 1), read(4, "d", R, ms(3), ms(4), 11, 1), read(5, "c", R, ms(5), ms(6), 10, 1)},
			[]StoreOp{write(1, "a", R, 1, 10, ms(0), ms(10), OutcomeAccepted), write(2, "b", R, 1, 11, ms(0), ms(10), OutcomeAccepted),
				read(3, "c", R, ms(1), ms(2), 10, 1), read(4, "d", R, ms(3), ms(4), 11, 1), read(5, "c", R, ms(5), ms(6), 11, 1)},
			"admit no order"},
	}
	for _, tc := range storeCases {
		t.Run(tc.name, func(t *testing.T) {
			p := encodeOps(History{Ops: tc.ops})[0]
			r := registerByTokens(p.typed)
			if r.decision != tokenIllegal || !strings.Contains(r.why, tc.rule) {
				t.Fatalf("got %v (%s), want illegal by %q", r.decision, r.why, tc.rule)
			}
			if v := searchLinearization(registerState{}, registerNext, registerStable, nil, nil, p.typed, searchBudget{-1, -1}).verdict; v != searchIllegal {
				t.Errorf("the complete search says %v", v)
			}
			if v := Check(History{Ops: tc.ops}, Options{}); v.Property() != propLinearizable {
				t.Errorf("Check: %v %v", v.Kind, v.Violations)
			}
			good := encodeOps(History{Ops: tc.good})[0]
			if r := registerByTokens(good.typed); r.decision != tokenLinearizable {
				t.Errorf("the history put right: %v (%s)", r.decision, r.why)
			}
		})
	}
}

// TestTokenOrderTailEndsWhereAnUnseenHoldBegins: a's hold (token 10,
// never released) must have expired before a's own busy answer returned,
// and an unseen hold explains that answer: x's (its overloaded acquire),
// from a's busy call on (x's next busy answer is later than y's). Then y
// and x are answered busy, inside a's busy answer. The tail of a's hold
// may not explain them past the point x's unseen hold began: there x
// holds, and a busy answer to x is impossible. y's answer goes into x's
// hold, x's into an unseen hold of y's. The witness once put both into
// a's tail, did not replay, and left a 40-client run's 8,630 lock ops on
// one resource (40 clients × 60 s, seed 3, at fencesim-0.15) to a search
// that ran out of its budget.
func TestTokenOrderTailEndsWhereAnUnseenHoldBegins(t *testing.T) {
	const R = "r"
	open := time.Duration(math.MaxInt64)
	ops := []LockOp{
		lockOp(1, "a", R, LockAcquire, 10, ms(0), ms(1), LockGranted),
		lockOp(2, "x", R, LockAcquire, 0, ms(2), open, LockOverloaded),
		lockOp(3, "y", R, LockAcquire, 0, ms(3), open, LockOverloaded),
		lockOp(4, "a", R, LockAcquire, 0, ms(20), ms(40), LockBusy),
		lockOp(5, "y", R, LockAcquire, 0, ms(29), ms(30), LockBusy),
		lockOp(6, "x", R, LockAcquire, 0, ms(30), ms(35), LockBusy),
	}
	p := encodeLockOps(History{LockOps: ops})[0]
	if v := searchLinearization(lockState{}, lockNext, lockStable, lockCovers, lockClass, p.typed, searchBudget{-1, -1}).verdict; v != searchOK {
		t.Fatalf("the complete search says %v, want linearizable", v)
	}
	if r := lockByTokens(p.typed); r.decision != tokenLinearizable {
		t.Fatalf("got %v (%s), want linearizable", r.decision, r.why)
	}
}

// withToken sets the token an acquire returned.
func (op LockOp) withToken(tok uint64) LockOp { op.Token = tok; return op }

// TestTokenOrderUnansweredWritesCostNoStates: a livelocked client's
// unanswered writes, each with a token of its own above every answered
// write's, are not placed in the witness unless a rejected write needs
// one (placed, each would add a state to the replay's set: the run of
// scenarios' TestUnansweredCallsAreCheckedCheaply, a quarter of a million
// of them, took minutes); the one a rejected write needs is.
func TestTokenOrderUnansweredWritesCostNoStates(t *testing.T) {
	h := unansweredWrites(0)
	for j := range 50_000 {
		h.Ops = append(h.Ops, StoreOp{ID: len(h.Ops), Client: "ghost", Resource: "r", Kind: OpWrite, Token: uint64(2 + j),
			Value: int64(100_000 + j), Call: ms(500) + time.Duration(j)*time.Microsecond, Outcome: OutcomeUnknown})
	}
	p := encodeOps(h)[0]
	if r := registerByTokens(p.typed); r.decision != tokenLinearizable {
		t.Fatalf("%v: %s", r.decision, r.why)
	}
	// A rejected write of token 1 after them: only an unanswered write
	// of a higher token explains it.
	h.Ops = append(h.Ops, StoreOp{ID: len(h.Ops), Client: "c1", Resource: "r", Kind: OpWrite, Token: 1, Value: 999_999,
		Call: ms(1200), Return: ms(1201), Outcome: OutcomeRejected})
	p = encodeOps(h)[0]
	if r := registerByTokens(p.typed); r.decision != tokenLinearizable {
		t.Fatalf("with the rejected write: %v: %s", r.decision, r.why)
	}
}
