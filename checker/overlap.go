package checker

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// OverlapStats measures the windows in which at least two clients believed
// they held the same lock. Every lease lock has such windows (a paused holder
// believes past its lease); fencing is what makes them harmless, so they are
// a measurement, never a failure.
type OverlapStats struct {
	// Windows is the number of maximal intervals, summed over resources,
	// during which two or more distinct clients believed they held the
	// resource.
	Windows int `json:"windows"`
	// Total is the summed length of those intervals.
	Total time.Duration `json:"total"`
	// Longest is the length of the longest one.
	Longest time.Duration `json:"longest"`
}

// BeliefOverlap measures the belief windows of h that overlap in true time.
// A belief holds [From, To), or [From, h.End) if Open, so beliefs that only
// touch do not overlap; a client's own beliefs never overlap each other.
// Check reports the result in Verdict.Metrics.BeliefOverlap.
func BeliefOverlap(h History) OverlapStats {
	type edge struct {
		at     time.Duration
		start  bool
		client string
	}
	byResource := make(map[string][]edge)
	for _, b := range h.Beliefs {
		to := b.To
		if b.Open {
			to = h.End
		}
		if to <= b.From {
			continue
		}
		byResource[b.Resource] = append(byResource[b.Resource],
			edge{at: b.From, start: true, client: b.Client}, edge{at: to, client: b.Client})
	}

	var st OverlapStats
	for _, r := range sortedKeys(byResource) {
		edges := byResource[r]
		slices.SortFunc(edges, func(a, b edge) int {
			return cmp.Or(cmp.Compare(a.at, b.at), compareBool(a.start, b.start), strings.Compare(a.client, b.client))
		})
		believers := make(map[string]int) // client → beliefs open now
		var since time.Duration           // start of the current window
		for i := 0; i < len(edges); {
			// Apply every edge of one instant before judging it, so that
			// touching beliefs do not overlap and a window that one client
			// leaves as another enters does not split.
			at, before := edges[i].at, len(believers)
			for ; i < len(edges) && edges[i].at == at; i++ {
				e := edges[i]
				if e.start {
					believers[e.client]++
				} else if believers[e.client]--; believers[e.client] == 0 {
					delete(believers, e.client)
				}
			}
			switch after := len(believers); {
			case before < 2 && after >= 2:
				since = at
			case before >= 2 && after < 2:
				d := at - since
				st.Windows++
				st.Total += d
				st.Longest = max(st.Longest, d)
			}
		}
	}
	return st
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
