package sim

import "github.com/fencesim/fencesim/process"

// Mix is process.Mix, kept under this name for the simulator's own hashing and
// for callers written before the contract moved to package process.
func Mix(h, w uint64) uint64 { return process.Mix(h, w) }

// HashString is process.HashString, kept under this name for the same reason
// as Mix.
func HashString(s string) uint64 { return process.HashString(s) }
