package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
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

// checkGrantsAnswerAcquires checks S11 from the clients' side: every grant
// to a client answers an acquire of that client, and no acquire is answered
// by two. An acquire answered granted accounts for the grant of its token;
// one whose outcome the client never learned (no answer, or a copy shed,
// redirected or judged stale: another copy may have taken effect, at any
// time after the call) accounts for at most one more grant, made after it
// was called. A grant left over was made for nobody who asked: a late or
// duplicated copy of an acquire already answered (busy, or granted under
// another token), applied again.
//
// It needs no help from the service: it holds any design to at-most-once
// acquires, whether or not its grants name their attempt. It judges the
// clients that made at least one acquire, so a hand-made history of grants
// alone is judged by the other properties only.
func checkGrantsAnswerAcquires(h History) []Violation {
	if len(h.LockOps) == 0 || len(h.Grants) == 0 {
		return nil
	}
	type hold struct {
		client, resource string
		token            uint64
	}
	type side struct{ client, resource string }
	acquirers := map[string]bool{}
	claimed := map[hold]bool{}
	open := map[side][]time.Duration{} // calls of acquires of unknown outcome
	for _, op := range h.LockOps {
		if op.Kind != LockAcquire {
			continue
		}
		acquirers[op.Client] = true
		switch op.Outcome {
		case LockGranted:
			claimed[hold{op.Client, op.Resource, op.Token}] = true
		case LockUnknown, LockOverloaded, LockNotLeader, LockStale:
			s := side{op.Client, op.Resource}
			open[s] = append(open[s], op.Call)
		}
	}
	left := map[side][]int{} // grants no granted acquire accounts for
	for i, g := range h.Grants {
		if g.Lost || !acquirers[g.Client] || claimed[hold{g.Client, g.Resource, g.Token}] {
			continue
		}
		s := side{g.Client, g.Resource}
		left[s] = append(left[s], i)
	}
	var vs []Violation
	//detlint:sorted the violations are sorted by the caller
	for s, gs := range left {
		calls := open[s]
		slices.Sort(calls)
		slices.SortFunc(gs, func(a, b int) int { return grantOrder(h.Grants[a], h.Grants[b]) })
		// Every open acquire may take effect at any time after its call,
		// so a grant may use any unused one called before it: counting
		// them in time order is a maximum matching.
		k, free := 0, 0
		for _, i := range gs {
			g := h.Grants[i]
			for k < len(calls) && calls[k] <= g.Start {
				k++
				free++
			}
			if free > 0 {
				free--
				continue
			}
			vs = append(vs, Violation{
				Property: propRequestOnce,
				At:       g.Start,
				Step:     g.Step,
				Detail: fmt.Sprintf("The service granted resource %q to client %q with token %d at %v (step %d), but no acquire of that client asked for it: every acquire it had called by then was answered otherwise, or accounts for another grant.",
					g.Resource, g.Client, g.Token, g.Start, g.Step),
			})
		}
	}
	return vs
}
