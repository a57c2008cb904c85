// Package reference is fencesim's reference lock service: the lock table
// (grants, leases, renewals, releases, per-client dedup), replicated over
// Raft by Replica (fencing token = the log index of the granting entry,
// commands and log in a compact binary form, the log in synced segments
// on the node's disk), and the single-node Server that syncs every
// decision. It is written against the contract (lockservice, process)
// only, so the same code runs in the simulator and on a real clock and
// disk. The decisions a variant may replace are its injection points
// (variant.go), whose zero values are the reference; it never names a
// planted bug (lockservice/mutants sets them).
package reference
