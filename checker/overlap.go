package checker

import (
	"cmp"
	"slices"
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
		client int32 // numbered in first-seen order: only equality matters
	}
	clients := make(map[string]int32)
	byResource := make(map[string][]edge)
	for _, b := range h.Beliefs {
		to := b.To
		if b.Open {
			to = h.End
		}
		if to <= b.From {
			continue
		}
		c, ok := clients[b.Client]
		if !ok {
			c = int32(len(clients))
			clients[b.Client] = c
		}
		byResource[b.Resource] = append(byResource[b.Resource],
			edge{at: b.From, start: true, client: c}, edge{at: to, client: c})
	}

	var st OverlapStats
	open := make([]int, len(clients)) // client → its beliefs open now
	for _, r := range sortedKeys(byResource) {
		edges := byResource[r]
		// By instant only: every edge of one instant is applied before
		// the instant is judged, so their order within it is irrelevant.
		slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
		clear(open)
		believers := 0          // clients with a belief open now
		var since time.Duration // start of the current window
		for i := 0; i < len(edges); {
			// Apply every edge of one instant before judging it, so that
			// touching beliefs do not overlap and a window that one client
			// leaves as another enters does not split.
			at, before := edges[i].at, believers
			for ; i < len(edges) && edges[i].at == at; i++ {
				e := edges[i]
				if e.start {
					if open[e.client]++; open[e.client] == 1 {
						believers++
					}
				} else if open[e.client]--; open[e.client] == 0 {
					believers--
				}
			}
			switch after := believers; {
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
