package designs

import (
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs/shape"
	"github.com/fencesim/fencesim/lockservice/frontend"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/lockservice/redlock"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// Names of the built-in designs (their shapes' names, lockservice/designs/shape).
const (
	DesignReplicated = shape.DesignReplicated
	DesignSingleNode = shape.DesignSingleNode
	DesignLeaseOnly  = shape.DesignLeaseOnly
	DesignRedlock    = shape.DesignRedlock
)

// BuiltinDesigns returns the designs shipped with the harness: the
// reference and its contrasts, in the order of shape.Builtin.
func BuiltinDesigns() []lockservice.Design {
	return []lockservice.Design{
		replicatedDesign{shape.Replicated},
		singleNodeDesign{},
		replicatedDesign{shape.LeaseOnly},
		redlock.RedlockDesign{},
		lockdDesign{},
	}
}

// replicatedDesign is the reference service, and lease-only: the same
// service with a store that does not fence.
type replicatedDesign struct{ shape.Reference }

func (d replicatedDesign) NewServer(_ int, run lockservice.DesignRun) process.Process {
	cfg := reference.DefaultReplicaConfig(run.Servers)
	cfg.Limits, cfg.Observer = run.Limits, run.Observer
	cfg.Marks, cfg.TokenOffset = run.Marks, run.TokenOffset
	mutants.InjectReplica(run.Mutant, &cfg)
	if run.IngressDepth > 0 {
		cfg.IngressDepth = run.IngressDepth
	}
	if run.SnapshotEntries > 0 || run.SnapshotBytes > 0 {
		// A run's small thresholds: a short catch-up tail, and segments
		// small enough to be dropped after every snapshot or two.
		cfg.SnapshotEntries, cfg.SnapshotBytes = run.SnapshotEntries, run.SnapshotBytes
		cfg.SnapshotKeep, cfg.SegmentEntries = run.SnapshotEntries/4, 4
	}
	cfg.GroupCommit, cfg.GroupCommitWindow = run.GroupCommit, run.GroupCommitWindow
	cfg.AsyncWrites = run.AsyncWrites
	if b := run.Buggify; b.ElectionTicks > 0 {
		cfg.ElectionTick, cfg.HeartbeatTick = b.ElectionTicks, b.HeartbeatTicks
	}
	cfg.MaxAppendEntries, cfg.MaxInflight = run.Buggify.AppendEntries, run.Buggify.Inflight
	// Clients reach the replica through the node's front end, as they
	// reach fencesim-node's over HTTP (nodesvc runs the same front end).
	fc := frontend.Config{LeaderWait: SimLeaderWait, Marks: run.Marks}
	mutants.InjectFrontEnd(run.Mutant, &fc)
	return frontend.NewNode(cfg, fc)
}

// SimLeaderWait is how long the simulated nodes' front ends hold a request
// while no leader is known (frontend.Config.LeaderWait): below the
// simulated clients' request timeout (50 ms), so the held request is
// answered before its client gives up on it (fencesim-node holds 250 ms,
// below its clients' HTTP timeouts).
const SimLeaderWait = 40 * time.Millisecond

// ClientProtocol is nil: the reference's own messages.
func (replicatedDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return nil
}

// singleNodeDesign is one synced lock server, "lock".
type singleNodeDesign struct{ shape.SingleNode }

func (singleNodeDesign) NewServer(_ int, run lockservice.DesignRun) process.Process {
	cfg := reference.ServerConfig{Limits: run.Limits, Observer: run.Observer}
	mutants.InjectServer(run.Mutant, &cfg)
	return reference.NewServer(cfg)
}

// ClientProtocol is nil: the reference's own messages.
func (singleNodeDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return nil
}
