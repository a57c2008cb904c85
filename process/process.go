// Package process is the contract between a process and the runtime it runs
// in: a Process reacts to messages and timers and touches the world only
// through its Env — its own clock, its disk, the network, a random stream
// and a logger.
//
// The contract is a leaf: it imports nothing of fencesim, so the same
// service and client code can run inside the simulator (package sim, on
// virtual time with fault controls in reach of the harness only) and for
// real (a real clock, a file-backed disk, a transport), without a fork.
// Nothing here can inject a fault: clock drift, wall jumps, dropped timers,
// torn writes and crashes are the runtime's business, never the process's.
package process

import (
	"log/slog"
	"math/rand/v2"
)

// NodeID names a node of a run. Ids are dense small integers handed out in
// the order nodes are added, so they index slices rather than maps.
type NodeID int

// Message is anything a process sends. Fingerprint folds the message's
// content into the run's trace hash, so two runs that send different
// messages at the same instants get different hashes. Implementations mix
// whole 64-bit words with Mix and strings with HashString; they must not
// allocate.
type Message interface {
	Fingerprint() uint64
}

// A Process reacts to messages and timers; it never blocks and never starts
// goroutines. Start runs at boot and after every restart, with only what the
// process had synced to its disk. The runtime calls Start, Receive and the
// process's timer callbacks one at a time, so a process needs no locks.
type Process interface {
	Start(env Env)
	Receive(env Env, from NodeID, msg Message)
}

// Batcher is a Process that wants to hear when the runtime has run a batch
// of queued events (the real runtime runs what queued up while the last
// batch ran), to do once what each event would otherwise do alone: one
// append and one fsync for many proposals. The simulator calls it when
// the node's next event is not another delivery or timer at the same
// instant.
type Batcher interface {
	EndBatch(env Env)
}

// Env is everything a process may touch. It deliberately has no true time:
// a process knows only its own clock, as a real one would.
type Env interface {
	// ID is the node this process runs on.
	ID() NodeID
	// Name is the node's human-readable name (used in logs and traces).
	Name() string
	// Clock is the node's own clock: monotonic and wall readings, and
	// AfterFunc timers whose callbacks the runtime serializes with the
	// process's other events.
	Clock() Clock
	// Send puts msg on the network towards to. Delivery is not guaranteed.
	Send(to NodeID, msg Message)
	// Disk is the node's durable storage; it survives crashes, but only
	// what was synced.
	Disk() Disk
	// Rand is the node's own random stream, seeded from the run's root seed
	// when the node was added. It continues across restarts.
	Rand() *rand.Rand
	// Log is a structured logger. In the simulator its records carry the
	// step, the node and the virtual time, never the machine's wall clock.
	Log() *slog.Logger
}
