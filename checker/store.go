package checker

import (
	"fmt"
)

// propStoreMonotonic is S3: per resource, in apply order, no accepted write
// carries a token below the highest token accepted before it. This is the
// fence itself, judged from the store's own log.
const propStoreMonotonic = "S3"

// propStoreGrantee is S4: an accepted write with token t comes from the client
// that was granted t, for the resource t was granted on. Without it a client
// could pass the fence with a token it never held.
const propStoreGrantee = "S4"

// checkStoreMonotonic checks S3 and reports one violation per accepted write
// whose token is below the highest token accepted before it on its resource.
func checkStoreMonotonic(applies []StoreApply) []Violation {
	type highest struct {
		apply StoreApply
		seen  bool
	}
	high := make(map[string]highest)
	var vs []Violation
	for _, a := range applies {
		if !a.Accepted {
			continue
		}
		h := high[a.Resource]
		if h.seen && a.Token < h.apply.Token {
			vs = append(vs, Violation{
				Property: propStoreMonotonic,
				At:       a.At,
				Step:     a.Step,
				Detail: fmt.Sprintf("The store accepted a write to resource %q by client %q with token %d (value %d) at %v (step %d) although it had accepted token %d from client %q at %v (step %d).",
					a.Resource, a.Client, a.Token, a.Value, a.At, a.Step, h.apply.Token, h.apply.Client, h.apply.At, h.apply.Step),
			})
			continue
		}
		if !h.seen || a.Token > h.apply.Token {
			high[a.Resource] = highest{apply: a, seen: true}
		}
	}
	return vs
}

// checkStoreGrantee checks S4 and reports one violation per accepted write
// whose token was never granted (token 0 included), or was granted to another
// client or for another resource.
func checkStoreGrantee(applies []StoreApply, byToken tokenGroups) []Violation {
	var vs []Violation
	for _, a := range applies {
		if !a.Accepted {
			continue
		}
		var why string
		gs := byToken.of(a.Token)
		switch {
		case a.Token == 0:
			why = "token 0 is never granted"
		case len(gs) == 0:
			why = fmt.Sprintf("token %d was never granted", a.Token)
		default:
			matched := false
			for _, g := range gs {
				if g.Client == a.Client && g.Resource == a.Resource {
					matched = true
					break
				}
			}
			if matched {
				continue
			}
			// gs is in grant order; name the first grant, which is
			// the only one unless S1 is also violated.
			g := gs[0]
			why = fmt.Sprintf("token %d was granted to client %q for resource %q at %v (step %d)", a.Token, g.Client, g.Resource, g.Start, g.Step)
		}
		vs = append(vs, Violation{
			Property: propStoreGrantee,
			At:       a.At,
			Step:     a.Step,
			Detail: fmt.Sprintf("The store accepted a write to resource %q by client %q with token %d (value %d) at %v (step %d) but %s.",
				a.Resource, a.Client, a.Token, a.Value, a.At, a.Step, why),
		})
	}
	return vs
}
