package designs

import (
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/designs/shape"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/process"
)

// DesignLockd is seed 000's design: stateless lockd instances over one
// Redis (lockservice/lockdsim).
const DesignLockd = shape.DesignLockd

// lockdDesign runs lockd in the simulator: instances n1…nN and "redis",
// whose AOF is synced before every reply (appendfsync always, as lockd
// requires).
type lockdDesign struct{ shape.Lockd }

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
