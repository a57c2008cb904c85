package checker

import (
	"encoding/binary"
	"math"
	"slices"
)

// DefaultSteps is the budget of model steps of one linearizability search
// (one resource of S7 or S8) when Options.Steps is 0; sixteen comparisons
// of memo entries count as one step. Every generated
// history of the agreement corpus and every built-in scenario's partition
// needs far fewer (see TestSearchAgreesWithPorcupine and the README);
// it is a bound on a pathological history, about a few seconds and a few
// hundred MB of memo, not a budget a real run is expected to reach.
const DefaultSteps = 20_000_000

// DefaultSearchBytes bounds the memory of one complete linearizability
// search (its memo, moves and stack) when Options.SearchBytes is 0. The
// memo grows with the steps, by a bitset of the answered ops and one of
// the open ops an entry: at DefaultSteps on a history of thousands of
// open ops it would hold gigabytes, several partitions at once. The
// bytes are counted from the lengths of what the search keeps (see
// searchCost), never from the runtime's figures, so that the verdict is
// a function of the history; the process holds about twice as much
// (maps' and slices' slack, the collector's headroom). The built-in
// scenarios' searches need under a megabyte.
const DefaultSearchBytes = 128 << 20

// searchCost is what the search counts against its byte bound: a
// state with its bookkeeping in a memo entry, a move or a stack frame
// (the largest model's, rounded up), plus each bitset's words.
const (
	costEntry = 64 // a memo entry: state, slice header, map slot share
	costKey   = 64 // a new memo key: its string header, state and map slot
	costMove  = 48
	costFrame = 96
)

// searchBudget bounds one partition's search: model steps and counted
// bytes, each negative for no limit.
type searchBudget struct{ steps, bytes int64 }

// searchVerdict is the outcome of one partition's search.
type searchVerdict uint8

const (
	searchOK         searchVerdict = iota // a linearization exists
	searchIllegal                         // none exists
	searchExhausted                       // the step budget ran out first
	searchMemoryFull                      // the byte bound was reached first
)

// searchResult is what searchLinearization found. For an illegal
// partition, the deepest prefix it reached explains why: linearized ops
// leave the model in state, and no op that may come next (stuck, indices
// in the partition, in call order) fits.
type searchResult[S any] struct {
	verdict    searchVerdict
	steps      int64
	linearized int
	state      S
	stuck      []int
	// byTokens says that the token-order procedure decided the partition
	// (see tokenorder.go); why and involved are its reason and ops when
	// it found the partition illegal and the search, given a smaller
	// budget to explain it, did not.
	byTokens bool
	why      string
	involved []int
}

// move is one way to extend a linearization: place op, reaching state to.
type move[S any] struct {
	op int32
	to S
}

// frame is one node of the search: a linearized prefix, the state it
// reached, the moves still to try from it (a range of the moves arena),
// and what to restore when it is left.
type frame[S any] struct {
	state       S
	moves       [2]int
	next        int
	op          int32 // the op placed to reach this node; -1 at the root
	first, last int   // the closed-op cursor and highest placed position before op was placed
}

// searchLinearization decides whether ops (one partition, sorted by call)
// are linearizable against the model (init, step), within budget's model
// steps and counted bytes. It is the Wing–Gong/Lowe search: depth-first
// over the ops that may come next (every op that must precede them
// placed), with a memo of the nodes already explored — the set of placed
// ops and the model's state — so that no node is explored twice. It
// decides both ways: a linearization, or proof that none exists. covers,
// if not nil, is a simulation preorder of the model: covers(a, b) means
// that from a every sequence of ops is accepted that is accepted from b
// (and to a state that again covers b's); coarse maps a state to a class
// outside which covers never holds (the memo's index).
//
// Three reductions keep it small without losing completeness:
//
//   - An op whose step leaves the state as it is, and that stable says
//     leaves as it is every state it may be placed in later (a read that
//     sees the current value, a refused write), is placed at once and
//     alone: placing it now only frees ops that had to follow it, and
//     changes nothing for the rest. An accepted write of the register's
//     current token and value is no such op: later, after another write,
//     it changes the register.
//   - An open op (unanswered or ambiguous: it may take effect at any later
//     time or never, and precedes nothing) is placed only for an effect;
//     leaving it out is placing it at the very end with no effect, which
//     the models always allow. The search succeeds when every answered op
//     is placed.
//   - A node is dominated by an explored one if the answered ops placed
//     are the same, the explored node's state covers its state (equal, or
//     covers(explored, new) when the model has a simulation preorder) and
//     the open ops placed are a superset: every way on from it was open to
//     the explored node too. In particular,
//     two open ops placed one after the other are not explored when the
//     second alone reaches the same state (a write overwriting an
//     unobserved write): that node is a sibling's, with one open op less.
//
// Successor states are branched one by one (the models are
// nondeterministic: an unanswered write may be lost or applied).
func searchLinearization[S comparable, I, O any](init S, step func([]S, S, I, O) []S, stable func(I, O) bool, covers func(a, b S) bool, coarse func(S) S, ops []typedOp[I, O], limits searchBudget) searchResult[S] {
	var closed, opens []int32 // op indices in call order
	pos := make([]int, len(ops))
	for i, op := range ops {
		if op.Open {
			pos[i] = len(opens)
			opens = append(opens, int32(i))
		} else {
			pos[i] = len(closed)
			closed = append(closed, int32(i))
		}
	}
	res := searchResult[S]{verdict: searchOK, linearized: -1}
	if len(closed) == 0 {
		return res
	}
	budget, room := limits.steps, limits.bytes
	if budget < 0 {
		budget = math.MaxInt64
	}
	if room < 0 {
		room = math.MaxInt64
	}
	var memoBytes int64 // counted: see searchCost
	// full reports whether what the search holds reached its byte bound.
	full := func(moves, frames int) bool {
		return memoBytes+int64(moves)*costMove+int64(frames)*costFrame > room
	}
	rets := newMinTree(len(closed))
	for p, i := range closed {
		rets.set(p, ops[i].Return)
	}
	placed := make([]bool, len(ops))
	closedBits := make([]uint64, (len(closed)+63)/64)
	openBits := make([]uint64, (len(opens)+63)/64)
	first, last := 0, -1 // every closed position below first is placed; last is the highest placed
	done, applied := 0, 0
	bestClosed := -1

	// dominates reports whether a node in state a has every way on that a
	// node in state b has, with the same ops placed.
	dominates := func(a, b S) bool { return a == b || covers != nil && covers(a, b) }
	type memoKey struct {
		set   string
		state S // the state, or its coarse class if covers compares states
	}
	type memoEntry struct {
		state S
		open  []uint64 // placed open ops
	}
	memo := make(map[memoKey][]memoEntry)
	var keyBuf []byte
	compared := 0
	// seen reports whether a node that dominates the current one was
	// explored, and records the current one if not.
	seen := func(s S) bool {
		lo, hi := first/64, max(first/64, last/64)
		keyBuf = binary.LittleEndian.AppendUint32(keyBuf[:0], uint32(lo))
		for _, w := range closedBits[lo : hi+1] {
			keyBuf = binary.LittleEndian.AppendUint64(keyBuf, w)
		}
		k := memoKey{set: string(keyBuf), state: s}
		if covers != nil {
			k.state = coarse(s)
		}
		entries := memo[k]
		for _, e := range entries {
			// Comparing nodes is work too, about a sixteenth of a model
			// step's: the budget bounds it at that rate.
			if compared++; compared%16 == 0 {
				res.steps++
			}
			if !dominates(e.state, s) {
				continue
			}
			subset := true
			for w, x := range e.open {
				subset = subset && x&^openBits[w] == 0
			}
			if subset {
				return true
			}
		}
		if entries == nil {
			memoBytes += costKey + int64(len(keyBuf))
		}
		memoBytes += costEntry + 8*int64(len(openBits))
		memo[k] = append(entries, memoEntry{state: s, open: slices.Clone(openBits)})
		return false
	}

	var moves []move[S]
	var succ []S
	var cands []int
	var alt []S
	// expand fills the moves from the current node, in state s, and
	// reports false if the budget ran out. viaOpen says that the node was
	// reached by placing an open op from a node in state before.
	expand := func(s S, viaOpen bool, before S) bool {
		minReturn := rets.min()
		lo := len(moves)
		cands = cands[:0]
		forced := -1
		for p := first; p < len(closed) && ops[closed[p]].Call <= minReturn; p++ {
			i := closed[p]
			if placed[i] || !opReady(ops, placed, int(i)) {
				continue
			}
			cands = append(cands, int(i))
			if res.steps >= budget {
				return false
			}
			res.steps++
			succ = dedupStates(step(succ[:0], s, ops[i].In, ops[i].Out))
			if len(succ) == 1 && succ[0] == s && stable(ops[i].In, ops[i].Out) {
				forced = int(i)
				break
			}
			for _, x := range succ {
				moves = append(moves, move[S]{op: i, to: x})
			}
		}
		if forced >= 0 {
			moves = append(moves[:lo], move[S]{op: int32(forced), to: s})
			return true
		}
		if done > bestClosed {
			bestClosed = done
			res.linearized, res.state = done+applied, s
			res.stuck = slices.Clone(cands)
		}
		for _, i := range opens {
			if ops[i].Call > minReturn {
				break
			}
			if placed[i] || !opReady(ops, placed, int(i)) {
				continue
			}
			if res.steps >= budget {
				return false
			}
			res.steps++
			succ = dedupStates(step(succ[:0], s, ops[i].In, ops[i].Out))
			alt = alt[:0]
			if viaOpen { // what i would reach without the open op just placed
				if res.steps >= budget {
					return false
				}
				res.steps++
				alt = step(alt, before, ops[i].In, ops[i].Out)
			}
			for _, x := range succ {
				if x != s && !slices.ContainsFunc(alt, func(y S) bool { return dominates(y, x) }) {
					moves = append(moves, move[S]{op: i, to: x})
				}
			}
		}
		return true
	}

	place := func(i int32) {
		placed[i] = true
		p := pos[i]
		if !ops[i].Open {
			closedBits[p/64] |= 1 << (p % 64)
			rets.set(p, math.MaxInt64)
			done++
			last = max(last, p)
			for first < len(closed) && placed[closed[first]] {
				first++
			}
			return
		}
		openBits[p/64] |= 1 << (p % 64)
		applied++
	}
	unplace := func(f *frame[S]) {
		i := f.op
		placed[i] = false
		p := pos[i]
		if !ops[i].Open {
			closedBits[p/64] &^= 1 << (p % 64)
			rets.set(p, ops[i].Return)
			done--
			first, last = f.first, f.last
			return
		}
		openBits[p/64] &^= 1 << (p % 64)
		applied--
	}

	seen(init)
	stack := []frame[S]{{state: init, op: -1}}
	if !expand(init, false, init) {
		res.verdict = searchExhausted
		return res
	}
	stack[0].moves = [2]int{0, len(moves)}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.moves[0]+f.next == f.moves[1] {
			// Every way on from this node failed: leave it.
			moves = moves[:f.moves[0]]
			if f.op >= 0 {
				unplace(f)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		m := moves[f.moves[0]+f.next]
		f.next++
		child := frame[S]{state: m.to, op: m.op, first: first, last: last}
		place(m.op)
		if done == len(closed) {
			return res
		}
		if seen(m.to) {
			unplace(&child)
			continue
		}
		lo := len(moves)
		if !expand(m.to, ops[m.op].Open, f.state) {
			res.verdict = searchExhausted
			return res
		}
		if full(len(moves), len(stack)+1) {
			res.verdict = searchMemoryFull
			return res
		}
		child.moves = [2]int{lo, len(moves)}
		stack = append(stack, child)
	}
	res.verdict = searchIllegal
	return res
}

// dedupStates removes repeated states in place (the sets are tiny).
func dedupStates[S comparable](set []S) []S {
	out := set[:0]
	for _, x := range set {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// minTree is a segment tree over n slots that keeps their minimum, so the
// search can place and unplace an op and read the earliest remaining
// return in O(log n).
type minTree struct {
	size int
	t    []int64
}

func newMinTree(n int) *minTree {
	size := 1
	for size < n {
		size *= 2
	}
	t := make([]int64, 2*size)
	for i := range t {
		t[i] = math.MaxInt64
	}
	return &minTree{size: size, t: t}
}

func (m *minTree) set(i int, v int64) {
	i += m.size
	m.t[i] = v
	for i /= 2; i >= 1; i /= 2 {
		m.t[i] = min(m.t[2*i], m.t[2*i+1])
	}
}

func (m *minTree) min() int64 { return m.t[1] }
