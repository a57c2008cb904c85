package checker

import (
	"cmp"
	"math"
	"slices"
)

// linearizableQuickly looks for one linearization by a depth-first search
// with a small budget: at each step it tries the ops that may come next in
// real time (called before every remaining answered op returned, and after
// the ops of its own client it must follow) in a likely order,
// and backtracks when the model refuses them all. Whatever order it
// completes respects real time and the model accepts it, so the history is
// linearizable — a proof, found in about one pass for a fenced lock's
// histories, where ops overlap only a little. When the budget runs out
// nothing is concluded: searchLinearization then decides, complete but
// slower on a history with many ambiguous ops (it branches on single
// states where this search keeps their set).
//
// Two likely orders are tried, each with its own budget. First, call
// order: a service decides requests roughly in the order they reach it,
// while answers come back in any order. Then the same, except that ops that
// never returned wait until an op that did return does not fit: their
// effect may fall at any later point, and placing them early makes the
// search commit to states a later read rules out (a store that crashed
// with many writes unanswered, the standard run's seed 2838, which
// porcupine alone did not decide in two minutes).
//
// Open ops (never returned, or ambiguous) precede nothing and the models
// always let them take no effect, so the search is done once every
// answered op is placed: the open ops left take effect never, or after
// the end. A livelocked run's history ends with thousands of them (a
// client retrying without end); they are never scanned unless placed.
//
// The model is the nondeterministic step on concrete types (the same one
// porcupine gets boxed); the search keeps the set of states every placed
// prefix may have reached, as porcupine's power-set model does, less the
// states another of the set covers (covers and coarse as for
// searchLinearization): whatever follows a covered state follows the one
// that covers it, so the set stays non-empty exactly as long. Without it
// the mutex's set grows by one state per unanswered acquire (each may
// have granted a token, raising the lower bound on the last one).
//
// budget bounds each order's model steps (one step of one state by one
// op); it returns whether a linearization was found and the steps used,
// which the caller charges to the partition's budget.
func linearizableQuickly[S comparable, I, O any](init S, next func([]S, S, I, O) []S, covers func(a, b S) bool, coarse func(S) S, ops []typedOp[I, O], budget int64) (bool, int64) {
	q := newQuickSearch(init, next, covers, coarse, ops)
	ok, used := q.run(false, budget)
	if ok {
		return true, used
	}
	ok, used2 := q.run(true, budget)
	return ok, used + used2
}

// quickSteps is the quick search's budget per order for a partition of n
// ops whose whole budget is total (negative: none): about thirty-two model
// steps an op, a pass with sets of a few states and some backtracking, and
// never more than an eighth of the partition's budget, so that the
// complete search keeps most of it.
func quickSteps(n int, total int64) int64 {
	q := 32*int64(n) + 4096
	if total >= 0 {
		q = min(q, total/8)
	}
	return q
}

// opList is some of a partition's ops in call order, with a cursor before
// which every op is placed.
type opList struct {
	ids   []int
	first int
}

// advance moves the cursor past placed ops.
func (l *opList) advance(placed []bool) {
	for l.first < len(l.ids) && placed[l.ids[l.first]] {
		l.first++
	}
}

// quickSearch is the state linearizableQuickly's two orders share.
type quickSearch[S comparable, I, O any] struct {
	init   S
	next   func([]S, S, I, O) []S
	ops    []typedOp[I, O]
	prune  stateSet[S]
	all    opList // every op
	closed opList // the answered ops
	open   opList // the open ops
	pos    []int  // op → its place in all, and in closed or open
	posIn  []int
	nDone  int // answered ops
}

func newQuickSearch[S comparable, I, O any](init S, next func([]S, S, I, O) []S, covers func(a, b S) bool, coarse func(S) S, ops []typedOp[I, O]) *quickSearch[S, I, O] {
	q := &quickSearch[S, I, O]{init: init, next: next, ops: ops, prune: newStateSet(covers, coarse),
		pos: make([]int, len(ops)), posIn: make([]int, len(ops))}
	byCall := make([]int, len(ops))
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortStableFunc(byCall, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	q.all.ids = byCall
	for p, i := range byCall {
		q.pos[i] = p
		l := &q.closed
		if ops[i].Open {
			l = &q.open
		} else {
			q.nDone++
		}
		q.posIn[i] = len(l.ids)
		l.ids = append(l.ids, i)
	}
	return q
}

// quickFrame is one placed prefix: its state set (a range of the states
// arena) and where its candidates for the next op stand: which pass of
// the order, the position reached in that pass's list, and the first
// pass's op (the rest of the closed list skips it).
type quickFrame struct {
	states [2]int
	pass   int
	at     int
	lead   int
}

// run searches in one order (openLast: the second) within budget model
// steps.
func (q *quickSearch[S, I, O]) run(openLast bool, budget int64) (bool, int64) {
	if q.nDone == 0 {
		return true, 0
	}
	ops := q.ops
	rets := newMinTree(len(q.closed.ids))
	for p, i := range q.closed.ids {
		rets.set(p, ops[i].Return)
	}
	placed := make([]bool, len(ops))
	q.all.first, q.closed.first, q.open.first = 0, 0, 0
	var steps int64
	states := []S{q.init}
	stack := []quickFrame{{states: [2]int{0, 1}, at: -1, lead: -1}}
	done := 0

	// candidate returns the top frame's next op to try, or -1. The frame's
	// cursor only moves forward; every op before it was tried or is not a
	// candidate, and placed is as it was when the frame was pushed.
	candidate := func(f *quickFrame) int {
		minReturn := rets.min()
		lists := [3]*opList{&q.all}
		if openLast {
			lists = [3]*opList{&q.closed, &q.open, &q.closed}
		}
		for ; f.pass < 3; f.pass, f.at = f.pass+1, -1 {
			l := lists[f.pass]
			if l == nil {
				break
			}
			l.advance(placed)
			if f.at < l.first {
				f.at = l.first
			}
			for ; f.at < len(l.ids); f.at++ {
				i := l.ids[f.at]
				if ops[i].Call > minReturn {
					break
				}
				if placed[i] || !opReady(ops, placed, i) || f.pass == 2 && i == f.lead {
					continue
				}
				f.at++
				if f.pass == 0 && openLast {
					f.lead = i
					f.pass, f.at = 1, -1 // one op from the first pass
				}
				return i
			}
		}
		return -1
	}
	place := func(i int, on bool) {
		placed[i] = on
		if ops[i].Open {
			if !on {
				q.open.first = min(q.open.first, q.posIn[i])
			}
		} else if on {
			rets.set(q.posIn[i], math.MaxInt64)
			done++
		} else {
			rets.set(q.posIn[i], ops[i].Return)
			q.closed.first = min(q.closed.first, q.posIn[i])
			done--
		}
		if !on {
			q.all.first = min(q.all.first, q.pos[i])
		}
	}

	for done < q.nDone {
		f := &stack[len(stack)-1]
		took := false
		for steps < budget {
			i := candidate(f)
			if i < 0 {
				break
			}
			lo := len(states)
			for k := f.states[0]; k < f.states[1] && steps < budget; k++ {
				steps++
				states = q.next(states, states[k], ops[i].In, ops[i].Out)
			}
			states = q.prune.reduce(states, lo)
			if len(states) == lo {
				continue // refused from every state
			}
			place(i, true)
			stack = append(stack, quickFrame{states: [2]int{lo, len(states)}, at: -1, lead: -1})
			took = true
			break
		}
		if took {
			continue
		}
		if steps >= budget || len(stack) == 1 {
			return false, steps
		}
		// Undo the op that led here and try the next candidate before it.
		states = states[:f.states[0]]
		stack = stack[:len(stack)-1]
		p := &stack[len(stack)-1]
		place(q.placedBy(p, openLast), false)
	}
	return true, steps
}

// placedBy is the op frame p placed last: the candidate just before its
// cursor.
func (q *quickSearch[S, I, O]) placedBy(p *quickFrame, openLast bool) int {
	if p.pass == 1 && p.at == -1 && openLast {
		return p.lead // the first pass's op, its cursor already moved on
	}
	l := &q.all
	if openLast {
		l = [3]*opList{&q.closed, &q.open, &q.closed}[p.pass]
	}
	return l.ids[p.at-1]
}

// opReady reports whether every op that i must follow in program order
// (its After) is placed.
func opReady[I, O any](ops []typedOp[I, O], placed []bool, i int) bool {
	for _, j := range ops[i].After {
		if !placed[j] {
			return false
		}
	}
	return true
}

// stateSet removes repeated and covered states from the quick search's
// sets, which may hold thousands of states (the register's, one per
// unanswered write applied): in constant time a state, where comparing
// each with all others would take the time of the set's square.
type stateSet[S comparable] struct {
	covers func(a, b S) bool // nil: only equal states are removed
	coarse func(S) S
	keep   []bool
}

func newStateSet[S comparable](covers func(a, b S) bool, coarse func(S) S) stateSet[S] {
	return stateSet[S]{covers: covers, coarse: coarse}
}

// smallSet is the size up to which reduce compares states pairwise.
const smallSet = 16

// reduce removes from set[lo:] every state equal to an earlier one or
// covered by another one (of two that cover each other, the earlier
// stays), keeping the order of the rest.
func (u *stateSet[S]) reduce(set []S, lo int) []S {
	n := len(set) - lo
	if n <= 1 {
		return set
	}
	u.keep = slices.Grow(u.keep[:0], n)[:n]
	clear(u.keep)
	if n <= smallSet {
		var kept [smallSet]int
		nk := 0
		for k := lo; k < len(set); k++ {
			if u.keepUnlessCovered(set, lo, k, kept[:nk]) {
				nk = u.live(kept[:nk], lo)
				kept[nk] = k
				nk++
			}
		}
	} else {
		class := func(x S) S { return x }
		if u.covers != nil {
			class = u.coarse
		}
		kept := make(map[S][]int) // class → indices of the kept states
		for k := lo; k < len(set); k++ {
			c := class(set[k])
			if u.keepUnlessCovered(set, lo, k, kept[c]) {
				kept[c] = append(kept[c][:u.live(kept[c], lo)], k)
			}
		}
	}
	out := set[:lo]
	for k := lo; k < lo+n; k++ {
		if u.keep[k-lo] {
			out = append(out, set[k])
		}
	}
	return out
}

// keepUnlessCovered marks set[k] kept unless one of the kept states
// (indices in others, which may hold states no longer kept) equals or
// covers it, and then unmarks the kept states it covers. It reports
// whether it kept set[k].
func (u *stateSet[S]) keepUnlessCovered(set []S, lo, k int, others []int) bool {
	x := set[k]
	for _, j := range others {
		if u.keep[j-lo] && (set[j] == x || u.covers != nil && u.covers(set[j], x)) {
			return false
		}
	}
	for _, j := range others {
		if u.covers != nil && u.covers(x, set[j]) {
			u.keep[j-lo] = false
		}
	}
	u.keep[k-lo] = true
	return true
}

// live moves the indices still kept to the front of idx and returns how
// many there are.
func (u *stateSet[S]) live(idx []int, lo int) int {
	n := 0
	for _, j := range idx {
		if u.keep[j-lo] {
			idx[n] = j
			n++
		}
	}
	return n
}
