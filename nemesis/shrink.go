package nemesis

// Minimize reduces s to a smaller schedule for which fails still holds,
// by delta debugging (Zeller's ddmin): it tries removing chunks of
// operations, halving the chunk size when nothing can go, down to single
// operations. fails must be deterministic (a simulation run from the same
// seed); it is called O(n log n) times in the usual case, at most O(n²).
// The result keeps the operations' order; fails(s) must hold on entry.
func Minimize(s Schedule, fails func(Schedule) bool) Schedule {
	cur := s.Sorted()
	chunk := (len(cur) + 1) / 2
	for chunk >= 1 && len(cur) > 0 {
		removed := false
		for start := 0; start < len(cur); {
			end := min(start+chunk, len(cur))
			cand := append(append(Schedule{}, cur[:start]...), cur[end:]...)
			if fails(cand) {
				cur, removed = cand, true
				continue // the same start now holds the next chunk
			}
			start = end
		}
		if !removed {
			chunk /= 2
		}
	}
	return cur
}
