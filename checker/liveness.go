package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// propLiveness names the violation CheckLiveness reports. Liveness is not a
// safety property: Check never reports it, and Combine ranks it below every
// safety violation.
const propLiveness = "liveness"

// CheckLiveness judges progress after the faults stop. Every client listed
// must, after healAt, complete one full cycle within bound: an acquire that
// returned granted at or after healAt, then a write with the granted token
// that returned accepted, then a release of that token that returned
// released — all three returned by healAt+bound. An acquire called before the
// heal and granted after it counts; a hold granted before the heal does not.
//
// It returns nil if every client made it, else one violation (Property
// "liveness", At healAt+bound) that names every client that did not and how
// far it got. The caller lists the clients that should make progress:
// clients that are crashed at the end of the run, or that had no cycles left
// to run after the heal, cannot.
func CheckLiveness(h History, healAt, bound time.Duration, clients []string) *Violation {
	deadline := healAt + bound
	names := slices.Clone(clients)
	slices.Sort(names)
	names = slices.Compact(names)

	lockOps := byClient(h.LockOps, func(op *LockOp) string { return op.Client }, names)
	storeOps := byClient(h.Ops, func(op *StoreOp) string { return op.Client }, names)
	var clauses []string
	var storeIDs, lockIDs []int
	for _, c := range names {
		p := livenessProgress(lockOps[c], storeOps[c], healAt, deadline)
		if p.stage == stageReleased {
			continue
		}
		clauses = append(clauses, p.describe(c, deadline))
		storeIDs = append(storeIDs, p.storeIDs...)
		lockIDs = append(lockIDs, p.lockIDs...)
	}
	if len(clauses) == 0 {
		return nil
	}
	slices.Sort(storeIDs)
	slices.Sort(lockIDs)
	return &Violation{
		Property: propLiveness,
		At:       deadline,
		Detail: fmt.Sprintf("After the heal at %v, %d of %d clients did not acquire, write with their token and release within %v (by %v): %s.",
			healAt, len(clauses), len(names), bound, deadline, strings.Join(clauses, "; ")),
		Ops:     slices.Compact(storeIDs),
		LockOps: slices.Compact(lockIDs),
	}
}

// Combine merges a safety verdict from Check with a liveness result from
// CheckLiveness (nil when every client made progress). A safety violation
// beats an unknown safety verdict, which beats a liveness failure, which
// beats a pass: a run whose safety was not proven says so first, whatever
// its progress, so that a liveness failure never hides undecided safety.
// The liveness violation, if any, is kept in Liveness whatever the kind.
func Combine(safety Verdict, liveness *Violation) Verdict {
	v := safety
	v.Liveness = liveness
	if liveness != nil && v.Kind == VerdictPass {
		v.Kind = VerdictLiveness
	}
	return v
}

// livenessStage is how far a client got through a cycle after the heal.
type livenessStage uint8

const (
	stageNone     livenessStage = iota // no grant after the heal
	stageGranted                       // granted, no accepted write yet
	stageWritten                       // granted and written, not released
	stageReleased                      // a full cycle
)

// progress is a client's best cycle after the heal.
type progress struct {
	stage   livenessStage
	acquire LockOp
	write   StoreOp
	// last op of the kind the client was stuck on, for the report.
	lastLock  *LockOp
	lastStore *StoreOp
	storeIDs  []int
	lockIDs   []int
}

// byClient lists the ops of each named client, in history order: a list
// per client (nil for none), all cut from one array. It points into ops
// rather than copying them, which, with the sort of a client's list, was
// most of the liveness check's time; names must be sorted and distinct.
func byClient[T any](ops []T, client func(*T) string, names []string) map[string][]*T {
	var index numbering // names are distinct: numbered in their order
	for _, c := range names {
		index.of(c)
	}
	which := make([]int32, len(ops)) // the op's client's index in names, -1 if unnamed
	offsets := make([]int, len(names)+1)
	for i := range ops {
		k, ok := index.lookup(client(&ops[i]))
		if !ok {
			k = -1
		} else {
			offsets[k+1]++
		}
		which[i] = k
	}
	for k := range names {
		offsets[k+1] += offsets[k]
	}
	all := make([]*T, offsets[len(names)])
	next := slices.Clone(offsets[:len(names)])
	for i, k := range which {
		if k >= 0 {
			all[next[k]] = &ops[i]
			next[k]++
		}
	}
	out := make(map[string][]*T, len(names))
	for k, c := range names {
		if lo, hi := offsets[k], offsets[k+1]; hi > lo {
			out[c] = all[lo:hi:hi]
		}
	}
	return out
}

// sortStableIfNot sorts s stably by cmp unless it is sorted already, as a
// client's ops in a recorded history usually are: checking costs one pass,
// a stable sort of a sorted list n·log n comparisons.
func sortStableIfNot[E any](s []E, cmp func(a, b E) int) {
	if !slices.IsSortedFunc(s, cmp) {
		slices.SortStableFunc(s, cmp)
	}
}

// livenessProgress finds a client's best cycle from its lock and store ops
// (in history order; the lists are sorted here, in place, the ops left
// alone): the furthest stage reached, the earliest grant among equals.
func livenessProgress(lockOps []*LockOp, storeOps []*StoreOp, healAt, deadline time.Duration) progress {
	sortStableIfNot(lockOps, func(a, b *LockOp) int { return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.ID, b.ID)) })
	sortStableIfNot(storeOps, func(a, b *StoreOp) int { return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.ID, b.ID)) })
	returned := func(out bool, ret time.Duration) bool { return out && ret <= deadline }

	best := progress{stage: stageNone}
	for _, a := range lockOps {
		if a.Kind != LockAcquire || !returned(a.Outcome == LockGranted, a.Return) || a.Return < healAt {
			continue
		}
		p := progress{stage: stageGranted, acquire: *a}
		for _, w := range storeOps {
			if w.Kind == OpWrite && w.Resource == a.Resource && w.Token == a.Token && w.Call >= a.Return &&
				returned(w.Outcome == OutcomeAccepted, w.Return) {
				p.stage, p.write = stageWritten, *w
				break
			}
		}
		if p.stage == stageWritten {
			for _, r := range lockOps {
				if r.Kind == LockRelease && r.Resource == a.Resource && r.Token == a.Token && r.Call >= p.write.Return &&
					returned(r.Outcome == LockReleased, r.Return) {
					p.stage = stageReleased
					break
				}
			}
		}
		if p.stage > best.stage {
			best = p
		}
		if best.stage == stageReleased {
			return best
		}
	}

	// Name the last op of the kind the client was stuck on.
	switch best.stage {
	case stageGranted:
		if n := len(storeOps); n > 0 {
			best.lastStore = storeOps[n-1]
		}
		best.lockIDs = []int{best.acquire.ID}
	case stageWritten:
		best.lockIDs = []int{best.acquire.ID}
		best.storeIDs = []int{best.write.ID}
		fallthrough
	default:
		if n := len(lockOps); n > 0 {
			best.lastLock = lockOps[n-1]
		}
	}
	if best.lastLock != nil {
		best.lockIDs = append(best.lockIDs, best.lastLock.ID)
	}
	if best.lastStore != nil {
		best.storeIDs = append(best.storeIDs, best.lastStore.ID)
	}
	return best
}

// describe says, in one clause, how far client got and what it did last.
func (p progress) describe(client string, deadline time.Duration) string {
	var got string
	switch p.stage {
	case stageNone:
		got = fmt.Sprintf("client %q was never granted the lock", client)
	case stageGranted:
		got = fmt.Sprintf("client %q was granted token %d at %v but had no write with it accepted", client, p.acquire.Token, p.acquire.Return)
	case stageWritten:
		got = fmt.Sprintf("client %q was granted token %d at %v and wrote with it at %v but did not release it", client, p.acquire.Token, p.acquire.Return, p.write.Return)
	}
	switch {
	case p.lastLock != nil:
		return got + " (its last lock op: " + describeLockOp(*p.lastLock) + ")"
	case p.lastStore != nil:
		return got + " (its last store op: " + describeStoreOp(*p.lastStore) + ")"
	case p.stage == stageNone:
		return got + " (it made no lock op at all)"
	}
	return got + " (it made no store op at all)"
}
