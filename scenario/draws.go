package scenario

import (
	"math/rand/v2"
	"time"

	"github.com/fencesim/fencesim/lockservice"
)

// MaxTokenOffset bounds Spec.TokenOffset: 2^40 tokens of room below 2^64,
// far more than any run's log grows.
const MaxTokenOffset = 1<<64 - 1<<40

// tokenMargin bounds how far below its boundary a drawn offset starts: a
// run's log passes a few dozen entries within its first second, so its
// tokens cross the boundary early and the rest of the run uses tokens on
// both sides of it.
const tokenMargin = 48

// TokenOffsets are the integer boundaries the swarm puts its tokens near:
// 0 (tokens from 1), and just below 2^31 (a signed 32-bit column), 2^32
// (an unsigned 32-bit one), 2^53 (a JSON number read as a double) and
// 2^63 (a signed 64-bit integer).
var TokenOffsets = [...]uint64{0, 1 << 31, 1 << 32, 1 << 53, 1 << 63}

// DrawTokenOffset draws a swarm run's token offset from the seed, from a
// stream of its own so that the fault schedule drawn from the seed is the
// same with or without it: one of TokenOffsets, less 1..tokenMargin.
func DrawTokenOffset(seed uint64) uint64 {
	r := rand.New(rand.NewPCG(seed, 0x544F4B45_4E000000)) // "TOKEN"
	b := TokenOffsets[r.IntN(len(TokenOffsets))]
	m := 1 + r.Uint64N(tokenMargin)
	if b == 0 {
		return 0
	}
	return b - m
}

// swarmShedShare is the share of swarm seeds (one in swarmShedShare) that
// run with a small ingress bound, so that a leader which loses its quorum,
// stalls on a slow sync or meets a burst of retries sheds requests as
// overloaded (replica.shed) and the clients' back-off and retry is
// searched under faults, not only in the overload-burst story.
const swarmShedShare = 4

// DrawIngressDepth draws a swarm run's ingress bound from the seed, from a
// stream of its own (so the fault schedule and the token offset drawn from
// the seed do not move): 0 (the design's default) in most seeds, else 1..3
// requests in flight per replica — fewer than the swarm's five clients.
func DrawIngressDepth(seed uint64) int {
	r := rand.New(rand.NewPCG(seed, 0x494E4752_45535300)) // "INGRESS"
	if r.IntN(swarmShedShare) != 0 {
		return 0
	}
	return 1 + r.IntN(3)
}

// snapshotEntries and snapshotBytes are the thresholds runs draw: small,
// so that a run of a few seconds snapshots many times, and drops log
// segments, and a follower that lags or restarts is caught up by snapshot;
// not so small that snapshotting (the whole table, on every replica) costs
// most of a run.
var (
	snapshotEntries = [...]uint64{4, 8, 16, 32, 64, 128, 256}
	snapshotBytes   = [...]uint64{512, 2048, 8192}
)

// DrawSnapshot draws a run's snapshot thresholds from the seed, from a
// stream of its own (so that nothing else drawn from the seed moves): in
// three seeds of four a threshold of entries, in the fourth one of bytes.
func DrawSnapshot(seed uint64) (entries, bytes uint64) {
	r := rand.New(rand.NewPCG(seed, 0x534E4150_53484F54)) // "SNAPSHOT"
	if r.IntN(4) == 0 {
		return 0, snapshotBytes[r.IntN(len(snapshotBytes))]
	}
	return snapshotEntries[r.IntN(len(snapshotEntries))], 0
}

// drawGroupCommit draws whether a swarm run's service commits in groups,
// as the real runtime runs it (Spec.GroupCommit), from a stream of its
// own (so nothing else drawn from the seed moves): half of the seeds.
func drawGroupCommit(seed uint64) bool {
	r := rand.New(rand.NewPCG(seed, 0x47524F55_50000000)) // "GROUP"
	return r.IntN(2) == 0
}

// drawAsyncWrites draws whether a swarm run's replicas sync in the
// background, as the real node's do (Spec.AsyncWrites), from a stream of
// its own (so nothing else drawn from the seed moves): half of the seeds.
func drawAsyncWrites(seed uint64) bool {
	r := rand.New(rand.NewPCG(seed, 0x4153594E_43575254)) // "ASYNCWRT"
	return r.IntN(2) == 0
}

// DrawGroupCommitWindow draws a swarm run's group-commit window from the
// seed, from a stream of its own (so nothing else drawn from the seed
// moves): none for half of the seeds, else 1 to 5 ms (Spec.
// GroupCommitWindow; it takes effect only with group commit on).
func DrawGroupCommitWindow(seed uint64) Duration {
	r := rand.New(rand.NewPCG(seed, 0x47435749_4E444F57)) // "GCWINDOW"
	if r.IntN(2) != 0 {
		return 0
	}
	return Duration(time.Duration(1+r.IntN(5)) * time.Millisecond)
}

// thinkShare is the share of swarm seeds (one in thinkShare) that draw
// long think times for some of their clients (DrawThinkTimes).
const thinkShare = 2

// DrawThinkTimes draws a swarm run's think times, one per client of
// clients (in order), from the seed, from a stream of its own (so nothing
// else drawn from the seed moves): nil — every client at the workload's
// 50 ms — in half of the seeds; else each client, with odds of one half
// or of one (drawn per seed), thinks 1 to 4 of its TTLs between cycles,
// the others 0 (the default).
//
// The swarm's clients otherwise contend without a break: a lease that
// lapses goes at once to a waiter in the queue, and a holder that wakes
// from a pause finds its resource taken. Idle contenders make the other
// side common — a lease lapsing on a free resource and its holder's late
// renewal or release arriving there — which real workloads, mostly
// uncontended, meet all the time. The renew-after-expiry mutant needs it:
// caught in 5.7 % of swarm seeds 1..1000 with busy clients, 11–12 % with
// every client thinking 1–4 TTLs in every seed, and 9.0 % with this draw
// (which costs request-id-not-in-log's S7 catches: with every client idle
// in every seed there is too little contention to contradict a double
// grant; S11 sees it anyway).
func DrawThinkTimes(seed uint64, clients []ClientSpec) []Duration {
	r := rand.New(rand.NewPCG(seed, 0x5448494E_4B000000)) // "THINK"
	if r.IntN(thinkShare) != 0 {
		return nil
	}
	all := r.IntN(2) == 0
	out := make([]Duration, len(clients))
	for i, c := range clients {
		sparse, k := r.IntN(2) == 0, 1+r.IntN(4) // both drawn, whatever all is
		if all || sparse {
			out[i] = c.TTL * Duration(k)
		}
	}
	return out
}

// swarmBuggifyShare is the share of swarm seeds (one in swarmBuggifyShare)
// that draw protocol knobs away from the design's defaults (DrawBuggify).
const swarmBuggifyShare = 3

// DrawBuggify draws a swarm run's protocol knobs from the seed, from a
// stream of its own (so nothing else drawn from the seed moves): nil (the
// design's defaults) in most seeds; else, each with even odds, small Raft
// append and in-flight caps (1, 2 or 4 entries; 1 or 2 appends), and an
// election timeout one to three ticks past two heartbeats of one or two
// ticks (the default is 10 and 2; nodesvc's floor is two heartbeats and a
// tick) — at least one of the two. Closer still (3 ticks on heartbeats of
// 2) cost liveness: CheckQuorum leaders stepped down after the heal often
// enough that every new leader's restarted leases kept clients waiting
// past the liveness bound (1 of 2,000 seeds).
func DrawBuggify(seed uint64) *lockservice.Buggify {
	r := rand.New(rand.NewPCG(seed, 0x42554747_49465900)) // "BUGGIFY"
	if r.IntN(swarmBuggifyShare) != 0 {
		return nil
	}
	var b lockservice.Buggify
	caps, timing := r.IntN(2) == 0, r.IntN(2) == 0
	if !caps && !timing {
		caps, timing = r.IntN(2) == 0, true
	}
	if caps {
		b.AppendEntries, b.Inflight = [...]int{1, 2, 4}[r.IntN(3)], 1+r.IntN(2)
	}
	if timing {
		b.HeartbeatTicks = 1 + r.IntN(2)
		b.ElectionTicks = 2*b.HeartbeatTicks + 1 + r.IntN(3)
	}
	return &b
}

// syncDelayShare is the share of swarm seeds (one in syncDelayShare) that
// draw slow disks for the whole run (DrawSyncDelays).
const syncDelayShare = 4

// DrawSyncDelays draws a swarm run's disk sync delays from the seed, from
// a stream of its own (so nothing else drawn from the seed moves): none
// in most seeds; else 1 to 20 ms for the servers' disks, the store's, or
// both, with even odds among the three. The slow-disk fault reaches a
// sync in flight for a stretch of some runs; this makes every sync of a
// run slow, so that a crash, a vote or an answer sent before its sync
// ended is the common case there rather than a rare one.
func DrawSyncDelays(seed uint64) (server, store Duration) {
	r := rand.New(rand.NewPCG(seed, 0x53594E43_444C4159)) // "SYNCDLAY"
	if r.IntN(syncDelayShare) != 0 {
		return 0, 0
	}
	d := func() Duration { return Duration(time.Duration(1+r.IntN(20)) * time.Millisecond) }
	switch r.IntN(3) {
	case 0:
		return d(), 0
	case 1:
		return 0, d()
	}
	return d(), d()
}
