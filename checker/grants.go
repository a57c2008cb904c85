package checker

import (
	"fmt"
	"slices"
	"strings"
)

// propGrantOverlap is S2: the grants of one resource never overlap in true
// time. Two simultaneous holders is exactly what a lock exists to prevent;
// fencing then becomes the only line of defence.
const propGrantOverlap = "S2"

// endString renders a grant's end for details, naming open grants as such.
func endString(g Grant) string {
	if g.Open {
		return "open"
	}
	return g.End.String()
}

// checkGrantOverlap checks S2. Each grant holds [Start, End), or [Start, +inf)
// if Open, so a grant may start exactly when the previous one ended, and a
// grant with End == Start holds nothing and overlaps nothing (a live run's
// grant derived from what a client saw may be known to exist but not to
// have held at any certain instant). It reports one violation per grant
// that starts before the latest-ending earlier grant of its resource has
// ended, naming that grant.
func checkGrantOverlap(grants []Grant) []Violation {
	// Indices, not copies: a grant is a few hundred bytes.
	byResource := make(map[string][]int32)
	for i := range grants {
		if g := &grants[i]; g.Open || g.End > g.Start {
			byResource[g.Resource] = append(byResource[g.Resource], int32(i))
		}
	}
	resources := sortedKeys(byResource)

	var vs []Violation
	for _, r := range resources {
		gs := byResource[r]
		order := func(a, b int32) int { return grantOrder(grants[a], grants[b]) }
		if !slices.IsSortedFunc(gs, order) {
			slices.SortStableFunc(gs, order)
		}
		var holder Grant // earlier grant that ends last
		for i, k := range gs {
			g := grants[k]
			if i > 0 && (holder.Open || g.Start < holder.End) {
				vs = append(vs, Violation{
					Property: propGrantOverlap,
					At:       g.Start,
					Step:     g.Step,
					Detail: fmt.Sprintf("Resource %q was granted to client %q with token %d at %v (step %d) while client %q still held it with token %d from %v until %s.",
						r, g.Client, g.Token, g.Start, g.Step, holder.Client, holder.Token, holder.Start, endString(holder)),
				})
			}
			if i == 0 || !holder.Open && (g.Open || g.End > holder.End) {
				holder = g
			}
		}
	}
	return vs
}

// sortedKeys returns the keys of m in ascending order, so that iteration over
// a map never leaks its random order into output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
