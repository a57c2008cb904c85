package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// propRequestOnce is S11: an acquire request takes effect at most once. A
// client retries an unanswered acquire under the same request id (to the
// next server, after a redirect, after a timeout) and the network may
// deliver a copy twice; a service that applies a second copy as a new
// acquire grants the lock to a client that no longer asks for it — a hold
// nobody knows of, which blocks every other client until it expires, and
// a token the client never saw. The first copy's grant answers them all.
//
// S11 is judged from the service's own grant records alone, for grants
// that name their acquire (Grant.Key, else Grant.Request ≠ 0: the service
// said which acquire each answers); a grant a crash took back before it
// was durable (Lost) is left out, as for S1.
const propRequestOnce = "S11"

// checkRequestsOnce checks S11 and reports one violation per grant that
// answers a request an earlier grant answered already.
func checkRequestsOnce(grants []Grant) []Violation {
	var named []int
	for i, g := range grants {
		if (g.Key != "" || g.Request != 0) && !g.Lost {
			named = append(named, i)
		}
	}
	if len(named) < 2 {
		return nil
	}
	// One sort by client, request, then grant order: a second grant of a
	// request follows its first.
	slices.SortStableFunc(named, func(a, b int) int {
		x, y := grants[a], grants[b]
		if c := strings.Compare(x.Client, y.Client); c != 0 {
			return c
		}
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		if x.Key == "" { // numbers name a request only without a key
			if c := cmp.Compare(x.Request, y.Request); c != 0 {
				return c
			}
		}
		return grantOrder(x, y)
	})
	var vs []Violation
	for k := 1; k < len(named); k++ {
		first, g := grants[named[k-1]], grants[named[k]]
		if g.Client != first.Client || g.Key != first.Key || g.Key == "" && g.Request != first.Request {
			continue
		}
		name := fmt.Sprintf("request %d", g.Request)
		if g.Key != "" {
			name = fmt.Sprintf("attempt %q", g.Key)
		}
		vs = append(vs, Violation{
			Property: propRequestOnce,
			At:       g.Start,
			Step:     g.Step,
			Detail: fmt.Sprintf("The service granted client %q's acquire (%s) twice: token %d on resource %q at %v (step %d), then token %d on resource %q at %v (step %d).",
				g.Client, name, first.Token, first.Resource, first.Start, first.Step, g.Token, g.Resource, g.Start, g.Step),
		})
	}
	return vs
}
