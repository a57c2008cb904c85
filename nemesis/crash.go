// Crash and restart: a process dies — power loss, kernel panic, OOM kill —
// and later boots again from what its disk kept.
//
// Inside the fault model: crashes of any node at any instant, losing the
// process's memory, its timers and the messages in flight to it, and
// either losing every write not yet synced (mode "lose", the default) or
// tearing the last unsynced write so that a strict prefix of its bytes
// survives durably (mode "torn": power failed halfway through the write).
// Synced writes always survive. Restarts of a crashed node, by name or as
// every crashed node at once (Crashed).
//
// Outside the fault model: corruption of synced data, lost fsyncs (a Sync
// that returned but did not persist), misdirected writes, and tearing of
// anything but the very last unsynced write. A torn write is inside the
// model only for processes that can tell a torn record from a whole one
// (checksums, length prefixes): a process that trusts every byte it reads
// back is expected to fail under it, which is why the generator tears only
// when TornProbability is set.
package nemesis

import (
	"fmt"
	"time"
)

// Crash modes.
const (
	// CrashLose drops every unsynced write (the default when Mode is "").
	CrashLose = "lose"
	// CrashTorn keeps a prefix of the last unsynced write: Keep of its bytes.
	CrashTorn = "torn"
)

var crashSpec = kindSpec{
	kind: Crash,
	// A Duration restarts the node that long after the crash.
	fields: fNode | fMode | fKeep | fDuration | fTrigger,
	check: func(op Op) error {
		switch op.Mode {
		case "", CrashLose:
			if op.Keep != 0 {
				return fmt.Errorf("keep only applies with mode %q", CrashTorn)
			}
		case CrashTorn:
			if !(op.Keep >= 0 && op.Keep < 1) {
				return fmt.Errorf("keep %v must lie in [0, 1): the fraction of the torn write's bytes that survive", op.Keep)
			}
		default:
			return fmt.Errorf("unknown mode %q (use %q or %q)", op.Mode, CrashLose, CrashTorn)
		}
		return nil
	},
}

var restartSpec = kindSpec{
	kind:   Restart,
	fields: fNode,
	check:  func(Op) error { return nil },
}

// crash draws one crash of a target and its restart d later. A crash of
// the leader restarts whatever is crashed then, since which node led is
// known only when the crash fires.
func (g *generator) crash(at, d time.Duration) {
	node, ok := g.target(g.o.Crash.Targets)
	if !ok {
		return
	}
	op := Op{At: Duration(at), Kind: Crash, Node: node}
	if g.r.Float64() < g.o.TornProbability {
		op.Mode, op.Keep = CrashTorn, float64(g.r.IntN(100))/100
	}
	g.add(op)
	restart := node
	if node == Leader {
		restart = Crashed
	}
	g.add(Op{At: Duration(at + d), Kind: Restart, Node: restart})
}
