//go:build race

package report

// raceEnabled: the race detector slows porcupine's search down about
// twentyfold, so the random test draws fewer histories under it.
const raceEnabled = true
