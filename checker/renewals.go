package checker

import (
	"fmt"
	"time"
)

// propCurrentGrant is S6: a renewal or a release of token t takes effect only
// while t is the current grant of its resource, and only for its holder. A
// service that renews or releases a lease it no longer has revives or frees
// a lock someone else may hold.
//
// S6 is judged from the service's own renewal and lease-end records against
// its grant records: each Renewal, and each GrantEnd with reason "released",
// must fall inside [Start, End] of the grant of its token, on its resource,
// to its client. It never looks at what clients saw (that is S5's and S7's)
// nor at grants alone (S1's and S2's).
const propCurrentGrant = "S6"

// checkCurrentGrant checks S6.
func checkCurrentGrant(h History, byToken tokenGroups) []Violation {
	// why returns "" if the effect at true time at fits a grant of token on
	// resource to client, else the reason it does not.
	why := func(resource, client string, token uint64, at time.Duration) string {
		gs := byToken.of(token)
		if len(gs) == 0 {
			return fmt.Sprintf("token %d was never granted", token)
		}
		for _, g := range gs {
			if g.Resource == resource && g.Client == client && g.Start <= at && (g.Open || at <= g.End) {
				return ""
			}
		}
		g := gs[0]
		for _, x := range gs { // prefer naming a grant of the same resource and client
			if x.Resource == resource && x.Client == client {
				g = x
				break
			}
		}
		switch {
		case g.Resource != resource || g.Client != client:
			return fmt.Sprintf("token %d was granted to client %q for resource %q at %v (step %d)", token, g.Client, g.Resource, g.Start, g.Step)
		case at < g.Start:
			return fmt.Sprintf("token %d was granted only at %v (step %d)", token, g.Start, g.Step)
		}
		reason := g.Reason
		if reason == "" {
			reason = "ended"
		}
		return fmt.Sprintf("the grant of token %d (from %v, step %d) had %s at %v", token, g.Start, g.Step, reason, g.End)
	}

	var vs []Violation
	for _, n := range h.Renewals {
		if w := why(n.Resource, n.Client, n.Token, n.At); w != "" {
			vs = append(vs, Violation{
				Property: propCurrentGrant,
				At:       n.At,
				Step:     n.Step,
				Detail: fmt.Sprintf("The service renewed token %d on resource %q for client %q (request %d) at %v (step %d) but %s.",
					n.Token, n.Resource, n.Client, n.Request, n.At, n.Step, w),
			})
		}
	}
	for _, e := range h.Ends {
		if e.Reason != EndReleased {
			continue
		}
		if w := why(e.Resource, e.Client, e.Token, e.At); w != "" {
			vs = append(vs, Violation{
				Property: propCurrentGrant,
				At:       e.At,
				Step:     e.Step,
				Detail: fmt.Sprintf("The service released token %d on resource %q held by client %q at %v (step %d) but %s.",
					e.Token, e.Resource, e.Client, e.At, e.Step, w),
			})
		}
	}
	return vs
}
