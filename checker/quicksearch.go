package checker

import (
	"cmp"
	"math"
	"slices"
)

// linearizableQuickly looks for one linearization by a depth-first search
// with a small budget: at each step it tries the ops that may come next in
// real time (called before every remaining op returned, and after the ops
// of its own client it must follow) in a likely order,
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
// The model is the nondeterministic step on concrete types (the same one
// porcupine gets boxed); the search keeps the set of states every placed
// prefix may have reached, as porcupine's power-set model does.
func linearizableQuickly[S comparable, I, O any](init S, next func([]S, S, I, O) []S, ops []typedOp[I, O]) bool {
	return searchInOrder(init, next, ops, false) || searchInOrder(init, next, ops, true)
}

func searchInOrder[S comparable, I, O any](init S, next func([]S, S, I, O) []S, ops []typedOp[I, O], openLast bool) bool {
	n := len(ops)
	if n == 0 {
		return true
	}
	budget := 8*n + 1000 // steps of the model
	byCall := make([]int, n)
	for i := range byCall {
		byCall[i] = i
	}
	slices.SortStableFunc(byCall, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	rets := newMinTree(n)
	pos := make([]int, n) // op → its place in byCall
	for p, i := range byCall {
		rets.set(p, ops[i].Return)
		pos[i] = p
	}
	placed := make([]bool, n)
	first := 0 // every byCall position before first is placed

	// Each frame is one placed prefix: its state set and its candidates
	// for the next op, both kept in arenas that grow and shrink with the
	// stack, and which candidate is being tried.
	type frame struct {
		states, cands [2]int // arena ranges
		next          int
	}
	var states []S
	var cands []int
	pushCands := func() [2]int {
		for first < n && placed[byCall[first]] {
			first++
		}
		lo := len(cands)
		minReturn := rets.min()
		open := func(i int) bool { return openLast && ops[i].Open }
		// In call order; with openLast, the earliest-called op that
		// returned, then the ops that never returned, then the rest.
		for pass := range 3 {
			for _, i := range byCall[first:] {
				if ops[i].Call > minReturn {
					break
				}
				if placed[i] || !opReady(ops, placed, i) || open(i) != (pass == 1) || pass == 2 && len(cands) > lo && i == cands[lo] {
					continue
				}
				cands = append(cands, i)
				if pass == 0 && openLast {
					break
				}
			}
			if !openLast {
				break
			}
		}
		return [2]int{lo, len(cands)}
	}
	states = append(states, init)
	stack := []frame{{states: [2]int{0, 1}, cands: pushCands()}}
	done := 0
	for done < n {
		f := &stack[len(stack)-1]
		took := false
		for f.cands[0]+f.next < f.cands[1] && budget > 0 {
			i := cands[f.cands[0]+f.next]
			f.next++
			budget--
			lo := len(states)
			for k := f.states[0]; k < f.states[1]; k++ {
				states = next(states, states[k], ops[i].In, ops[i].Out)
			}
			states = append(states[:lo], dedupStates(states[lo:])...)
			if len(states) == lo {
				continue // refused from every state
			}
			placed[i] = true
			rets.set(pos[i], math.MaxInt64)
			done++
			stack = append(stack, frame{states: [2]int{lo, len(states)}})
			if done < n {
				stack[len(stack)-1].cands = pushCands()
			}
			took = true
			break
		}
		if took {
			continue
		}
		if budget == 0 || len(stack) == 1 {
			return false
		}
		// Undo the op that led here and try the next candidate before it.
		states, cands = states[:f.states[0]], cands[:f.cands[0]]
		stack = stack[:len(stack)-1]
		p := &stack[len(stack)-1]
		i := cands[p.cands[0]+p.next-1]
		placed[i] = false
		rets.set(pos[i], ops[i].Return)
		first = min(first, pos[i])
		done--
	}
	return true
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
