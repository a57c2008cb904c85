package designs

import (
	"fmt"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/frontend"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/lockservice/redlock"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// Names of the built-in designs.
const (
	DesignReplicated = "replicated"
	DesignSingleNode = "single-node"
	DesignLeaseOnly  = "lease-only"
	DesignRedlock    = redlock.Name
)

// BuiltinDesigns returns the designs shipped with the harness: the
// reference and its contrasts.
func BuiltinDesigns() []lockservice.Design {
	return []lockservice.Design{
		replicatedDesign{name: DesignReplicated,
			description: "the reference: a lock state machine replicated over Raft, fencing token = the granting entry's log index, fenced store"},
		singleNodeDesign{},
		replicatedDesign{name: DesignLeaseOnly, unfenced: true,
			description: "contrast: the reference service, but the store ignores tokens — leases alone protect it"},
		redlock.RedlockDesign{},
		lockdDesign{},
	}
}

// replicatedDesign is the reference service, and lease-only: the same
// service with a store that does not fence.
type replicatedDesign struct {
	name, description string
	unfenced          bool
}

func (d replicatedDesign) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: d.name, Description: d.description, UnfencedStore: d.unfenced, Leader: true}
}

func (d replicatedDesign) Nodes(replicas int) ([]string, error) {
	if replicas != 3 && replicas != 5 {
		return nil, fmt.Errorf("replicas must be 3 or 5 for the %s design, got %d", d.name, replicas)
	}
	return lockservice.NumberedNodes(replicas), nil
}

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
	cfg.GroupCommit = run.GroupCommit
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
type singleNodeDesign struct{}

func (singleNodeDesign) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: DesignSingleNode, SyncedDecisions: true,
		Description: "contrast: one lock server that syncs every decision; nobody gets a lock while it is down"}
}

func (singleNodeDesign) Nodes(replicas int) ([]string, error) {
	if replicas != 0 {
		return nil, fmt.Errorf("replicas is only for the replicated design")
	}
	return []string{"lock"}, nil
}

func (singleNodeDesign) NewServer(_ int, run lockservice.DesignRun) process.Process {
	cfg := reference.ServerConfig{Limits: run.Limits, Observer: run.Observer}
	mutants.InjectServer(run.Mutant, &cfg)
	return reference.NewServer(cfg)
}

// ClientProtocol is nil: the reference's own messages.
func (singleNodeDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return nil
}
