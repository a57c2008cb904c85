package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// propElection is S9, election safety: at most one replica wins the
// election of a term. Two leaders of one term can each commit a different
// entry at the same index, and every guarantee of the log — the token is
// the granting entry's index — rests on there being one.
const propElection = "S9"

// propStateMachine is S10, state-machine safety: every replica that applies
// the log entry at an index applies the same entry. Replicas that applied
// different grants at one index hand out one token for two grants, or two
// holders for one lock, and a client notices only if it asks the replica
// that diverged.
const propStateMachine = "S10"

// checkElections checks S9 and reports one violation per replica that won
// a term another replica had won before it (in true time, then step), and
// one per repeated win of a term by the same replica. A replica reports
// each term it wins once (lockservice.EvElected), so a repeat is a
// restarted replica leading its term again, which Raft forbids: a
// restarted replica must campaign in a new, higher term, and one that
// does not has lost its term or vote (or its log) with unsynced state —
// a second leader of the term, in succession.
func checkElections(es []Election) []Violation {
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b Election) int {
		return cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.At, b.At), cmp.Compare(a.Step, b.Step), strings.Compare(a.Node, b.Node))
	})
	var vs []Violation
	for i := 0; i < len(es); {
		j := i + 1
		for j < len(es) && es[j].Term == es[i].Term {
			j++
		}
		first, seen := es[i], []Election{es[i]}
		for _, e := range es[i+1 : j] {
			if k := slices.IndexFunc(seen, func(x Election) bool { return x.Node == e.Node }); k >= 0 {
				before := seen[k]
				seen[k] = e
				vs = append(vs, Violation{Property: propElection, At: e.At, Step: e.Step,
					Detail: fmt.Sprintf("Replica %q won term %d twice: at %v (step %d) and again at %v (step %d); a replica reports a won term once, so it restarted and led the same term again instead of campaigning in a new one.",
						e.Node, e.Term, before.At, before.Step, e.At, e.Step)})
				continue
			}
			seen = append(seen, e)
			vs = append(vs, Violation{Property: propElection, At: e.At, Step: e.Step,
				Detail: fmt.Sprintf("Term %d had two leaders: replica %q won it at %v (step %d) and replica %q also won it at %v (step %d).",
					e.Term, first.Node, first.At, first.Step, e.Node, e.At, e.Step)})
		}
		i = j
	}
	return vs
}

// checkEntryApplies checks S10. The first apply of each index (in true
// time, then step, then list order) is the entry the others must match.
// Once replicas diverge they usually differ at every index after, so it
// reports one violation per run of consecutive indexes that differ, at the
// first differing record of its first index, naming the replicas on both
// sides. A recorded history holds one record per index and distinct entry,
// in the order of their first apply, so that when the replicas agree its
// indexes strictly increase and the check allocates nothing.
func checkEntryApplies(as []EntryApply) []Violation {
	if indexesIncrease(as) {
		return nil // one entry per index
	}
	as = slices.Clone(as)
	slices.SortStableFunc(as, func(a, b EntryApply) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.At, b.At), cmp.Compare(a.Step, b.Step))
	})
	var vs []Violation
	var run struct {
		first, other EntryApply // the first index's entry and the first that differs
		last         uint64     // the run's last index
		open         bool
	}
	flush := func() {
		if !run.open {
			return
		}
		f, a := run.first, run.other
		more := ""
		if run.last > f.Index {
			more = fmt.Sprintf(" (and at every index after it up to %d)", run.last)
		}
		vs = append(vs, Violation{Property: propStateMachine, At: a.At, Step: a.Step,
			Detail: fmt.Sprintf("Replicas applied different entries at log index %d%s: replica %q applied term %d, command %s at %v (step %d), and replica %q applied term %d, command %s at %v (step %d).",
				f.Index, more, f.Node, f.Term, commandString(f.Command), f.At, f.Step, a.Node, a.Term, commandString(a.Command), a.At, a.Step)})
		run.open = false
	}
	for i := 0; i < len(as); {
		j := i + 1
		for j < len(as) && as[j].Index == as[i].Index {
			j++
		}
		f := as[i]
		k := slices.IndexFunc(as[i+1:j], func(a EntryApply) bool { return a.Term != f.Term || a.Command != f.Command })
		switch {
		case k < 0:
			flush()
		case run.open && run.last+1 == f.Index:
			run.last = f.Index
		default:
			flush()
			run.first, run.other, run.last, run.open = f, as[i+1+k], f.Index, true
		}
		i = j
	}
	flush()
	return vs
}

// indexesIncrease reports whether the records' indexes strictly increase.
func indexesIncrease(as []EntryApply) bool {
	for i := 1; i < len(as); i++ {
		if as[i].Index <= as[i-1].Index {
			return false
		}
	}
	return true
}

// commandString renders a command digest for details.
func commandString(d uint64) string {
	if d == 0 {
		return "(empty)"
	}
	return fmt.Sprintf("%016x", d)
}
