package scenarios

import (
	"testing"

	"github.com/fencesim/fencesim/coverage"
)

// coverageSeeds are the swarm seeds the coverage floors are measured on.
const coverageSeeds = 60

// swarmFloor holds each mark to a minimum number of the swarm's seeds
// 1..coverageSeeds hitting it: about half of what was measured (in the
// comment), at least one, so that a change of the swarm's draws does not
// flap the test while a corner the search stops reaching fails it.
var swarmFloor = map[coverage.Mark]int{
	coverage.RaftVoteSplit:               5,  // 11
	coverage.RaftElectionLost:            2,  // 5
	coverage.RaftVoteLeaseIgnored:        16, // 32
	coverage.RaftAppendGap:               50, // 60
	coverage.RaftLogTruncated:            20, // 40
	coverage.RaftCommitEarlierTerm:       26, // 52
	coverage.RaftAppendStaleTerm:         8,  // 16
	coverage.RaftAppendBehindCommit:      50, // 60
	coverage.RaftAppendDuplicate:         50, // 60
	coverage.RaftLeaderUncommittedTail:   26, // 52
	coverage.RaftCheckQuorumStepDown:     19, // 38
	coverage.RaftLogCompacted:            30, // 60 (every run draws snapshot thresholds)
	coverage.RaftSnapshotSent:            14, // 28
	coverage.RaftSnapshotRestored:        13, // 26
	coverage.RaftSnapshotStale:           6,  // 7 at fencesim-0.20, 17 before (272 of swarm seeds 1..2000, 263 before)
	coverage.RaftInflightFull:            11, // 23 (a third of the seeds draw small caps or tight timings, half of them caps)
	coverage.RaftAppendCapped:            7,  // 14 (the default cap of 64 entries: 26 of 2,000 seeds)
	coverage.ReplicaRestartReplay:        19, // 38
	coverage.ReplicaNewLeaderLeases:      25, // 50
	coverage.ReplicaStepDownPending:      16, // 33
	coverage.ReplicaShed:                 6,  // 12 (a quarter of the seeds draw an ingress bound of 1..3)
	coverage.ReplicaGroupCommit:          12, // 24 (half of the seeds draw group commit)
	coverage.ReplicaGroupCommitWindow:    6,  // 13 (half of those draw a window)
	coverage.ReplicaSyncOverlapped:       7,  // 15 (half of the seeds draw asynchronous writes; it takes a slow disk)
	coverage.ReplicaHolderFirst:          6,  // 13 (a renewal or release past a drawn ingress bound, fencesim-0.16)
	coverage.ReplicaDuplicateEntry:       15, // 30
	coverage.ReplicaSnapshotTaken:        30, // 60
	coverage.ReplicaRestartFromSnapshot:  16, // 32
	coverage.ReplicaSnapshotSegmentsLeft: 2,  // 5
	coverage.ReplicaLogTailCut:           3,  // 9 at fencesim-0.16, 3 at 0.17 (the crash-recovering aim, fencesim-0.13: 128 of 2,000 seeds, 21 before; 95 of 2,000 at 0.17, whose idle clients make fewer writes to tear)
	coverage.ReplicaHandOver:             30, // 60 (the swarm's clients wait: fencesim-0.15)
	coverage.LockRenewAfterExpiry:        8,  // 17
	coverage.LockReleaseAfterRegrant:     5,  // 10
	coverage.TokenCross2p31:              8,  // 16
	coverage.TokenCross2p32:              7,  // 14
	coverage.TokenCross2p53:              5,  // 11
	coverage.TokenCross2p63:              3,  // 7
	coverage.StoreFenced:                 4,  // 8 at fencesim-0.15, 19 before (455 of swarm seeds 1..2000: 1..60 is a lean window)
	coverage.StoreReplayedWrite:          12, // 24
	coverage.StoreLateCopy:               2,  // 5
	coverage.FrontendDedupHit:            28, // 57
	coverage.FrontendRetryOtherNode:      30, // 60
	coverage.FrontendUnknownOutcome:      16, // 33
	coverage.FrontendResubmitted:         12, // 24
	coverage.FrontendReleaseReplayed:     15, // 31
	coverage.ClientAcquireAcrossLeaders:  28, // 57
	coverage.ClientGrantPastTTL:          20, // 41
	coverage.ClientWatchdogFired:         15, // 30
	coverage.ClientReleaseRefused:        21, // 43
	coverage.CrashAfterVoteUnsynced:      7,  // 14
	coverage.CrashAfterVoteSynced:        8,  // 17
	coverage.CrashAfterAppendUnsynced:    6,  // 13
	coverage.CrashAfterAppendSynced:      17, // 34
	coverage.CrashAfterSnapshot:          3,  // 6
	coverage.CrashMajority:               13, // 26
	coverage.CrashLeader:                 17, // 34
	coverage.StoreCrashHolderPaused:      4,  // 5 at fencesim-0.15, 12 before (450 of swarm seeds 1..2000, as before: 1..60 is a lean window)
	coverage.PauseHolder:                 14, // 29
	coverage.WallJumpLeader:              4,  // 9
	coverage.WallJumpClient:              2,  // 5
	coverage.PartitionLeader:             19, // 38
}

// byScenario names, for each mark the swarm does not reach today, the
// built-in scenario that hits it on every one of seeds 1..3 (none now:
// replica.shed, once only overload-burst's, is reached by the swarm's
// drawn ingress bound).
var byScenario = map[coverage.Mark]string{
	// lockd's marks: the reference's swarm does not run lockd.
	coverage.LockdRequestRemembered: "lockd-paused-instance",
	// The wait queue: hundreds of hand-overs per lockd-swarm seed, and a
	// few acquires meeting a free lock kept for the head (seeds 1..3).
	coverage.LockdQueueHandOver: "lockd-swarm",
}

// byUnitTest names, for each mark the swarm cannot reach, the unit test
// that does. replica.log-term-cut (a restart finds log entries of a term
// past its persisted hard state's) needs a disk the simulator does not
// model: a replica writes its entries, then the hard state carrying their
// term, and syncs both at once, and a crash keeps only synced writes plus
// a prefix of the last one (the hard state), so entries never outlive
// their term's hard state; only the token-unsynced mutant, which never
// syncs, leaves such a log behind.
//
// replica.snapshot-torn needs a crash while the snapshot's write is the
// last one in flight under a slow sync, which the swarm's crashes rarely
// meet; the unit test crashes replicas that snapshot every five entries
// under slow syncs, torn, many times. replica.snapshot-log-mismatch (a
// follower crashed between installing a leader's snapshot and deleting
// its old log) cannot happen in the simulator, which syncs both in one
// event; the unit test plants the disk such a crash leaves.
var byUnitTest = map[coverage.Mark]string{
	coverage.FrontendHandoverWaiters:    "lockservice/frontend TestHandoverWithWaiters", // no fault hands the lead over
	coverage.ReplicaLogTermCut:          "lockservice/reference TestReplicaCutsEntriesPastItsTerm",
	coverage.ReplicaSnapshotTorn:        "lockservice/reference TestReplicaSnapshotsUnderCrashes",
	coverage.ReplicaHandOverRefused:     "lockservice/reference TestWaitQueueHandOverRefusedWhenTheReleaseFails", // 1 of swarm seeds 1..60
	coverage.ReplicaSnapshotLogMismatch: "lockservice/reference TestReplicaDropsALogThatDoesNotContinueItsSnapshot",
	// 123 of swarm seeds 1..2000 at fencesim-0.20 (125 before), but one
	// of 1..60 since half of the seeds sync in the background.
	coverage.RaftSnapshotFastForward: "lockservice/raft TestInteraction (snapshot_races.txt)",
	// 20 of swarm seeds 1..2000: a write completing for entries a new
	// leader replaced meanwhile, which needs a slow disk and a truncation.
	coverage.RaftPersistedReplaced: "lockservice/raft TestAsyncPersistedIgnoresReplacedEntries",
}

// uncovered are the marks neither the swarm on seeds 1..coverageSeeds
// reaches reliably nor a built-in scenario.
// The faults aimed at protocol moments (issue 15, item 2) now reach the
// crashes right after a vote or an append, the majority crash, the store
// crash under a paused holder and the leader's wall jump, which moved to
// swarmFloor. raft.append-conflict is hit by one or two of the 60 seeds,
// too few for a floor; client.renew-refused needs a renewal, and the
// swarm's holds (about 45 ms) end before the first one (at a third of the
// TTL).
var uncovered = []coverage.Mark{
	coverage.RaftAppendConflict, coverage.ClientRenewRefused,
	// An expiry proposed as the holder renewed: 24 of swarm seeds 1..2000
	// at fencesim-0.13 (28 before its aim at a crash during recovery took
	// a share of the aimed faults), 0 of 1..60 — too few for a floor.
	coverage.LockExpireRaced,
	// lockd-swarm reaches it on 14 of seeds 1..60 since its instances
	// wait in lockd's queue (2 before): a copy of a request granted on one
	// instance while another settles it as held.
	coverage.LockdHeldSettled,
	// Every simulated client sends its request id as the acquire's key
	// (fencesim-0.12), and a holder's acquire under a new key is busy,
	// decided in the log: the unkeyed re-grant this marks is left to
	// clients without request ids, which no built-in scenario runs.
	coverage.LockHolderReacquired,
	// A lock kept free for a queue head that could not be handed it (its
	// request answered already): 36 of lockd-swarm seeds 1..1500, since
	// an acquire that finds the lock free hands it to the head.
	coverage.LockdQueueKeptFree,
}

// TestCoverageMarksAreReached runs the swarm on seeds 1..coverageSeeds and
// holds every mark to its floor, and each scenario of byScenario to hitting
// its mark on every seed. Every mark must be in exactly one of swarmFloor,
// byScenario and uncovered, so a new mark cannot go unwatched.
func TestCoverageMarksAreReached(t *testing.T) {
	where := map[coverage.Mark]int{}
	for m := range swarmFloor {
		where[m]++
	}
	for m := range byScenario {
		where[m]++
	}
	for m := range byUnitTest {
		where[m]++
	}
	for _, m := range uncovered {
		where[m]++
	}
	for _, m := range coverage.All() {
		if where[m] != 1 {
			t.Errorf("mark %s is in %d of swarmFloor, byScenario, byUnitTest and uncovered; put it in exactly one", m, where[m])
		}
	}

	swarm, ok := Lookup("swarm")
	if !ok {
		t.Fatal("no built-in swarm scenario")
	}
	var tally coverage.Tally
	for seed := uint64(1); seed <= coverageSeeds; seed++ {
		res, err := Run(swarm, seed, RunOptions{})
		if err != nil {
			t.Fatalf("swarm seed %d: %v", seed, err)
		}
		tally.Add(res.Marks)
	}
	for _, m := range coverage.All() {
		if floor, ok := swarmFloor[m]; ok && tally.RunsHit(m) < floor {
			t.Errorf("mark %s: %d of swarm seeds 1..%d hit it, want at least %d", m, tally.RunsHit(m), coverageSeeds, floor)
		}
	}
	for m, test := range byUnitTest { //detlint:sorted (independent checks)
		if n := tally.RunsHit(m); n > 0 {
			t.Logf("mark %s, left to %s, is hit by %d of swarm seeds 1..%d: give it a floor in swarmFloor", m, test, n, coverageSeeds)
		}
	}
	for _, m := range uncovered {
		if n := tally.RunsHit(m); n > 0 {
			t.Logf("mark %s, listed as uncovered, is hit by %d of swarm seeds 1..%d: give it a floor in swarmFloor", m, n, coverageSeeds)
		}
	}

	for m, name := range byScenario { //detlint:sorted (independent checks)
		spec, ok := Lookup(name)
		if !ok {
			t.Errorf("mark %s: no built-in scenario %q", m, name)
			continue
		}
		for seed := uint64(1); seed <= 3; seed++ {
			res, err := Run(spec, seed, RunOptions{})
			if err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
			if res.Marks.Get(m) == 0 {
				t.Errorf("mark %s: scenario %s seed %d does not hit it", m, name, seed)
			}
		}
	}
}
