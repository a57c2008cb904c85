// Triggers: faults aimed at protocol moments. A random fault lands at a
// random instant, and the instants a protocol is fragile at — the holder
// just granted, a vote just cast, a leader that just granted — are a few
// milliseconds in a run of seconds, so random faults hit them a few seeds
// per hundred. A trigger is a fault armed at At that fires at the first
// moment of its kind (When) the run reports within Within, After later,
// aimed at the node the moment is about (Subject) or at any node or role.
//
// Inside the fault model: the kinds that can be aimed (pause, crash, with a
// Duration its downtime; isolate, with a Duration how long it lasts; jump)
// fired at any moment the run reports, including a crash right after a
// replica persisted a vote or an append (after its sync; with a slow disk
// on, the sync is still in flight and the crash takes it back).
//
// Outside the fault model: a crash inside a handler, between two of its
// writes, that no slow sync leaves room for: the simulator runs a handler
// at one instant. A trigger is data like every fault: the run stays a
// function of its seed and schedule, replay files carry it, the shrinker
// drops it like any operation, and the trace names the node it hit.
package nemesis

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// MomentKind names a protocol moment a run reports to its Watch.
type MomentKind string

// The moments. The subject of each is the node it is about.
const (
	// MomentGranted: the service decided a grant (subject: the client it
	// granted, who does not know yet).
	MomentGranted MomentKind = "granted"
	// MomentAcquired: a client learned of its grant (subject: the client).
	MomentAcquired MomentKind = "acquired"
	// MomentWrite: a client sent a fenced write to the store (subject: the
	// client).
	MomentWrite MomentKind = "write"
	// MomentRead: a client sent a read to the store, the workload's last
	// step before it releases (subject: the client).
	MomentRead MomentKind = "read"
	// MomentRenewed: a client learned its lease was renewed (subject: the
	// client).
	MomentRenewed MomentKind = "renewed"
	// MomentElected: a replica won an election (subject: the replica).
	MomentElected MomentKind = "elected"
	// MomentVoted: a replica persisted a vote for another replica's
	// candidacy (subject: the voter).
	MomentVoted MomentKind = "voted"
	// MomentAppended: a follower persisted log entries its leader sent
	// (subject: the follower).
	MomentAppended MomentKind = "appended"
)

var moments = []MomentKind{MomentGranted, MomentAcquired, MomentWrite, MomentRead, MomentRenewed, MomentElected, MomentVoted, MomentAppended}

// Subject is the selector of a trigger's node: the node its moment is
// about (the client granted, the replica that voted).
const Subject = "@subject"

// Moment is one protocol moment of a run, as the run reports it.
type Moment struct {
	Kind MomentKind
	// Subject is the name of the node the moment is about.
	Subject string
}

// checkTrigger reports what is wrong with op's trigger fields.
func (op Op) checkTrigger() error {
	if op.When == "" {
		if op.Within != 0 || op.After != 0 {
			return errors.New("within and after only apply to a trigger: say when it fires, e.g. \"when\": \"acquired\"")
		}
		return nil
	}
	switch {
	case !slices.Contains(moments, op.When):
		return fmt.Errorf("unknown moment %q (known: %v)", op.When, moments)
	case op.Within <= 0:
		return errors.New("a trigger needs within: how long after at it stays armed, e.g. \"2s\"")
	case op.After < 0:
		return fmt.Errorf("after %v is negative", time.Duration(op.After))
	case op.At > math.MaxInt64-op.Within-op.After-op.Duration:
		return errors.New("at + within + after + duration overflows: arm the trigger sooner")
	}
	return nil
}

// latest is the last instant a trigger can fire (At for a timed fault).
func (op Op) latest() time.Duration {
	return time.Duration(op.At + op.Within + op.After)
}

// The aimed faults the generator can draw (Options.Aims): each is one or a
// few operations, mostly triggers, that tell one story at its moment.
const (
	// AimPauseHolder pauses a client right after it learned of its grant,
	// or a little later, just before its write, or just before its release,
	// for half a TTL to four, or (half of the time) just past its lease.
	AimPauseHolder = "pause-holder"
	// AimCrashVoter crashes the leader (forcing an election) and then a
	// replica right after it persisted a vote, with a slow disk on the
	// replicas two times in three (the crash then lands before the sync
	// completes), and two times in three cuts the election's winner off as
	// it takes over (the voter then campaigns in the term it voted in).
	AimCrashVoter = "crash-voter"
	// AimCrashAppender crashes a follower right after it persisted an
	// append, before or after its sync completes (as for AimCrashVoter);
	// half of the crashes that land while the sync is in flight tear the
	// last write (a log append when the commit did not move), so that a
	// restart finds a torn log tail (replica.log-tail-cut).
	AimCrashAppender = "crash-appender"
	// AimCrashMajority crashes a majority of the replicas at once, right
	// after a grant.
	AimCrashMajority = "crash-majority"
	// AimLostReply cuts a client off right after the service granted it,
	// for longer than its lease: the grant's reply is lost.
	AimLostReply = "lost-reply"
	// AimJump steps the wall clock of the leader or of a client just
	// granted by one to four TTLs, either way.
	AimJump = "jump"
	// AimStorePaused pauses a holder past its lease and crashes the store
	// while it is paused, after the next holder could have written.
	AimStorePaused = "store-paused"
	// AimIsolateLeader isolates the leader right after it granted.
	AimIsolateLeader = "isolate-leader"
	// AimCrashRecovering crashes a replica on a slow disk, tearing its last
	// write, and crashes it again, torn, 1–30 ms after it restarted: while
	// its recovery (cutting a torn log tail, deleting what a snapshot
	// covers) is being synced. A machine can fail while it recovers; the
	// guided search found a replica that lost synced entries that way
	// (docs/guided-search.md). It is not drawn by DrawOptions (which keeps
	// its draws, and so every seed's schedule, as they were) but by
	// DrawRecoveryAim, from a stream of the caller's.
	AimCrashRecovering = "crash-recovering"
	// AimMinorityTail leaves entries on a minority and changes the term
	// over them: right after a follower persisted an append, the leader
	// is cut off (so the entries it has sent reach no more followers and
	// no acknowledgement reaches it: they stay uncommitted on the leader
	// and that follower), and two times in three the follower too, so
	// the majority elects a leader without them and commits other
	// entries at those indexes; the follower, healed, must drop its tail
	// for them (raft.log-truncated). The other times the follower stays
	// in, and may win the election with its longer log, taking over with
	// an uncommitted tail (raft.leader-uncommitted-tail). Drawn by
	// RaftStrikes, on top of a generated schedule.
	AimMinorityTail = "minority-tail"
	// AimStaleAppend holds the leader's appends back and lets newer ones
	// overtake them: messages are reordered (held up to half a TTL)
	// and, half of the time, duplicated, and the leader is
	// paused a moment later, so that a new leader is elected while the
	// old leader's appends are still in flight and they arrive after the
	// new leader's (raft.append-stale-term, raft.append-duplicate,
	// raft.append-behind-commit); when the old leader wakes, it sends
	// appends of a term that ended. Drawn by RaftStrikes.
	AimStaleAppend = "stale-append"
)

// drawnAims are the aims DrawOptions draws from; aims are all it knows.
var (
	drawnAims = []string{AimPauseHolder, AimCrashVoter, AimCrashAppender, AimCrashMajority, AimLostReply, AimJump, AimStorePaused, AimIsolateLeader}
	raftAims  = []string{AimMinorityTail, AimStaleAppend}
	// raftStrikeAims are the aims RaftStrikes draws from: the two above
	// and the crashes at a vote and at an append, which Generate draws
	// only among its other aims (since fencesim-0.18 StoryStrikes also
	// crashes a voter, sharply, in most seeds). With them
	// send-before-sync was caught sooner (a mean of 14.3 → 12.2 seeds,
	// the longest 54 → 36, over 50 windows of 300 swarm seeds), the other
	// hard mutants as before.
	raftStrikeAims = []string{AimMinorityTail, AimStaleAppend, AimCrashAppender, AimCrashVoter}
	aims           = slices.Concat(drawnAims, []string{AimCrashRecovering}, raftAims)
)

// storyAims are the aims StoryStrikes draws from, each twice but the
// jump: each is the story one of the swarm's hardest mutants needs
// (store-fence-volatile, send-before-sync, renew-after-expiry,
// expiry-wallclock), and the jump catches its mutant most often once told.
var storyAims = []string{AimStorePaused, AimStorePaused, AimJump, AimCrashVoter, AimCrashVoter, AimPauseHolder, AimPauseHolder}

// StoryStrikes draws, for every seed, three strikes of the story aims
// (storyAims), each in its sharpest variant, at points of the safety
// phase, on top of a generated schedule:
//   - store-paused: the store crashes under a holder paused past its
//     lease, after the next holder could have written;
//   - jump: the leader's wall clock steps forward by 1–4.5 TTLs right after
//     it granted (a client's, as it learns of its grant, in a design
//     without a leader);
//   - crash-voter: the leader crashes, then a replica right after it
//     persisted its vote, on a slow disk (the sync is still in flight),
//     and the election's winner is cut off as it takes over;
//   - pause-holder: a holder is paused as it learns of its grant and wakes
//     just past its lease, when its renewer sends at once.
//
// In the mix (Generate) each story is one of up to eight aims, drawn in
// some seeds only, and in its sharp variant a sixth (the paused holder),
// two ninths (the crash at a vote) or four ninths (the jump) of the time:
// over swarm seeds 1..1000 at fencesim-0.17 the marks of the first three
// were reached in 19–24 % of the seeds, and the four mutants were caught
// in 8.5–12 % of them. With the crash at a vote and the paused holder
// twice in the pool, one or two strikes a seed caught them in 16–20 %
// and two in 16–25 %; with the store crash twice as well, two in 17–22 %,
// three in 20–27 % and four in 22–32 %: three, so that the rest of the
// mix still tells its own.
// Live, where only the clients' moments are seen, a crash-voter strike's
// triggers (at a vote, at an election) are not applicable (package live
// counts them so); its crash of the leader and its slow disks run.
// Like RaftStrikes, they come from a stream of their own, so that every
// other draw of a seed stays as it was. Every operation ends within the
// safety phase; a strike that would not is not drawn. A cluster draws
// among the stories it can tell: no crash at a vote without a leader, no
// store crash without a store.
func StoryStrikes(r *rand.Rand, c Cluster, safety time.Duration) Schedule {
	if safety <= 0 || len(c.Clients) == 0 {
		return nil
	}
	pool := slices.DeleteFunc(slices.Clone(storyAims), func(a string) bool {
		return !c.LeaderSelector && needsLeader(a) || len(c.Store) == 0 && a == AimStorePaused
	})
	g := &generator{r: r, c: c, end: safety, sharp: true}
	for range 3 {
		// Every draw is made whatever the room, so that one strike's
		// clipping never moves another's draws.
		g.o.Aims = []string{pool[r.IntN(len(pool))]}
		g.aimed(time.Duration(r.Int64N(int64(safety))), 0)
	}
	return g.ops.Sorted()
}

// RaftStrikes draws, for one seed in raftStrikeShare (from r), one or two strikes
// of the aims at Raft's moments (raftStrikeAims: a minority tail, a stale
// append, a crash at a vote or at an append), each at
// a point of the safety phase, on top of a generated schedule: for a
// cluster with a leader and at least three servers (a minority to leave
// a tail on). They are extra strikes, not more aims for Generate to pick
// among: that would spread its strikes thinner over the aims it has, and
// the rare moments those reach (a torn log tail, a renewal after expiry)
// would come rarer still. Every operation ends within the safety phase.
//
// The share is kept low on purpose: a Raft strike changes the leader, and
// a new leader restarts the leases it inherits, which leaves fewer
// renewals arriving after an expiry. With strikes in half of the seeds
// (one to three each), the renew-after-expiry mutant took twice the seeds
// to catch (mean 12 → 24.5 over 20 windows of the swarm).
func RaftStrikes(r *rand.Rand, c Cluster, safety time.Duration) Schedule {
	if !c.LeaderSelector || len(c.Servers) < 3 || safety <= 0 || r.IntN(raftStrikeShare) != 0 {
		return nil
	}
	g := &generator{r: r, c: c, end: safety}
	for range 1 + r.IntN(2) {
		// Every draw is made whatever the room, so that one strike's
		// clipping never moves another's draws.
		g.o.Aims = []string{raftStrikeAims[r.IntN(len(raftStrikeAims))]}
		g.aimed(time.Duration(r.Int64N(int64(safety))), 0)
	}
	return g.ops.Sorted()
}

// raftStrikeShare is the share of seeds (one in raftStrikeShare) that
// RaftStrikes strikes in.
const raftStrikeShare = 4

// DrawRecoveryAim adds AimCrashRecovering to o's aims, if aimed faults
// are on and the cluster has servers, with even odds drawn from r.
func DrawRecoveryAim(o *Options, r *rand.Rand, c Cluster) {
	if o.Aimed.Enabled && len(c.Servers) > 0 && !slices.Contains(o.Aims, AimCrashRecovering) && r.IntN(2) == 0 {
		o.Aims = append(o.Aims, AimCrashRecovering)
	}
}

// needsLeader reports whether an aim needs the Leader selector.
func needsLeader(aim string) bool {
	return aim == AimIsolateLeader || aim == AimCrashVoter || slices.Contains(raftAims, aim)
}

// aimed draws one aimed fault among the enabled ones, armed at at. Every
// operation it adds ends within the safety phase; one that could not is
// not drawn.
func (g *generator) aimed(at, _ time.Duration) {
	if len(g.o.Aims) == 0 {
		return
	}
	ttl := g.c.TTL
	if ttl <= 0 {
		ttl = time.Second
	}
	aim := g.o.Aims[g.r.IntN(len(g.o.Aims))]
	within := spread(g.r, ttl/4, 2*ttl)
	var ops Schedule
	trigger := func(when MomentKind, op Op) Op {
		op.At, op.When, op.Within = Duration(at), when, Duration(within)
		return op
	}
	switch aim {
	case AimPauseHolder:
		pause := spread(g.r, ttl/2, 4*ttl)
		if g.sharp || g.r.IntN(2) == 0 {
			// Just past the lease: the stale holder wakes as the next one
			// takes over, and races it.
			pause = ttl + spread(g.r, time.Millisecond, ttl/4)
		}
		op := trigger(MomentAcquired, Op{Kind: Pause, Node: Subject, Duration: Duration(pause)})
		if g.sharp {
			ops = append(ops, op)
			break
		}
		switch g.r.IntN(3) {
		case 1: // just before a write
			op.After = Duration(spread(g.r, time.Millisecond, ttl/10))
		case 2: // just before its release: the read's reply comes in while it is paused
			op.When = MomentRead
		}
		ops = append(ops, op)
	case AimCrashVoter, AimCrashAppender:
		if len(g.c.Servers) == 0 {
			return
		}
		when := MomentAppended
		if aim == AimCrashVoter {
			if !g.c.LeaderSelector {
				return
			}
			when = MomentVoted
			ops = append(ops, Op{At: Duration(at), Kind: Crash, Node: Leader, Duration: Duration(spread(g.r, 10*time.Millisecond, 2*ttl))})
			if g.sharp || g.r.IntN(3) != 0 {
				// Cut the winner off as it takes over, so that the voter,
				// back from its crash, campaigns in the term it voted in.
				ops = append(ops, trigger(MomentElected, Op{Kind: Isolate, Node: Subject, Duration: Duration(spread(g.r, ttl/2, 2*ttl))}))
			}
		}
		crash := trigger(when, Op{Kind: Crash, Node: Subject, Duration: Duration(spread(g.r, 10*time.Millisecond, 2*ttl))})
		if !g.sharp && g.r.IntN(2) == 0 {
			crash.After = Duration(spread(g.r, time.Millisecond, 20*time.Millisecond))
		}
		if g.sharp || g.r.IntN(3) != 0 {
			delay := Duration(spread(g.r, time.Millisecond, 20*time.Millisecond))
			for _, n := range g.c.Servers {
				ops = append(ops, Op{At: Duration(at), Kind: SlowDisk, Node: n, Delay: delay, Duration: Duration(crash.latest() - at)})
			}
			if aim == AimCrashAppender && crash.After == 0 && g.r.IntN(2) == 0 {
				// Power fails halfway through the append whose sync is
				// in flight: the restart must cut the torn tail.
				crash.Mode, crash.Keep = CrashTorn, float64(1+g.r.IntN(98))/100
			}
		}
		ops = append(ops, crash)
	case AimCrashMajority:
		servers := slices.Clone(g.c.Servers)
		if len(servers) == 0 {
			return
		}
		g.r.Shuffle(len(servers), func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
		down := Duration(spread(g.r, 10*time.Millisecond, 2*ttl))
		for _, n := range servers[:len(servers)/2+1] {
			ops = append(ops, trigger(MomentGranted, Op{Kind: Crash, Node: n, Duration: down}))
		}
	case AimLostReply:
		ops = append(ops, trigger(MomentGranted, Op{Kind: Isolate, Node: Subject, Duration: Duration(spread(g.r, ttl, 3*ttl))}))
	case AimJump:
		// Mostly forward and on the leader, right after it granted: the
		// step that would expire a lease early if the leader timed it by
		// its wall clock.
		by := time.Duration(1+g.r.IntN(4))*ttl + spread(g.r, time.Millisecond, ttl/2)
		if !g.sharp && g.r.IntN(3) == 0 {
			by = -by
		}
		when, node := MomentAcquired, Subject
		if g.c.LeaderSelector && (g.sharp || g.r.IntN(3) != 0) {
			when, node = MomentGranted, Leader
		}
		ops = append(ops, trigger(when, Op{Kind: Jump, Node: node, By: Duration(by), Duration: Duration(spread(g.r, ttl, 4*ttl))}))
	case AimStorePaused:
		if len(g.c.Store) == 0 {
			return
		}
		pause := time.Duration(2+g.r.IntN(3))*ttl + spread(g.r, time.Millisecond, ttl)
		down := spread(g.r, 10*time.Millisecond, ttl/4)
		ops = append(ops, trigger(MomentAcquired, Op{Kind: Pause, Node: Subject, Duration: Duration(pause)}))
		crash := trigger(MomentAcquired, Op{Kind: Crash, Node: g.c.Store[0], Duration: Duration(down)})
		crash.After = Duration(pause - down - spread(g.r, time.Millisecond, ttl/2))
		if crash.After <= 0 {
			crash.After = Duration(ttl)
		}
		ops = append(ops, crash)
	case AimCrashRecovering:
		if len(g.c.Servers) == 0 {
			return
		}
		n := g.c.Servers[g.r.IntN(len(g.c.Servers))]
		down := spread(g.r, 10*time.Millisecond, ttl)
		first := Op{At: Duration(at), Kind: Crash, Node: n, Duration: Duration(down),
			Mode: CrashTorn, Keep: float64(1+g.r.IntN(98)) / 100}
		again := Op{At: Duration(at + down + spread(g.r, time.Millisecond, 30*time.Millisecond)), Kind: Crash, Node: n,
			Duration: Duration(spread(g.r, 10*time.Millisecond, 2*ttl)), Mode: CrashTorn, Keep: float64(1+g.r.IntN(98)) / 100}
		// The disk is slow from before the first crash (so that it finds
		// unsynced writes to tear) until past the second (so that the
		// recovery's sync is in flight when it comes).
		slow := Op{At: Duration(at - min(at, 50*time.Millisecond)), Kind: SlowDisk, Node: n,
			Delay: Duration(spread(g.r, 5*time.Millisecond, 40*time.Millisecond))}
		slow.Duration = again.At + Duration(time.Millisecond) - slow.At
		ops = append(ops, slow, first, again)
	case AimMinorityTail:
		if !g.c.LeaderSelector || len(g.c.Servers) < 3 {
			return
		}
		ops = append(ops, trigger(MomentAppended, Op{Kind: Isolate, Node: Leader, Duration: Duration(spread(g.r, ttl/2, 2*ttl))}))
		if g.r.IntN(3) != 0 {
			ops = append(ops, trigger(MomentAppended, Op{Kind: Isolate, Node: Subject, Duration: Duration(spread(g.r, ttl/2, 2*ttl))}))
		}
	case AimStaleAppend:
		if !g.c.LeaderSelector {
			return
		}
		window := spread(g.r, ttl/2, 2*ttl)
		ops = append(ops, Op{At: Duration(at), Kind: Reorder, Probability: float64(30+g.r.IntN(61)) / 100,
			Delay: Duration(spread(g.r, 10*time.Millisecond, ttl/2)), Duration: Duration(window)})
		if g.r.IntN(2) == 0 {
			ops = append(ops, Op{At: Duration(at), Kind: Duplicate, Probability: float64(10+g.r.IntN(41)) / 100, Duration: Duration(window)})
		}
		// Paused once appends are held back, and for long enough that the
		// others elect a new leader (an election timeout is well under a
		// TTL), but woken inside the window.
		pauseAt := at + spread(g.r, time.Millisecond, 20*time.Millisecond)
		ops = append(ops, Op{At: Duration(pauseAt), Kind: Pause, Node: Leader, Duration: Duration(spread(g.r, ttl/4, max(ttl/4, at+window-pauseAt)))})
	case AimIsolateLeader:
		if !g.c.LeaderSelector {
			return
		}
		ops = append(ops, trigger(MomentGranted, Op{Kind: Isolate, Node: Leader, Duration: Duration(spread(g.r, ttl/2, 3*ttl))}))
	}
	for _, op := range ops {
		if op.latest()+time.Duration(op.Duration) > g.end {
			return // it would outlast the safety phase
		}
	}
	g.ops = append(g.ops, ops...)
}
