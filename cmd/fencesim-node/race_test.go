//go:build race

package main

// raceEnabled: the race detector slows every process of the test (the
// nodes are this binary) several times over, so timing bounds are not
// asserted under it.
const raceEnabled = true
