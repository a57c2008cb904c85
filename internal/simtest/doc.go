// Package simtest holds the helpers of the lock service's process-level
// tests: a small sim.World, a probe node that sends and records messages,
// a recorder of the observer's events, and a parser of the trace's log
// lines. Tests only.
package simtest
