package planted

import "time"

// Remaining is pure arithmetic on times it is given: no finding.
func (l Lease) Remaining(now time.Time) time.Duration { return l.Until.Sub(now) }

// Holders ranges over a map only to count: marked, no finding.
func Holders(m map[string]int) int {
	n := 0
	//detlint:sorted only counts
	for range m {
		n++
	}
	return n
}
