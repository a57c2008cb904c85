package nemesis

import (
	"math/rand/v2"
	"time"
)

// staleEvery is how much of a safety phase each stale-holder pause
// (StaleHolders) stands for, at the least: one per stretch this long.
const staleEvery = 5 * time.Second

// StaleHolders draws the holder pauses that a world running few seeds
// adds to every swarm plan (scenario.World): the failure each lock
// without fencing has and each lock with it must survive — a holder
// paused at its write past its lease, whose write then lands after the
// next holder's. The swarm's own draws reach it in some seeds only (its
// pauses are off in half of them, its aimed ones in a quarter, and those
// it aims mostly end within a lease that a real service may keep longer
// than the TTL it was asked for), which the simulator, at thousands of
// seeds, can afford and a live run, at tens of seconds a seed, cannot.
//
// Each is a trigger on the write moment, aimed at its subject: the first
// client to send a write in its window is paused before the write leaves
// it, for lease (the longest a lease granted for the cluster's TTL lives
// in that world; at least the TTL) and 1½ to 4 TTLs more: time for the
// next client to be granted the lock and to write, even when other
// faults slow it. One for every staleEvery of the safety phase (or
// every lease and five TTLs, if longer: the longest pause and a window
// of a TTL), and at least one, each armed and ended within its own
// stretch of the phase, at a point drawn from r. Only a phase shorter
// than a lease and five TTLs may get none (a pause that does not fit is
// not drawn), and a cluster without clients gets none.
func StaleHolders(r *rand.Rand, c Cluster, safety, lease time.Duration) Schedule {
	if len(c.Clients) == 0 || safety <= 0 {
		return nil
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = time.Second
	}
	held := max(lease, ttl)
	n := max(1, int(safety/max(staleEvery, held+5*ttl)))
	stretch := safety / time.Duration(n)
	var ops Schedule
	for i := range n {
		// Every draw is made whatever the room, so that one stretch's
		// clipping never moves another's draws.
		pause := held + ttl + spread(r, ttl/2, 3*ttl)
		within := spread(r, 2*ttl, 8*ttl)
		slack := r.Int64N(1 << 62)
		room := stretch - pause
		if room < ttl {
			continue
		}
		within = min(within, room)
		at := time.Duration(i)*stretch + time.Duration(slack%(int64(room-within)+1))
		ops = append(ops, Op{At: Duration(at), Kind: Pause, Node: Subject, Duration: Duration(pause),
			When: MomentWrite, Within: Duration(within)})
	}
	return ops
}

// IsStaleHolder reports whether op is one StaleHolders draws: a pause
// aimed at the subject of a write moment, fired on the moment itself,
// for longer than lease (the world's; at least ttl) plus ttl.
func IsStaleHolder(op Op, lease, ttl time.Duration) bool {
	return op.Kind == Pause && op.Node == Subject && op.When == MomentWrite && op.After == 0 &&
		time.Duration(op.Duration) > max(lease, ttl)+ttl
}
