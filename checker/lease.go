package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// propLeaseSafety is L1, lease safety inside the lease fault model: a client
// never believes it holds a lock after the service has ended its grant.
//
// Unlike S1–S11 it does not hold under every fault, which is why Check does
// not judge it and the caller must say which faults to excuse. A lease
// lock's promise to its holder is only as good as the lease's timing
// assumptions: a client whose process stops (a GC pause) or whose clock
// runs slower than the drift bound ρ it assumes — or a leader whose clock
// runs faster — may keep believing in a lease the service has ended, and
// only fencing then protects the store. Every other fault the swarm injects
// (crashes and restarts, partitions, loss, duplication, delay and
// reordering, drift within ρ, wall-clock jumps, slow disks) is inside the
// lease model: a correct service and client library never let a belief
// outlast its grant under them, because the client measures its lease from
// the request's start, on its monotonic clock, shortened by TTL·ρ and a
// margin, while the service measures it from its decision, which comes
// later, on its own monotonic clock.
//
// L1 catches what fencing makes harmless to the store: a service that ends
// leases early (a wall-clock expiry, a lease check skipped, a release by
// someone else), or a client library that trusts its lease too long (no
// drift margin, the lease measured from the reply). S1–S11 pass for those,
// by design: that is what fencing is for; but such a lock is not a lease
// lock any more, and a store without fences would be corrupted by it.
//
// A belief ended by its client's restart is not judged: the client's belief
// ended at its crash, which the records cannot see.
const propLeaseSafety = "L1"

// LeaseExcuse is a window in which a fault outside the lease fault model was
// active, so that L1 does not judge the beliefs it touched.
type LeaseExcuse struct {
	// Client is the client whose beliefs the fault excuses (a pause of its
	// process, its clock drifting beyond the bound), or "" for every
	// client's (a service node's clock drifting beyond the bound).
	Client string `json:"client,omitempty"`
	// From and To bound the window in true time.
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
	// Fault names the fault for reports.
	Fault string `json:"fault"`
}

// CheckLeaseSafety checks L1: every belief of a client in token t must end
// no later than the service ended the grant of t, unless a fault of excused
// touched the grant while the belief lasted (a window overlapping
// [grant start, belief end] that names the client or every client). It
// judges only beliefs whose grant the service recorded and ended (beliefs
// in tokens never granted are S5's), and one violation per belief.
func CheckLeaseSafety(h History, excused []LeaseExcuse) []Violation {
	h = h.facts()
	byToken := grantsByToken(h.Grants)
	beliefOrder := func(a, b Belief) int {
		if a.From != b.From {
			return cmp.Compare(a.From, b.From)
		}
		return cmp.Or(strings.Compare(a.Client, b.Client), cmp.Compare(a.Token, b.Token))
	}
	beliefs := h.Beliefs // recorded in order: copied only to be sorted
	if !slices.IsSortedFunc(beliefs, beliefOrder) {
		beliefs = slices.Clone(h.Beliefs)
		slices.SortStableFunc(beliefs, beliefOrder)
	}
	var vs []Violation
	for _, b := range beliefs {
		if b.Reason == "restarted" {
			continue
		}
		// The latest grant of the token to the client on the resource that
		// started by the belief, else the first.
		var g Grant
		found := false
		for _, x := range byToken.of(b.Token) {
			switch {
			case x.Resource != b.Resource || x.Client != b.Client:
			case !found:
				g, found = x, true
			case x.Start <= b.From:
				g = x
			}
		}
		if !found {
			continue
		}
		end := b.To
		if b.Open {
			end = h.End
		}
		if g.Open || end <= g.End || end <= b.From {
			continue // within the grant, or an empty belief (a late answer the watchdog refused at once)
		}
		if slices.ContainsFunc(excused, func(e LeaseExcuse) bool {
			return (e.Client == "" || e.Client == b.Client) && e.From <= end && e.To >= g.Start
		}) {
			continue
		}
		until := end.String()
		if b.Open {
			until = "the end of the run"
		}
		vs = append(vs, Violation{
			Property: propLeaseSafety,
			At:       g.End,
			Detail: fmt.Sprintf("Client %q believed it held resource %q with token %d until %s (%s), %v after the service ended that grant (%s at %v), and no fault outside the lease model (a pause of the client, clock drift beyond the bound) touched it.",
				b.Client, b.Resource, b.Token, until, beliefEnd(b), end-max(g.End, b.From), g.Reason, g.End),
		})
	}
	sortViolations(vs)
	return vs
}

func beliefEnd(b Belief) string {
	switch {
	case b.Open:
		return "still believing"
	case b.Reason == "":
		return "belief ended"
	}
	return "belief ended: " + b.Reason
}

// WithViolations adds vs (such as CheckLeaseSafety's) to a verdict: any
// violation makes it a violation, ordered with the others.
func WithViolations(v Verdict, vs []Violation) Verdict {
	if len(vs) == 0 {
		return v
	}
	v.Violations = append(slices.Clone(v.Violations), vs...)
	sortViolations(v.Violations)
	v.Kind, v.Unknown = VerdictViolation, ""
	return v
}
