package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// propDurable is S5: every acknowledged operation survives crashes and
// restarts. An acknowledgement is a promise; a service or store that forgets
// one after a crash lets the client act on something that is no longer true.
//
// S5 is judged from what the clients were told (StoreOp and LockOp outcomes)
// against the records of the service and the store, so that it flags what
// the single-stream properties cannot:
//
//   - (a1) every write acknowledged as accepted appears among the store's
//     accepted applies (same resource, client, token and value), decided
//     between its call and its return. S3, S4 and S8 never compare the
//     two streams, so an acknowledgement the store never decided is S5's
//     alone.
//   - (a2) after a store restart, every accepted apply and every read is
//     consistent with every write acknowledged before that restart: no
//     accepted token below the acknowledged one, and no read of an older
//     value. Only regressions that cross a StoreRestart are S5's: a store
//     that accepts a lower token without having restarted has a broken
//     fence (S3, and S8 if a client saw it), not a lost write. A
//     regression across a restart usually trips S3 (the log shows the
//     earlier acceptance) or S8 (a client saw the older value) as well,
//     just as S3 and S8 overlap on a stale write; S5 is the property that
//     names the restart.
//   - (b) every acquire acknowledged as granted appears among the service's
//     grants: same resource, client and token, granted no later than the
//     answer arrived. When it does not, S5 also names any grant that reused
//     the token. When it does, a later reuse of the token is S1's (the
//     grant log then holds the token twice), so S5 does not repeat it.
//
// (a1) and (b) compare two record streams, so they judge only histories that
// carry both: a history with no store applies at all (one built from client
// observations alone) is not judged by (a1), nor one with no grants at all by
// (b). (a2) judges only histories that record store restarts.
const propDurable = "S5"

// checkDurable checks S5.
func checkDurable(h History, byToken tokenGroups) []Violation {
	var vs []Violation
	vs = append(vs, checkAcknowledgedWritesLogged(h)...)
	vs = append(vs, checkWritesSurviveRestarts(h)...)
	vs = append(vs, checkAcknowledgedGrants(h, byToken)...)
	return vs
}

// acknowledgedWrites returns the writes acknowledged as accepted, by resource,
// each sorted by return time then ID.
// They are pointers into ops: a copy of each write was most of S5's
// allocation.
func acknowledgedWrites(ops []StoreOp) map[string][]*StoreOp {
	acked := make(map[string][]*StoreOp)
	for i := range ops {
		if op := &ops[i]; op.Kind == OpWrite && op.Outcome == OutcomeAccepted {
			acked[op.Resource] = append(acked[op.Resource], op)
		}
	}
	for _, ws := range acked {
		slices.SortStableFunc(ws, func(a, b *StoreOp) int {
			return cmp.Or(cmp.Compare(opReturn(*a), opReturn(*b)), cmp.Compare(a.ID, b.ID))
		})
	}
	return acked
}

// opReturn is a known op's return time, never before its call.
func opReturn(op StoreOp) time.Duration { return max(op.Return, op.Call) }

// checkAcknowledgedWritesLogged checks S5 (a1).
func checkAcknowledgedWritesLogged(h History) []Violation {
	if len(h.Applies) == 0 {
		return nil
	}
	// Applies are logged as they happen, so in a recorded history they
	// are in time order, and a write's acceptance is among the few
	// applies inside its interval: found by binary search and a short
	// scan. Only a write whose interval holds more than applyScan applies
	// (or a history out of order) looks its acceptance up by key, in an
	// index built the first time one does.
	inOrder := slices.IsSortedFunc(h.Applies, func(a, b StoreApply) int { return cmp.Compare(a.At, b.At) })
	var byKey *applyIndex
	var vs []Violation
	// Ops come in call order, so each search starts where the last one
	// ended and gallops forward (a search from scratch per write was a
	// tenth of S5's time); a call earlier than the last searches afresh.
	from, lastCall := 0, time.Duration(math.MinInt64)
	for _, op := range h.Ops {
		if op.Kind != OpWrite || op.Outcome != OutcomeAccepted {
			continue
		}
		ret := opReturn(op)
		found, decided := false, false
		if inOrder {
			if op.Call < lastCall {
				from = 0
			}
			i := firstAppliedFrom(h.Applies, from, op.Call)
			from, lastCall = i, op.Call
			for n := 0; n < applyScan; n, i = n+1, i+1 {
				if i == len(h.Applies) || h.Applies[i].At > ret {
					decided = true
					break
				}
				if a := &h.Applies[i]; a.Accepted && isApplyOf(a, op) {
					found, decided = true, true
					break
				}
			}
		}
		if !decided {
			if byKey == nil {
				byKey = indexApplies(h.Applies)
			}
			found = byKey.has(h.Applies, op, ret)
		}
		if found {
			continue
		}
		vs = append(vs, Violation{
			Property: propDurable,
			At:       ret,
			Detail: fmt.Sprintf("Client %q was told its write to resource %q with token %d (value %d, op %d, called %v) was accepted at %v, but the store's log holds no acceptance of it in that interval.",
				op.Client, op.Resource, op.Token, op.Value, op.ID, op.Call, ret),
			Ops: []int{op.ID},
		})
	}
	return vs
}

// applyScan bounds the applies S5 (a1) scans in a write's interval
// before it looks the write's acceptance up by key.
const applyScan = 64

// firstAppliedFrom returns the first index at or after from whose apply is
// at t or later (len(applies) if none), for applies in time order and
// applies[from-1] (if any) before t: it gallops from from, then searches
// the last step's range.
func firstAppliedFrom(applies []StoreApply, from int, t time.Duration) int {
	lo, step := from, 1
	hi := lo
	for hi < len(applies) && applies[hi].At < t {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(applies))
	i, _ := slices.BinarySearchFunc(applies[lo:hi], t, func(a StoreApply, t time.Duration) int { return cmp.Compare(a.At, t) })
	return lo + i
}

// isApplyOf says whether apply a is write op's (its time aside).
func isApplyOf(a *StoreApply, op StoreOp) bool {
	return a.Token == op.Token && a.Value == op.Value && a.Resource == op.Resource && a.Client == op.Client
}

// applyIndex finds a write's accepted applies by token and value (hashing
// two strings per record was most of S5's time); resource and client are
// compared while walking the chain, which is one apply long for nearly
// every write. The accepted applies of one key are a chain through next,
// from first[key]: one presized map of indices, not a list per key.
type applyIndex struct {
	first map[applyKey]int32
	next  []int32
}

type applyKey struct {
	token uint64
	value int64
}

func indexApplies(applies []StoreApply) *applyIndex {
	x := &applyIndex{first: make(map[applyKey]int32, len(applies)), next: make([]int32, len(applies))}
	for i := len(applies) - 1; i >= 0; i-- {
		if a := &applies[i]; a.Accepted {
			k := applyKey{a.Token, a.Value}
			x.next[i] = -1
			if j, ok := x.first[k]; ok {
				x.next[i] = j
			}
			x.first[k] = int32(i)
		}
	}
	return x
}

// has says whether write op's acceptance is logged within [op.Call, ret].
func (x *applyIndex) has(applies []StoreApply, op StoreOp, ret time.Duration) bool {
	j, ok := x.first[applyKey{op.Token, op.Value}]
	for ok && j >= 0 {
		a := &applies[j]
		if op.Call <= a.At && a.At <= ret && isApplyOf(a, op) {
			return true
		}
		j = x.next[j]
	}
	return false
}

// checkWritesSurviveRestarts checks S5 (a2).
func checkWritesSurviveRestarts(h History) []Violation {
	if len(h.StoreRestarts) == 0 {
		return nil
	}
	restarts := make([]time.Duration, len(h.StoreRestarts))
	for i, r := range h.StoreRestarts {
		restarts[i] = r.At
	}
	slices.Sort(restarts)
	// lastRestart returns the latest restart at or before t.
	lastRestart := func(t time.Duration) (time.Duration, bool) {
		i, found := slices.BinarySearch(restarts, t)
		if found {
			return t, true
		}
		if i == 0 {
			return 0, false
		}
		return restarts[i-1], true
	}
	acked := acknowledgedWrites(h.Ops)
	type floorKey struct {
		resource string
		restart  time.Duration
	}
	type floorVal struct {
		write StoreOp
		ok    bool
	}
	floors := make(map[floorKey]floorVal)
	// floor returns the newest write on resource acknowledged at or before
	// restart: the highest token, and among equal tokens the one called
	// last (one holder writes with one token, one write at a time).
	floor := func(resource string, restart time.Duration) (StoreOp, bool) {
		k := floorKey{resource, restart}
		if f, ok := floors[k]; ok {
			return f.write, f.ok
		}
		var f floorVal
		for _, w := range acked[resource] {
			if opReturn(*w) > restart {
				break
			}
			if !f.ok || w.Token > f.write.Token || w.Token == f.write.Token && w.Call > f.write.Call {
				f = floorVal{*w, true}
			}
		}
		floors[k] = f
		return f.write, f.ok
	}
	// writeByValue (the last write of each value, by resource) is built
	// on first use: only a read of a same-token write needs it.
	type valueKey struct {
		resource string
		value    int64
	}
	var writeByValue map[valueKey]int32
	writeOf := func(resource string, value int64) (StoreOp, bool) {
		if writeByValue == nil {
			writeByValue = make(map[valueKey]int32, len(h.Ops))
			for i := range h.Ops {
				if op := &h.Ops[i]; op.Kind == OpWrite {
					writeByValue[valueKey{op.Resource, op.Value}] = int32(i)
				}
			}
		}
		i, ok := writeByValue[valueKey{resource, value}]
		if !ok {
			return StoreOp{}, false
		}
		return h.Ops[i], true
	}

	var vs []Violation
	for _, a := range h.Applies {
		if !a.Accepted {
			continue
		}
		r, ok := lastRestart(a.At)
		if !ok {
			continue
		}
		w, ok := floor(a.Resource, r)
		if !ok || a.Token >= w.Token {
			continue
		}
		vs = append(vs, Violation{
			Property: propDurable,
			At:       a.At,
			Step:     a.Step,
			Detail: fmt.Sprintf("After restarting at %v the store accepted a write to resource %q by client %q with token %d (value %d) at %v (step %d), forgetting the write with token %d (value %d, op %d) it had acknowledged to client %q at %v.",
				r, a.Resource, a.Client, a.Token, a.Value, a.At, a.Step, w.Token, w.Value, w.ID, w.Client, opReturn(w)),
			Ops: []int{w.ID},
		})
	}
	for _, q := range h.Ops {
		if q.Kind != OpRead || q.Outcome != OutcomeAccepted {
			continue
		}
		r, ok := lastRestart(q.Call)
		if !ok {
			continue
		}
		w, ok := floor(q.Resource, r)
		if !ok {
			continue
		}
		older := q.ReadToken < w.Token
		if q.ReadToken == w.Token && q.ReadValue != w.Value {
			// Same token: older only if the write it saw had returned
			// before the acknowledged one was called.
			if x, ok := writeOf(q.Resource, q.ReadValue); ok && x.Token == w.Token && x.Outcome != OutcomeUnknown && opReturn(x) < w.Call {
				older = true
			}
		}
		if !older {
			continue
		}
		ids := []int{w.ID, q.ID}
		slices.Sort(ids)
		vs = append(vs, Violation{
			Property: propDurable,
			At:       q.Call,
			Detail: fmt.Sprintf("After restarting at %v the store answered client %q's read of resource %q (op %d, called %v) with value %d from token %d, forgetting the write with token %d (value %d, op %d) it had acknowledged to client %q at %v.",
				r, q.Client, q.Resource, q.ID, q.Call, q.ReadValue, q.ReadToken, w.Token, w.Value, w.ID, w.Client, opReturn(w)),
			Ops: ids,
		})
	}
	return vs
}

// checkAcknowledgedGrants checks S5 (b).
func checkAcknowledgedGrants(h History, byToken tokenGroups) []Violation {
	if len(h.Grants) == 0 {
		return nil
	}
	var vs []Violation
	for _, op := range h.LockOps {
		if op.Kind != LockAcquire || op.Outcome != LockGranted {
			continue
		}
		ret := max(op.Return, op.Call)
		gs := byToken.of(op.Token)
		if slices.ContainsFunc(gs, func(g Grant) bool {
			return g.Resource == op.Resource && g.Client == op.Client && g.Start <= ret
		}) {
			continue
		}
		why := fmt.Sprintf("the service never granted token %d", op.Token)
		if len(gs) > 0 {
			g := gs[0]
			why = fmt.Sprintf("the service's only record of token %d is its grant to client %q for resource %q at %v (step %d)", op.Token, g.Client, g.Resource, g.Start, g.Step)
			if len(gs) > 1 {
				why = fmt.Sprintf("the service's records of token %d are %d grants, the first to client %q for resource %q at %v (step %d)", op.Token, len(gs), g.Client, g.Resource, g.Start, g.Step)
			}
		}
		vs = append(vs, Violation{
			Property: propDurable,
			At:       ret,
			Detail: fmt.Sprintf("Client %q was granted resource %q with token %d (lock op %d, returned %v) but %s.",
				op.Client, op.Resource, op.Token, op.ID, ret, why),
			LockOps: []int{op.ID},
		})
	}
	return vs
}
