// Package live runs fencesim's scenarios against real processes (simrun
// live): each server and each workload client in its own process group
// and data directory, ready-checked before the run and stopped whatever
// happens; the scenario's seeded fault schedule applied for real (SIGSTOP
// and SIGCONT for pauses, SIGKILL and a restart on the same data for
// crashes, a fault proxy on every directed link for partitions, one-way
// blocks, delay, loss and resets, the services' test endpoints for clock
// and disk faults); the clients' operations, the store's applies and the
// faults on one monotonic time base; and the history checked by the same
// checker as a simulated run.
//
// A live run reproduces its schedule, not its timing: the same seed
// applies the same faults at the same offsets, but the processes'
// interleaving is the machine's.
//
// A target (Target) is a lock service under test; Register adds one.
package live
