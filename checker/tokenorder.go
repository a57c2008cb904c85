package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The token-order procedure decides a partition without searching for a
// serialization order: it reads the order from the tokens, as Elle reads
// a version order from the data. Every grant has a unique fencing token,
// so the holds of a resource follow each other in token order; the store
// accepts a write only if its token is at least the highest accepted, so
// the applied writes follow each other in token order too. Given that
// order, every other constraint is a bound on where an op may take
// effect, and one sweep at the earliest points decides.
//
// Both procedures work on points: each op takes effect at one instant of
// its interval [call, return] (open ops: [call, ∞)). The intervals are
// first re-timed as porcupineTimes does (every instant t becomes three,
// so that an op that its own client's previous op returned at the very
// instant it was called follows it strictly); then a sequence of points,
// ties broken by a rank that says which op of a required pair comes
// first, respects real time whenever every op's point is inside its
// re-timed interval (see sweepOrder). When the re-timing is not exact
// (two clients' return→call pairs at one instant), points still give
// real linearizations, so a pass stands, but an illegal finding is left
// to the complete search.
//
// A pass is always a witness: the procedure builds one order of the ops
// and replays it through the model (replayOrder), keeping the set of
// states the nondeterministic model may be in, so the lease expiries, the
// ambiguous ops' effects and the unanswered writes' fates are chosen by
// the model itself. An illegal finding is one of a few rules, each proved
// in its comment; each says which ops are involved. Everything else —
// a witness the replay refuses — is undecided, and the complete search
// (searchLinearization) decides it.

// tokenDecision is what the token-order procedure concluded about a
// partition.
type tokenDecision uint8

const (
	tokenUndecided    tokenDecision = iota // the complete search must decide
	tokenLinearizable                      // a witness order replayed
	tokenIllegal                           // one of the rules refutes it
)

// tokenResult is the token-order procedure's conclusion. For an illegal
// partition, why is a sentence naming the rule that refutes it and
// involved the ops (partition indices) it concerns; for an undecided
// one, why says what the procedure could not settle (for tests and
// measurements).
type tokenResult struct {
	decision tokenDecision
	why      string
	involved []int
	refuted  bool // undecided only because the re-timing is not exact
}

func undecided(why string) tokenResult { return tokenResult{decision: tokenUndecided, why: why} }

// illegalBecause is an illegal finding, or an undecided one when the
// re-timing is not exact (points then order more pairs than real time
// does, so a point argument proves nothing illegal).
func illegalBecause(exact bool, why string, involved ...int) tokenResult {
	if !exact {
		r := undecided("the re-timing is not exact (two clients' return→call pairs at one instant), and " + why)
		r.refuted = true
		return r
	}
	return tokenResult{decision: tokenIllegal, why: why, involved: involved}
}

// placement is where the witness order puts one op: at point (re-timed),
// ties broken by slot, then rank (see the callers), then op index.
type placement struct {
	point int64
	slot  int64
	rank  uint8
	op    int32
}

// comparePlacements orders placements by point, slot, rank, op. It
// returns at the first difference: cmp.Or would compute all four
// comparisons for every pair, and sorting witnesses was a sixth of the
// token-order procedures' time.
func comparePlacements(a, b placement) int {
	switch {
	case a.point != b.point:
		return cmp.Compare(a.point, b.point)
	case a.slot != b.slot:
		return cmp.Compare(a.slot, b.slot)
	case a.rank != b.rank:
		return cmp.Compare(a.rank, b.rank)
	}
	return cmp.Compare(a.op, b.op)
}

// retimed returns each op's interval in porcupine's re-timed instants
// (see porcupineTimes), with open ops returning at math.MaxInt64, and
// whether the re-timing orders ops exactly as precedes does.
func retimed[I, O any](ops []typedOp[I, O]) (calls, rets []int64, exact bool) {
	calls, rets, exact = porcupineTimes(ops)
	for i := range ops {
		if ops[i].Open {
			rets[i] = math.MaxInt64
		}
	}
	return calls, rets, exact
}

// looseTimes returns each op's interval with every instant t widened to
// [3t, 3t+1] and program order at one instant ignored: an op precedes
// another in these times only if it returned strictly before the other
// was called, which precedes implies, so every linearization has points
// in these intervals, and a refutation in them is one in real time.
func looseTimes[I, O any](ops []typedOp[I, O]) (calls, rets []int64) {
	calls, rets = make([]int64, len(ops)), make([]int64, len(ops))
	for i, op := range ops {
		calls[i], rets[i] = 3*op.Call, 3*op.Return+1
		if op.Open {
			rets[i] = math.MaxInt64
		}
	}
	return calls, rets
}

// byTokens runs a token-order procedure (decide, on the given times):
// on the re-timed intervals, whose witness orders respect real time and
// program order; and, when those are not exact and it found the
// partition illegal, again on loose intervals, which every
// linearization respects, so that a refutation there stands.
func byTokens[I, O any](ops []typedOp[I, O], decide func(ops []typedOp[I, O], calls, rets []int64, exact bool) tokenResult) tokenResult {
	calls, rets, exact := retimed(ops)
	r := decide(ops, calls, rets, exact)
	if exact || r.decision != tokenUndecided || !r.refuted {
		return r
	}
	lc, lr := looseTimes(ops)
	if loose := decide(ops, lc, lr, true); loose.decision == tokenIllegal {
		return loose
	}
	return r
}

// maxAnonCandidates bounds the ambiguous acquires the lock's witness
// considers for one unseen hold: the latest called before the busy answer
// it explains.
const maxAnonCandidates = 512

// maxReplayStates bounds the set of states a witness's replay keeps: past
// it the witness is given up (the partition is left to the search), so
// that a replay never costs the square of a partition's size.
const maxReplayStates = 1 << 12

// replayOrder checks a witness: every answered op is placed exactly once,
// every placed op at a point inside its re-timed interval (so that the
// order respects real time) and after the ops it comes After (program
// order at one instant), and the model, stepping
// the set of states it may be in (less covered states), accepts the
// ops in order. Open ops left out take effect never, which the models
// always allow.
func replayOrder[S comparable, I, O any](init S, next func([]S, S, I, O) []S, covers func(a, b S) bool, coarse func(S) S, ops []typedOp[I, O], calls, rets []int64, order []placement) bool {
	seen := make([]bool, len(ops))
	for _, p := range order {
		i := p.op
		if seen[i] || p.point < calls[i] || p.point > rets[i] {
			return false
		}
		// Program order at one instant: the ops i comes After must be
		// placed before it. The re-timing orders them strictly, but a
		// zero-length op between two such pairs is clamped (see
		// porcupineTimes), so this is checked, not assumed.
		for _, j := range ops[i].After {
			if !seen[j] {
				return false
			}
		}
		seen[i] = true
	}
	for i := range ops {
		if !ops[i].Open && !seen[i] {
			return false
		}
	}
	prune := newStateSet(covers, coarse)
	states := []S{init}
	var buf []S
	for _, p := range order {
		op := &ops[p.op]
		buf = buf[:0]
		for _, s := range states {
			buf = next(buf, s, op.In, op.Out)
		}
		buf = prune.reduce(buf, 0)
		if len(buf) == 0 || len(buf) > maxReplayStates {
			return false
		}
		states, buf = buf, states
	}
	return true
}

// sortPlacements orders a witness. A witness is built as a long run in
// order (the chain of holds or of applied writes, at their least points)
// followed by the answers placed into it (busy, not-holder, rejected
// writes): the run is kept, only the rest is sorted, and the two are
// merged — sorting all of it was a seventh of the lock procedure's time.
func sortPlacements(order []placement) {
	k := 1
	for k < len(order) && comparePlacements(order[k-1], order[k]) <= 0 {
		k++
	}
	if k >= len(order) {
		return
	}
	rest := order[k:]
	slices.SortFunc(rest, comparePlacements)
	if comparePlacements(order[k-1], rest[0]) <= 0 {
		return
	}
	// Merge: the run is copied out, and the merged order written from the
	// front never overtakes the unread part of rest (it has written at
	// most i+j ≤ k+j places).
	run := slices.Clone(order[:k])
	i, j, o := 0, 0, 0
	for i < len(run) && j < len(rest) {
		if comparePlacements(run[i], rest[j]) <= 0 {
			order[o], i = run[i], i+1
		} else {
			order[o], j = rest[j], j+1
		}
		o++
	}
	copy(order[o:], run[i:]) // what is left of rest is in place already
}

// --- The fenced register (S8) ---

// registerByTokens decides a partition of store ops against the fenced
// register from the order of the tokens.
//
// The applied writes take effect in token order (a write applies only
// with a token at least the highest applied), so they form a chain of
// token groups; within a group (one token, several writes) the order is
// free. Given the chain, the constraints are: each applied write lies in
// its interval; a read of write w lies after w and before the next
// applied write (a read of the initial value before the first); a
// rejected write with token t lies after the first applied write of a
// token above t. All are of the form "x no earlier than y" or "x in its
// interval", so the least points — every op as early as its call and its
// predecessors allow — are feasible iff any points are (the least
// solution of a system of lower bounds, checked against the returns).
//
// Writes that were accepted, and unanswered writes some read saw, are
// applied. Within a group, write j's point is the latest of the group's
// entry, its call and the calls of the reads of the writes before it, so
// the group's exit (its last write's reads included) does not depend on
// the inner order, and an inner order exists iff no write must both
// precede and follow another: j may not come before i when j's key (its
// call, or its reads' latest call) exceeds i's deadline (its return, or
// its reads' earliest return). That relation is acyclic iff a
// topological order exists, found greedily (groupOrder); the write
// placed first is the one with the earliest call that may go first,
// which is what a rejected write of a lower token needs.
//
// An unanswered write no read saw may or may not have applied: the
// witness places it at its least point in the chain and lets the
// replay choose; it only ever helps a rejected write (by being a higher
// applied write earlier than the next one that must apply).
func registerByTokens(ops []typedOp[registerInput, registerOutput]) tokenResult {
	return byTokens(ops, registerByTokensAt)
}

func registerByTokensAt(ops []typedOp[registerInput, registerOutput], calls, rets []int64, exact bool) tokenResult {
	n := len(ops)
	byValue := make(map[int64]int32, n/2)
	for i := range ops {
		if ops[i].In.Kind != OpWrite {
			continue
		}
		if _, dup := byValue[ops[i].In.Value]; dup {
			return undecided(fmt.Sprintf("two writes carry the value %d, so a read of it does not name its write", ops[i].In.Value))
		}
		byValue[ops[i].In.Value] = int32(i)
	}

	// Attach every read to the write it saw (-1: the initial value).
	saw := make([]int32, n) // read → the write it saw; -1 for the initial value, and for writes
	for i := range saw {
		saw[i] = -1
	}
	nReads := make([]int32, n)
	readCall := make([]int64, n) // per write: the latest call of its reads
	readRet := make([]int64, n)  // per write: the earliest return of its reads
	initialCall := int64(math.MinInt64)
	for i := range ops {
		op := &ops[i]
		if op.In.Kind != OpRead {
			continue
		}
		v, t := op.Out.Value, op.Out.Token
		w, ok := byValue[v]
		switch {
		case ok && v == 0 && t == 0 && ops[w].In.Token == 0:
			return undecided("a write of value 0 with token 0 is indistinguishable from the initial value")
		case !ok && v == 0 && t == 0:
			saw[i] = -1
			initialCall = max(initialCall, calls[i])
			continue
		case !ok:
			return illegalBecause(true, fmt.Sprintf("a read returned value %d (token %d), which no write wrote", v, t), i)
		case ops[w].In.Token != t:
			return illegalBecause(true, fmt.Sprintf("a read returned value %d with token %d, but the write of value %d carried token %d", v, t, v, ops[w].In.Token), i, int(w))
		case ops[w].Out.Outcome == OutcomeRejected:
			return illegalBecause(true, fmt.Sprintf("a read returned value %d, which the store rejected", v), i, int(w))
		}
		saw[i] = w
		if nReads[w] == 0 {
			readCall[w], readRet[w] = calls[i], rets[i]
		} else {
			readCall[w], readRet[w] = max(readCall[w], calls[i]), min(readRet[w], rets[i])
		}
		nReads[w]++
	}

	reads := readIndex(saw, nReads)

	// The writes that may apply, by token: definite ones (accepted, or
	// seen by a read) and optional ones (unanswered, unseen).
	var writes, rejected []int32
	for i := range ops {
		if ops[i].In.Kind != OpWrite {
			continue
		}
		if ops[i].Out.Outcome == OutcomeRejected {
			rejected = append(rejected, int32(i))
		} else {
			writes = append(writes, int32(i))
		}
	}
	definite := func(w int32) bool { return ops[w].Out.Outcome == OutcomeAccepted || nReads[w] > 0 }
	slices.SortFunc(writes, func(a, b int32) int {
		return cmp.Or(cmp.Compare(ops[a].In.Token, ops[b].In.Token), cmp.Compare(calls[a], calls[b]), cmp.Compare(a, b))
	})
	key := func(w int32) int64 {
		if nReads[w] > 0 {
			return max(calls[w], readCall[w])
		}
		return calls[w]
	}
	deadline := func(w int32) int64 {
		if nReads[w] > 0 {
			return min(rets[w], readRet[w])
		}
		return rets[w]
	}

	order := make([]placement, 0, n)
	var slot int64
	place := func(i int32, point int64) {
		order = append(order, placement{point: point, slot: slot, op: i})
		slot++
	}
	for i := range ops {
		if ops[i].In.Kind == OpRead && saw[i] == -1 { // a read of the initial value
			place(int32(i), calls[i])
		}
	}
	// firsts: each group's token and the point of its first write, for
	// the rejected writes. An unseen unanswered write that may be a
	// group's first (opt) is placed only if a rejected write needs it:
	// placed, it doubles the states the replay keeps, and a livelocked
	// client leaves a quarter of a million of them.
	type first struct {
		token uint64
		point int64
		slot  int64
		opt   int32 // the unanswered write that is the group's first, or -1
	}
	firsts := make([]first, 0, len(writes)) // at most one per write
	P := initialCall                        // the earliest point the next group may begin
	var jobs, optional []int32
	for lo := 0; lo < len(writes); {
		t := ops[writes[lo]].In.Token
		hi := lo
		jobs, optional = jobs[:0], optional[:0]
		for ; hi < len(writes) && ops[writes[hi]].In.Token == t; hi++ {
			if w := writes[hi]; definite(w) {
				jobs = append(jobs, w)
			} else {
				optional = append(optional, w) // sorted by call
			}
		}
		lo = hi
		if len(jobs) == 0 {
			// Only unseen unanswered writes: the earliest-called one may
			// be the first applied write above a rejected one.
			u := optional[0]
			firsts = append(firsts, first{token: t, point: max(P, calls[u]), slot: slot, opt: u})
			slot++
			continue
		}
		for _, w := range jobs {
			if max(P, calls[w]) > deadline(w) {
				return illegalBecause(exact, describeLateWrite(ops, w, nReads[w] > 0), append([]int{int(w)}, int32sToInts(reads.of(w))...)...)
			}
		}
		seq, ok := groupOrder(jobs, key, deadline, func(w int32) int64 { return calls[w] })
		if !ok {
			return illegalBecause(exact, fmt.Sprintf("the %d writes with token %d admit no order: each must come before another whose reads or call come after its own reads or answer", len(jobs), t), int32sToInts(jobs)...)
		}
		minDeadline := deadline(seq[0])
		for _, w := range seq {
			minDeadline = min(minDeadline, deadline(w))
		}
		if u := optional; len(u) > 0 && calls[u[0]] < calls[seq[0]] && calls[u[0]] <= minDeadline {
			// An unseen unanswered write of the same token may be
			// applied first, earlier: its key is its call, below every
			// deadline of the group, so the group's order stays valid.
			firsts = append(firsts, first{token: t, point: max(P, calls[u[0]]), slot: slot, opt: u[0]})
			slot++
		} else {
			firsts = append(firsts, first{token: t, point: max(P, calls[seq[0]]), slot: slot, opt: -1})
		}
		exit := P
		for _, w := range seq {
			at := max(exit, calls[w])
			place(w, at)
			exit = max(exit, key(w))
			for _, r := range reads.of(w) {
				place(r, max(calls[r], at))
			}
		}
		P = exit
	}

	// Each rejected write lies after the earliest applied write of a
	// token above its own: the least such point is the suffix minimum of
	// the groups' first points (a lower bound, whichever groups apply).
	suffix := make([]first, len(firsts)+1)
	suffix[len(firsts)] = first{point: math.MaxInt64, opt: -1}
	for g := len(firsts) - 1; g >= 0; g-- {
		suffix[g] = firsts[g]
		if suffix[g+1].point < suffix[g].point {
			suffix[g] = suffix[g+1]
		}
	}
	needed := make(map[int32]bool)
	for _, x := range rejected {
		tx := ops[x].In.Token
		g, _ := slices.BinarySearchFunc(firsts, tx, func(f first, t uint64) int {
			if f.token <= t {
				return -1
			}
			return 1
		})
		best := suffix[g]
		if best.point == math.MaxInt64 || max(best.point, calls[x]) > rets[x] {
			return illegalBecause(exact, fmt.Sprintf("the rejected write of token %d needs a write of a higher token applied before it returned, and none can be", tx), int(x))
		}
		order = append(order, placement{point: max(best.point, calls[x]), slot: best.slot, rank: 1, op: x})
		if u := best.opt; u >= 0 && !needed[u] {
			needed[u] = true
			order = append(order, placement{point: best.point, slot: best.slot, op: u})
		}
	}
	sortPlacements(order)
	if !replayOrder(registerState{}, registerNext, nil, nil, ops, calls, rets, order) {
		return undecided("the token-order witness does not replay (unanswered writes' fates interfere)")
	}
	return tokenResult{decision: tokenLinearizable}
}

// readLists holds, for every write, the reads that saw it, in call
// order: one array cut by offsets.
type readLists struct {
	start []int32 // write → offset in idx; start[w+1] ends its list
	idx   []int32
}

func (l readLists) of(w int32) []int32 { return l.idx[l.start[w]:l.start[w+1]] }

// readIndex groups the reads by the write they saw (saw[i] for read i,
// -1 for the initial value or for an op that is no read), nReads[w]
// being how many saw w.
func readIndex(saw, nReads []int32) readLists {
	l := readLists{start: make([]int32, len(saw)+1)}
	for w, k := range nReads {
		l.start[w+1] = l.start[w] + k
	}
	l.idx = make([]int32, l.start[len(saw)])
	fill := slices.Clone(l.start[:len(saw)])
	for i, w := range saw {
		if w >= 0 {
			l.idx[fill[w]] = int32(i)
			fill[w]++
		}
	}
	return l
}

func int32sToInts(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// describeLateWrite says why a write cannot take effect in time.
func describeLateWrite(ops []typedOp[registerInput, registerOutput], w int32, read bool) string {
	if read {
		return fmt.Sprintf("the write of token %d value %d cannot take effect, after every write of a lower token, before its answer and before every read that saw it", ops[w].In.Token, ops[w].In.Value)
	}
	return fmt.Sprintf("the write of token %d value %d cannot take effect, after every write of a lower token, before its answer", ops[w].In.Token, ops[w].In.Value)
}

// groupOrder orders the jobs of one token group so that no job comes
// after one whose key exceeds its deadline, putting first the
// earliest-called job that may go first; ok is false when no order
// exists. A job may go next iff its key is at most every other remaining
// job's deadline; removing a job never makes another unable to go, so
// the greedy order exists iff any does, and the choice of the first job
// is free among those that may go first. The next job is the remaining
// job with the least key or, failing that, the one with the least
// deadline (if neither may go, none may: a job that may go has a key at
// most every other deadline, so it is the least-deadline job whenever
// the least-key job is refused).
func groupOrder(jobs []int32, key, deadline, call func(int32) int64) ([]int32, bool) {
	n := len(jobs)
	if n == 1 {
		return []int32{jobs[0]}, true
	}
	byKey := slices.Clone(jobs)
	slices.SortFunc(byKey, func(a, b int32) int { return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a, b)) })
	byDeadline := slices.Clone(jobs)
	slices.SortFunc(byDeadline, func(a, b int32) int { return cmp.Or(cmp.Compare(deadline(a), deadline(b)), cmp.Compare(a, b)) })
	// isRemoved says which jobs are placed: a group is mostly a write or
	// two, so its short list is searched; a large one gets a set.
	var placedJobs []int32
	var placedSet map[int32]bool
	if n > 32 {
		placedSet = make(map[int32]bool, n)
	}
	isRemoved := func(j int32) bool {
		if placedSet != nil {
			return placedSet[j]
		}
		return slices.Contains(placedJobs, j)
	}
	// minOthers is the least deadline of the remaining jobs other than j.
	dAt := 0
	minOthers := func(j int32) int64 {
		for dAt < n && isRemoved(byDeadline[dAt]) {
			dAt++
		}
		for k := dAt; k < n; k++ {
			if x := byDeadline[k]; !isRemoved(x) && x != j {
				return deadline(x)
			}
		}
		return math.MaxInt64
	}
	out := make([]int32, 0, n)
	// The first job: the earliest-called among those that may go first.
	lead := int32(-1)
	for _, j := range jobs {
		if key(j) <= minOthers(j) && (lead < 0 || call(j) < call(lead)) {
			lead = j
		}
	}
	if lead < 0 {
		return nil, false
	}
	out = append(out, lead)
	placedJobs = out
	if placedSet != nil {
		placedSet[lead] = true
	}
	kAt := 0
	for len(out) < n {
		for kAt < n && isRemoved(byKey[kAt]) {
			kAt++
		}
		next := byKey[kAt]
		if key(next) > minOthers(next) {
			for dAt < n && isRemoved(byDeadline[dAt]) {
				dAt++
			}
			next = byDeadline[dAt]
			if key(next) > minOthers(next) {
				return nil, false
			}
		}
		out = append(out, next)
		placedJobs = out
		if placedSet != nil {
			placedSet[next] = true
		}
	}
	return out, true
}

// --- The fenced mutex (S7) ---

// lockHold is the hold of one known token: every op that succeeded with
// the token (grants, renewals, the release) lies inside it.
type lockHold struct {
	token   uint64
	client  string
	ops     []int32 // in call order
	release int32   // -1 if no op released it
	// start and end are the witness's points of the hold's first and last
	// op (start is an ambiguous acquire's point when the hold begins with
	// one); both are the least the chain allows.
	start, end int64
	// anons counts the unseen holds the witness put in the gap after it.
	anons int
}

// lockByTokens decides a partition of lock ops against the fenced mutex
// from the order of the tokens.
//
// Every op that succeeded with token t — the grants of t, the renewals
// and the release of t — lies in one contiguous hold of one client: after
// any op of a higher token the mutex's last token is above t, and then no
// grant, renewal or release of t is possible. So two clients succeeding
// with one token, or two releases of one token, are illegal outright; the
// holds follow each other in token order, and inside a hold the release
// comes last. These are lower bounds again: every op of hold k lies no
// earlier than its call and the last op of hold k−1, and the release no
// earlier than every other op of its hold; if the least points pass an
// answer, the partition is illegal.
//
// Left free, and chosen by the witness:
//
//   - where a hold begins: at its earliest grant, or earlier, at an
//     ambiguous acquire of its client (a grant the client learned only
//     later; needed when a renewal comes before every grant could);
//   - where a hold ends: after its last op, at an expiry anywhere before
//     the next hold (the replay chooses);
//   - busy answers, placed where another client holds the lock: inside a
//     hold of another client, in the tail of one before it expired, or
//     in an unseen hold: an ambiguous acquire of another client taking
//     effect in the gap between two holds (at most the gap between their
//     tokens of them, which the replay's last-token bound enforces);
//   - not-holder answers of a hold's own client, placed before the hold
//     or after its end.
//
// Ambiguous releases are not in the partition (encodeLockOps drops them:
// an expiry at the same point leaves a state that covers the release's),
// and ambiguous acquires that explain nothing are left out (they took no
// effect). Tokens 0 (a tokenless design's) leave the partition to the
// search.
func lockByTokens(ops []typedOp[lockInput, lockOutput]) tokenResult {
	return byTokens(ops, lockByTokensAt)
}

func lockByTokensAt(ops []typedOp[lockInput, lockOutput], calls, rets []int64, exact bool) tokenResult {
	holdOf := make(map[uint64]int32, len(ops)/4) // token → index in holds until they are sorted; then only a set
	holds := make([]lockHold, 0, len(ops)/4)     // a hold is a grant, its renewals and its release
	var busy, notHolder, ambiguous []int32
	for i := range ops {
		op := &ops[i]
		var token uint64
		switch lockEffectOf(op.In.Kind, op.Out.Outcome) {
		case effGranted:
			token = op.Out.Token
		case effRenewed, effReleased:
			token = op.In.Token
		case effBusy:
			busy = append(busy, int32(i))
			continue
		case effNotHolder:
			notHolder = append(notHolder, int32(i))
			continue
		case effAmbiguous:
			if op.In.Kind == LockAcquire {
				ambiguous = append(ambiguous, int32(i))
			}
			continue
		case effImpossible:
			return illegalBecause(true, fmt.Sprintf("a %v was answered %q, which the service never answers to it", op.In.Kind, op.Out.Outcome), i)
		default:
			continue
		}
		if token == 0 {
			return undecided("an op succeeded with token 0 (a tokenless design): tokens give no order")
		}
		h, ok := holdOf[token]
		if !ok {
			h = int32(len(holds))
			holdOf[token] = h
			holds = append(holds, lockHold{token: token, client: op.In.Client, release: -1})
		}
		hd := &holds[h]
		if hd.client != op.In.Client {
			return illegalBecause(true, fmt.Sprintf("clients %q and %q both succeeded with token %d", hd.client, op.In.Client, token), int(hd.ops[0]), i)
		}
		if op.In.Kind == LockRelease {
			if hd.release >= 0 {
				return illegalBecause(true, fmt.Sprintf("client %q released token %d twice", hd.client, token), int(hd.release), i)
			}
			hd.release = int32(i)
		}
		hd.ops = append(hd.ops, int32(i))
	}
	slices.SortFunc(holds, func(a, b lockHold) int { return cmp.Compare(a.token, b.token) })
	ambUsed := make([]bool, len(ambiguous))
	busyOf := make(map[string][]int32) // client → its busy answers, in call order
	for _, b := range busy {
		busyOf[ops[b].In.Client] = append(busyOf[ops[b].In.Client], b)
	}
	// nextBusyOf is the call of client's first busy answer that may take
	// effect at or after t (one that returns before t cannot).
	nextBusyOf := func(client string, t int64) int64 {
		bs := busyOf[client]
		i, _ := slices.BinarySearchFunc(bs, t, func(b int32, t int64) int { return cmp.Compare(calls[b], t) })
		for i > 0 && rets[bs[i-1]] >= t {
			i--
		}
		if i == len(bs) {
			return math.MaxInt64
		}
		return calls[bs[i]]
	}
	busyByCall := slices.Clone(busy)
	slices.SortFunc(busyByCall, func(a, b int32) int { return cmp.Or(cmp.Compare(calls[a], calls[b]), cmp.Compare(a, b)) })
	firstGrantOf := func(hd *lockHold) int64 {
		first := int64(math.MaxInt64)
		for _, o := range hd.ops {
			if ops[o].In.Kind == LockAcquire {
				first = min(first, calls[o])
			}
		}
		return first
	}

	order := make([]placement, 0, len(ops))
	put := func(i int32, point int64, slot int, rank uint8) {
		order = append(order, placement{point: point, slot: int64(slot), rank: rank, op: i})
	}
	// The chain of holds at their least points. Slots: hold k is slot k+1
	// (ranks 0–4) and the gap after it the same slot (ranks 5–8); the gap
	// before the first hold is slot 0.
	last := int64(math.MinInt64) // the least end of the previous hold
	for k := range holds {
		hd := &holds[k]
		firstGrant, lastCall := int64(math.MaxInt64), last
		for _, o := range hd.ops {
			lastCall = max(lastCall, calls[o])
			if ops[o].In.Kind == LockAcquire {
				firstGrant = min(firstGrant, calls[o])
			}
			if o == hd.release {
				continue
			}
			if max(calls[o], last) > rets[o] {
				return illegalBecause(exact, fmt.Sprintf("token %d's %v by %q cannot take effect after every op of a lower token and before its answer", hd.token, ops[o].In.Kind, hd.client), int(o))
			}
		}
		if r := hd.release; r >= 0 && lastCall > rets[r] {
			return illegalBecause(exact, fmt.Sprintf("token %d's release by %q cannot take effect after every op of a lower token and every other op of its own before its answer", hd.token, hd.client), int(r))
		}
		// The hold begins at its earliest grant unless an op of it must
		// take effect before that: then at an ambiguous acquire of its
		// client (the latest one called early enough).
		start := max(last, firstGrant)
		need := int64(math.MaxInt64)
		for _, o := range hd.ops {
			if o != hd.release {
				need = min(need, rets[o])
			}
		}
		if hd.release >= 0 {
			need = min(need, rets[hd.release])
		}
		early := int32(-1)
		if start > need {
			for j := len(ambiguous) - 1; j >= 0; j-- {
				a := ambiguous[j]
				if !ambUsed[j] && ops[a].In.Client == hd.client && calls[a] <= need {
					ambUsed[j], early = true, a
					break
				}
			}
			if early < 0 {
				// A hold begins with a grant of its token or with an
				// ambiguous acquire of its client (the only way the
				// client may hold a token it never learned). If none of
				// any is called early enough, nothing explains the hold.
				why := fmt.Sprintf("token %d's hold by %q must begin before any grant of it could take effect, and no ambiguous acquire of %q was called early enough to begin it", hd.token, hd.client, hd.client)
				if !slices.ContainsFunc(ambiguous, func(a int32) bool { return ops[a].In.Client == hd.client && calls[a] <= need }) {
					return illegalBecause(exact, why, int32sToInts(hd.ops)...)
				}
				return undecided(why + " but one already explains another hold")
			}
			start = max(last, calls[early])
			put(early, start, k+1, 0)
		}
		end := start
		for _, o := range hd.ops {
			if o == hd.release {
				continue
			}
			at := max(calls[o], start)
			rank := uint8(2)
			if early < 0 && ops[o].In.Kind == LockAcquire && calls[o] == firstGrant {
				rank = 1
			}
			put(o, at, k+1, rank)
			end = max(end, at)
		}
		if r := hd.release; r >= 0 {
			at := max(calls[r], end)
			// A busy answer to another client called after the release's
			// least point, while the release may still be taking effect,
			// is explained by releasing later, unless the next hold can
			// explain it.
			// The release may move no later than its answer, nor past
			// the point by which the next hold must have begun.
			limit := rets[r]
			if k+1 < len(holds) {
				for _, o := range holds[k+1].ops {
					limit = min(limit, rets[o])
				}
			}
			b0, _ := slices.BinarySearchFunc(busyByCall, at+1, func(b int32, t int64) int { return cmp.Compare(calls[b], t) })
			for _, b := range busyByCall[b0:] {
				if calls[b] > limit {
					break
				}
				c := ops[b].In.Client
				if c == hd.client {
					continue
				}
				if k+1 < len(holds) && holds[k+1].client != c && max(at, firstGrantOf(&holds[k+1])) <= rets[b] {
					continue
				}
				at = calls[b]
			}
			put(r, at, k+1, 4)
			end = at
		}
		hd.start, hd.end = start, end
		last = end
	}

	// startOf and endOf bound the gaps: gap k (k = 0..len(holds)) lies
	// between hold k−1's end and hold k's start.
	gapFrom := func(k int) int64 {
		if k == 0 {
			return math.MinInt64
		}
		return holds[k-1].end
	}
	gapTo := func(k int) int64 {
		if k == len(holds) {
			return math.MaxInt64
		}
		return holds[k].start
	}
	// slotsLeft is how many unseen holds gap k still has tokens for.
	slotsLeft := func(k int) uint64 {
		lo, hi := uint64(0), uint64(math.MaxUint64)
		if k > 0 {
			lo = holds[k-1].token
		}
		if k < len(holds) {
			hi = holds[k].token
		}
		used := uint64(0)
		if k > 0 {
			used = uint64(holds[k-1].anons)
		}
		if hi-lo-1 <= used {
			return 0
		}
		return hi - lo - 1 - used
	}
	// tailEnd is, per hold, how long its tail may last: the holder's own
	// busy answer or not-holder answer for the token, called after the
	// hold began, comes after the hold expired.
	tailEnd := make([]int64, len(holds))
	holdsOf := make(map[string][]int32) // client → its holds, in order
	for k := range holds {
		tailEnd[k] = math.MaxInt64
		holdsOf[holds[k].client] = append(holdsOf[holds[k].client], int32(k))
	}
	ends := func(x int32) {
		hs := holdsOf[ops[x].In.Client]
		i, _ := slices.BinarySearchFunc(hs, calls[x]+1, func(k int32, t int64) int { return cmp.Compare(holds[k].start, t) })
		if i == 0 {
			return
		}
		k := hs[i-1]
		if ops[x].In.Kind != LockAcquire && ops[x].In.Token != holds[k].token {
			return
		}
		tailEnd[k] = min(tailEnd[k], rets[x])
	}
	for _, x := range busy {
		ends(x)
	}
	for _, x := range notHolder {
		ends(x)
	}
	// latest is, per gap, the unseen hold the witness placed last in it:
	// from its point on it is the lock's holder until the next hold, or
	// until an unseen hold placed after it (no earlier than the busy
	// answers it explains).
	type anon struct {
		at, until int64
		owner     string
	}
	latest := make(map[int]*anon)
	for _, b := range busy {
		c := ops[b].In.Client
		cb, rb := calls[b], rets[b]
		// The holds whose span may meet [cb, rb]: hold k spans
		// [start, end] and its tail reaches the next hold's start; both
		// are non-decreasing along the chain.
		k0, _ := slices.BinarySearchFunc(holds, cb, func(h lockHold, t int64) int { return cmp.Compare(h.end, t) })
		placed := false
		for k := k0; k < len(holds) && holds[k].start <= rb && !placed; k++ {
			if holds[k].client != c && max(cb, holds[k].start) <= min(rb, holds[k].end) {
				put(b, max(cb, holds[k].start), k+1, 3)
				placed = true
			}
		}
		// A tail: hold k (unreleased, of another client) still held
		// after its last op, before hold k+1 began.
		for k := max(k0-1, 0); k < len(holds) && holds[k].end <= rb && !placed; k++ {
			if holds[k].client != c && holds[k].release < 0 && max(cb, holds[k].end) <= min(rb, gapTo(k+1), tailEnd[k]) {
				put(b, max(cb, holds[k].end), k+1, 5)
				placed = true
			}
		}
		// An unseen hold of another client in a gap: the latest one
		// placed there, or a new one from an ambiguous acquire.
		for k := max(k0-1, 0); k <= len(holds) && gapFrom(k) <= rb && !placed; k++ {
			lo, hi := max(cb, gapFrom(k)), min(rb, gapTo(k))
			if lo > hi {
				continue
			}
			if a := latest[k]; a != nil {
				if a.owner != c && max(lo, a.at) <= hi {
					at := max(lo, a.at)
					put(b, at, k, 8)
					a.until = max(a.until, at)
					placed = true
					continue
				}
				lo = max(lo, a.until)
				if lo > hi {
					continue
				}
			}
			// Of the ambiguous acquires that may take effect here, the
			// one whose client asks for the lock again last in the gap
			// (its own busy answer would end the unseen hold), then one
			// of the next hold's client (it merges into that hold and
			// needs no token of the gap), then the earliest called.
			pick, pickNext, pickMerges := -1, int64(0), false
			// The candidates are called by hi; of them, the latest few
			// hundred are considered (a livelocked client leaves a
			// quarter of a million unanswered acquires, and a scan of
			// them all for every busy answer would cost their square).
			top, _ := slices.BinarySearchFunc(ambiguous, hi+1, func(a int32, t int64) int { return cmp.Compare(calls[a], t) })
			for j := top - 1; j >= 0 && j >= top-maxAnonCandidates; j-- {
				a := ambiguous[j]
				if ambUsed[j] || ops[a].In.Client == c || max(lo, calls[a]) > hi {
					continue
				}
				merges := k < len(holds) && ops[a].In.Client == holds[k].client
				if slotsLeft(k) == 0 && !merges {
					continue
				}
				next := nextBusyOf(ops[a].In.Client, max(lo, calls[a]))
				if next > gapTo(k) {
					next = math.MaxInt64 // the unseen hold ends by the gap's end
				}
				if pick < 0 || next > pickNext || next == pickNext && (merges && !pickMerges || merges == pickMerges && calls[a] < calls[ambiguous[pick]]) {
					pick, pickNext, pickMerges = j, next, merges
				}
			}
			if pick < 0 {
				continue
			}
			a := ambiguous[pick]
			ambUsed[pick] = true
			at := max(lo, calls[a])
			put(a, at, k, 7)
			put(b, at, k, 8)
			latest[k] = &anon{at: at, until: at, owner: ops[a].In.Client}
			if k > 0 {
				holds[k-1].anons++
				// The unseen hold begins once the hold before it has
				// ended: that hold's tail explains no busy answer after
				// this point (one placed there would meet the unseen
				// holder, who may be the one answered busy).
				tailEnd[k-1] = min(tailEnd[k-1], at)
			}
			placed = true
		}
		if !placed {
			return undecided(fmt.Sprintf("no hold of another client found for a busy answer to %q (op %d)", c, b))
		}
	}

	for _, x := range notHolder {
		c, t := ops[x].In.Client, ops[x].In.Token
		if _, known := holdOf[t]; !known {
			put(x, calls[x], -1, 6) // no hold of t to be inside
			continue
		}
		k, _ := slices.BinarySearchFunc(holds, t, func(h lockHold, t uint64) int { return cmp.Compare(h.token, t) })
		hd := &holds[k]
		switch {
		case hd.client != c:
			put(x, calls[x], -1, 6)
		case calls[x] <= hd.start:
			put(x, calls[x], k, 6) // before the hold began
		case hd.end <= rets[x]:
			// After its end, as late as it may: the hold's tail may
			// explain other clients' busy answers until then.
			put(x, rets[x], k+1, 6)
		default:
			return undecided(fmt.Sprintf("%q's not-holder answer for token %d falls inside its own hold", c, t))
		}
	}
	sortPlacements(order)
	if !replayOrder(lockState{}, lockNext, lockCovers, lockClass, ops, calls, rets, order) {
		return undecided("the token-order witness does not replay")
	}
	return tokenResult{decision: tokenLinearizable}
}
