package designs

import (
	"fmt"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/process"
)

// DesignLockd is seed 000's design: stateless lockd instances over one
// Redis (lockservice/lockdsim).
const DesignLockd = "lockd"

// lockdDesign runs lockd in the simulator: instances n1…nN and "redis",
// whose AOF is synced before every reply (appendfsync always, as lockd
// requires).
type lockdDesign struct{}

func (lockdDesign) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: DesignLockd, SyncedDecisions: true, ResourceTokens: true, WallClockLeases: true, BackEnds: 1,
		Description: "seed 000's lockd: stateless instances running Lua scripts on one Redis (AOF fsync always), token = a per-resource counter in Redis"}
}

// Nodes names the instances n1…nN (replicas, 1 to 9; 0: 2) and "redis".
func (lockdDesign) Nodes(replicas int) ([]string, error) {
	if replicas == 0 {
		replicas = 2
	}
	if replicas < 1 || replicas > 9 {
		return nil, fmt.Errorf("replicas (the number of lockd instances) must be 1 to 9 for the lockd design, got %d", replicas)
	}
	return append(lockservice.NumberedNodes(replicas), "redis"), nil
}

// NewServer returns instance i, or the Redis process (the last node).
func (lockdDesign) NewServer(i int, run lockservice.DesignRun) process.Process {
	redis := run.Servers[len(run.Servers)-1]
	if i == len(run.Servers)-1 {
		cfg := lockdsim.RedisConfig{Watch: lockdsim.Watcher(lockdsim.Prefix, run.Observer)}
		mutants.InjectRedis(run.Mutant, &cfg)
		return lockdsim.NewRedis(cfg)
	}
	cfg := lockdsim.InstanceConfig{Redis: redis, Prefix: lockdsim.Prefix, Limits: run.Limits, Marks: run.Marks}
	mutants.InjectLockd(run.Mutant, &cfg)
	return lockdsim.NewInstance(cfg)
}

// ClientProtocol is lockdsim.Protocol: renewals name their TTL.
func (lockdDesign) ClientProtocol(lockservice.ClientConfig, lockservice.DesignRun) lockservice.Protocol {
	return &lockdsim.Protocol{}
}
