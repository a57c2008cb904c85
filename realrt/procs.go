package realrt

import (
	"os"
	"runtime"
	"sync"
)

// A goroutine blocked in fsync keeps its P — its right to run Go code —
// until the runtime's monitor thread takes it back, and there is no way
// to tell the runtime that a system call will block (golang/go#29734).
// A busy node spends much of its time in fsync: its disk's writer (and
// its executor, in a Sync). On a small machine, the goroutines that would
// handle peers' messages and clients' requests then wait for a P while the
// CPU is idle: a three-replica cluster in one process on this project's
// 2-core machine ran 20–35 % more cycles/s with GOMAXPROCS raised by one
// or more (nodesvc's BenchmarkCycles, per-worker at 64 workers).
//
// So a node holds one P of its own while it runs: Start raises GOMAXPROCS
// by one, Close lowers it again, and once no node runs the process's
// GOMAXPROCS is what it was before the first — the runtime's own default
// again (which follows the machine's and the container's CPU limit) if it
// was that. A GOMAXPROCS environment variable is the operator's choice and
// is left alone.
var procs struct {
	sync.Mutex
	nodes int // nodes holding a P
	base  int // GOMAXPROCS before the first of them
}

// procsFixed: GOMAXPROCS is set in the environment.
var procsFixed = os.Getenv("GOMAXPROCS") != ""

// holdProc gives a starting node its P.
func holdProc() {
	if procsFixed {
		return
	}
	procs.Lock()
	defer procs.Unlock()
	if procs.nodes == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.nodes++
	runtime.GOMAXPROCS(procs.base + procs.nodes)
}

// releaseProc takes back a closed node's P.
func releaseProc() {
	if procsFixed {
		return
	}
	procs.Lock()
	defer procs.Unlock()
	procs.nodes--
	if procs.nodes > 0 {
		runtime.GOMAXPROCS(procs.base + procs.nodes)
		return
	}
	// Setting GOMAXPROCS turned off the runtime's default; back to it,
	// unless the program had set another value before the first node.
	runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) != procs.base {
		runtime.GOMAXPROCS(procs.base)
	}
}
