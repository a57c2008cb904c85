package lockservice

import (
	"fmt"

	"github.com/fencesim/fencesim/process"
)

// Names of the built-in designs.
const (
	DesignReplicated = "replicated"
	DesignSingleNode = "single-node"
	DesignLeaseOnly  = "lease-only"
	DesignRedlock    = "redlock"
)

// BuiltinDesigns returns the designs shipped with the harness: the
// reference and its contrasts.
func BuiltinDesigns() []Design {
	return []Design{
		replicatedDesign{name: DesignReplicated,
			description: "the reference: a lock state machine replicated over Raft, fencing token = the granting entry's log index, fenced store"},
		singleNodeDesign{},
		replicatedDesign{name: DesignLeaseOnly, unfenced: true,
			description: "contrast: the reference service, but the store ignores tokens — leases alone protect it"},
		RedlockDesign{},
	}
}

// replicatedDesign is the reference service, and lease-only: the same
// service with a store that does not fence.
type replicatedDesign struct {
	name, description string
	unfenced          bool
}

func (d replicatedDesign) Info() DesignInfo {
	return DesignInfo{Name: d.name, Description: d.description, UnfencedStore: d.unfenced, Leader: true}
}

func (d replicatedDesign) Nodes(replicas int) ([]string, error) {
	if replicas != 3 && replicas != 5 {
		return nil, fmt.Errorf("replicas must be 3 or 5 for the %s design, got %d", d.name, replicas)
	}
	return numberedNodes(replicas), nil
}

func (d replicatedDesign) NewServer(_ int, run DesignRun) process.Process {
	cfg := DefaultReplicaConfig(run.Servers)
	cfg.Limits, cfg.Observer = run.Limits, run.Observer
	InjectReplica(run.Mutant, &cfg)
	if run.IngressDepth > 0 {
		cfg.IngressDepth = run.IngressDepth
	}
	return NewReplica(cfg)
}

func (replicatedDesign) NewClient(cfg ClientConfig, _ DesignRun) process.Process {
	return NewClient(cfg)
}

// singleNodeDesign is one synced lock server, "lock".
type singleNodeDesign struct{}

func (singleNodeDesign) Info() DesignInfo {
	return DesignInfo{Name: DesignSingleNode, SyncedDecisions: true,
		Description: "contrast: one lock server that syncs every decision; nobody gets a lock while it is down"}
}

func (singleNodeDesign) Nodes(replicas int) ([]string, error) {
	if replicas != 0 {
		return nil, fmt.Errorf("replicas is only for the replicated design")
	}
	return []string{"lock"}, nil
}

func (singleNodeDesign) NewServer(_ int, run DesignRun) process.Process {
	cfg := ServerConfig{Limits: run.Limits, Observer: run.Observer}
	InjectServer(run.Mutant, &cfg)
	return NewServer(cfg)
}

func (singleNodeDesign) NewClient(cfg ClientConfig, _ DesignRun) process.Process {
	return NewClient(cfg)
}

// numberedNodes returns n1…nN.
func numberedNodes(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}
