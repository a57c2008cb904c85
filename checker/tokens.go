package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// propTokens is S1: fencing tokens strictly increase in grant order across all
// resources, and no token is issued twice. Fencing is only as strong as this:
// a reissued or smaller token lets a stale holder pass the store's fence.
const propTokens = "S1"

// grantOrder orders grants as the lock service issued them: by Start, then
// Step, then (for determinism only) by token, resource and client.
//
// It returns at the first difference (cmp.Or would compare all five
// fields, two of them strings, for every pair a sort looks at).
func grantOrder(a, b Grant) int {
	switch {
	case a.Start != b.Start:
		return cmp.Compare(a.Start, b.Start)
	case a.Step != b.Step:
		return cmp.Compare(a.Step, b.Step)
	case a.Token != b.Token:
		return cmp.Compare(a.Token, b.Token)
	case a.Resource != b.Resource:
		return strings.Compare(a.Resource, b.Resource)
	}
	return strings.Compare(a.Client, b.Client)
}

// grantsByToken groups grants by token, each group in grantOrder: one
// sorted copy, looked up by binary search (tokenGroups.of). Check builds
// it once for S4, S5 and S6, lease safety once more; a map of one list
// per token cost more to build than all their look-ups together.
func grantsByToken(grants []Grant) tokenGroups {
	byToken := func(a, b Grant) int {
		if a.Token != b.Token {
			return cmp.Compare(a.Token, b.Token)
		}
		return grantOrder(a, b)
	}
	// A recorded history's grants are in token order already (a token is
	// a log index, granted as the log grows): they are used as they are,
	// and copied only to be sorted. Groups are capacity-clipped (of), so
	// nothing reached through them can write into grants.
	sorted := grants
	if !slices.IsSortedFunc(sorted, byToken) {
		sorted = slices.Clone(grants)
		slices.SortStableFunc(sorted, byToken)
	}
	tokens := make([]uint64, len(sorted))
	for i := range sorted {
		tokens[i] = sorted[i].Token
	}
	g := tokenGroups{sorted: sorted, tokens: tokens}
	// Tokens are log indexes: a run's grants hold a good share of a
	// dense range, so a table with one slot per token in that range
	// answers of without a search (the binary search, its probes
	// missing the cache, was most of the time of the checks that look
	// grants up). Sparse tokens (hand-made, or a design's synthetic
	// ones) keep the search, so the table stays a few times the grants.
	if n := len(tokens); n > 0 {
		lo, hi := tokens[0], tokens[n-1]
		if span := hi - lo; span < uint64(denseTokenSpan*n+denseTokenSlack) {
			g.lo = lo
			g.first = make([]int32, span+2)
			k := 0
			for t := range g.first {
				for k < n && tokens[k]-lo < uint64(t) {
					k++
				}
				g.first[t] = int32(k)
			}
		}
	}
	return g
}

// The dense table of tokenGroups is made while the tokens' span is under
// denseTokenSpan slots per grant plus denseTokenSlack (four bytes a slot).
const (
	denseTokenSpan  = 16
	denseTokenSlack = 1024
)

// tokenGroups is grants sorted by token, then grantOrder, and their
// tokens alone (what the binary search reads: a grant is a few hundred
// bytes, a token eight). When the tokens are dense enough, first[t-lo] is
// the position of the first grant whose token is t or above, for every t
// from lo to one past the highest token; else first is nil.
type tokenGroups struct {
	sorted []Grant
	tokens []uint64
	lo     uint64
	first  []int32
}

// of returns the grants of token t, in grantOrder (capacity clipped, so an
// append to one group cannot reach the next).
func (g tokenGroups) of(t uint64) []Grant {
	if g.first != nil {
		if t < g.lo || t-g.lo >= uint64(len(g.first)-1) {
			return nil
		}
		lo, hi := g.first[t-g.lo], g.first[t-g.lo+1]
		return g.sorted[lo:hi:hi]
	}
	lo, _ := slices.BinarySearch(g.tokens, t)
	hi := lo
	for hi < len(g.tokens) && g.tokens[hi] == t {
		hi++
	}
	return g.sorted[lo:hi:hi]
}

// checkTokens checks S1 and reports one violation per grant whose token is
// not above every token granted before it.
func checkTokens(grants []Grant) []Violation {
	gs := grants
	if !slices.IsSortedFunc(gs, grantOrder) {
		gs = slices.Clone(grants)
		slices.SortStableFunc(gs, grantOrder)
	}

	var vs []Violation
	// first maps a token to its first grant. Only a token not above the
	// highest so far can repeat one, so the map is built at the first
	// such grant (from the grants before it) and kept from then on: a
	// correct run never builds it.
	var first map[uint64]int
	var maxGrant Grant // grant with the highest token so far
	for i, g := range gs {
		if first == nil && i > 0 && g.Token <= maxGrant.Token {
			first = make(map[uint64]int, len(gs))
			for j := range i {
				if _, seen := first[gs[j].Token]; !seen {
					first[gs[j].Token] = j
				}
			}
		}
		var prev Grant
		var dup bool
		if first != nil {
			var j int
			if j, dup = first[g.Token]; dup {
				prev = gs[j]
			}
		}
		if dup {
			vs = append(vs, Violation{
				Property: propTokens,
				At:       g.Start,
				Step:     g.Step,
				Detail: fmt.Sprintf("Token %d was issued twice: to client %q for resource %q at %v (step %d) and again to client %q for resource %q at %v (step %d).",
					g.Token, prev.Client, prev.Resource, prev.Start, prev.Step, g.Client, g.Resource, g.Start, g.Step),
			})
		} else {
			if first != nil {
				first[g.Token] = i
			}
			if i > 0 && g.Token <= maxGrant.Token {
				vs = append(vs, Violation{
					Property: propTokens,
					At:       g.Start,
					Step:     g.Step,
					Detail: fmt.Sprintf("Token %d granted to client %q for resource %q at %v (step %d) is not above token %d granted earlier to client %q for resource %q at %v (step %d).",
						g.Token, g.Client, g.Resource, g.Start, g.Step, maxGrant.Token, maxGrant.Client, maxGrant.Resource, maxGrant.Start, maxGrant.Step),
				})
			}
		}
		if i == 0 || g.Token > maxGrant.Token {
			maxGrant = g
		}
	}
	return vs
}
