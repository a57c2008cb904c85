package mutants

import (
	"maps"
	"slices"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/bugs"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/lockservice/frontend"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// The planted bugs, named in the catalogue (package bugs, which says
// what each plants); injections below says which injection points each
// sets.
const (
	MutAckBeforeCommit       = bugs.MutAckBeforeCommit
	MutClientNoDriftMargin   = bugs.MutClientNoDriftMargin
	MutExpiryWallclock       = bugs.MutExpiryWallclock
	MutNoRetryDedup          = bugs.MutNoRetryDedup
	MutQuorumOffByOne        = bugs.MutQuorumOffByOne
	MutReleaseNoOwnerCheck   = bugs.MutReleaseNoOwnerCheck
	MutRenewAfterExpiry      = bugs.MutRenewAfterExpiry
	MutSendBeforeSync        = bugs.MutSendBeforeSync
	MutStaleLeaderGrants     = bugs.MutStaleLeaderGrants
	MutStoreFenceStrictGT    = bugs.MutStoreFenceStrictGT
	MutStoreFenceVolatile    = bugs.MutStoreFenceVolatile
	MutStoreNoFence          = bugs.MutStoreNoFence
	MutToken32Bit            = bugs.MutToken32Bit
	MutTokenLocalCounter     = bugs.MutTokenLocalCounter
	MutTokenReuseOnReacquire = bugs.MutTokenReuseOnReacquire
	MutTokenUnsynced         = bugs.MutTokenUnsynced
	MutTokenWallclock        = bugs.MutTokenWallclock
	MutWaitSkipsLeaseCheck   = bugs.MutWaitSkipsLeaseCheck
	MutLockdForgetsRequest   = bugs.MutLockdForgetsRequest
	MutLockdAOFEverySec      = bugs.MutLockdAOFEverySec
	MutBusyFromLocalTable    = bugs.MutBusyFromLocalTable
	MutRequestIDNotInLog     = bugs.MutRequestIDNotInLog
)

// injection is what one planted bug sets in the configs of the components
// it concerns (nil: that component stays the reference). table is called
// once per lock server process (its rules may keep state), for the
// replicated and the single-node service alike.
type injection struct {
	replica func(*reference.ReplicaConfig)
	server  func(*reference.ServerConfig)
	table   func() reference.TableRules
	store   func(*fencedstore.StoreConfig)
	client  func(*lockservice.ClientConfig)
	lockd   func(*lockdsim.InstanceConfig)
	front   func(*frontend.Config)
	redis   func(*lockdsim.RedisConfig)
}

// injections maps every planted bug to its injections.
var injections = map[lockservice.Mutant]injection{
	MutAckBeforeCommit: {replica: func(c *reference.ReplicaConfig) { c.Predict = predictFromApplied }},
	MutClientNoDriftMargin: {client: func(c *lockservice.ClientConfig) {
		// From the reply, the whole TTL.
		c.Watchdog = func(_, replied, ttl time.Duration) time.Duration { return replied + ttl }
	}},
	MutExpiryWallclock: {
		replica: func(c *reference.ReplicaConfig) { c.LeaseTimers = &wallTimers{due: map[string]wallLease{}} },
		server:  func(c *reference.ServerConfig) { c.LeaseClock = wallNow },
	},
	MutNoRetryDedup: {table: func() reference.TableRules {
		return reference.TableRules{Replays: func(k reference.CommandKind) bool { return k != reference.CmdAcquire }}
	}},
	MutQuorumOffByOne: {replica: func(c *reference.ReplicaConfig) { c.Quorum = func(n int) int { return n / 2 } }},
	MutReleaseNoOwnerCheck: {table: func() reference.TableRules {
		return reference.TableRules{ReleaseCheck: func(reference.Lease, lockservice.ReleaseRequest) lockservice.Status { return lockservice.Released }}
	}},
	MutRenewAfterExpiry:  {table: renewAfterExpiry},
	MutSendBeforeSync:    {replica: func(c *reference.ReplicaConfig) { c.SendBeforeSync = true }},
	MutStaleLeaderGrants: {replica: func(c *reference.ReplicaConfig) { c.Grants = staleLeaderGrants{} }},
	MutStoreFenceStrictGT: {store: func(c *fencedstore.StoreConfig) {
		c.Fence = func(token, highest uint64) bool { return token > highest }
	}},
	MutStoreFenceVolatile: {store: func(c *fencedstore.StoreConfig) { c.FenceInMemory = true }},
	MutStoreNoFence:       {store: func(c *fencedstore.StoreConfig) { c.IgnoreTokens = true }},
	MutToken32Bit: {store: func(c *fencedstore.StoreConfig) {
		c.Fence = func(token, highest uint64) bool { return uint32(token) >= uint32(highest) }
	}},
	MutTokenLocalCounter:     {replica: func(c *reference.ReplicaConfig) { c.Tokens = &localCounter{} }},
	MutTokenReuseOnReacquire: {table: reuseTokens},
	MutTokenUnsynced: {
		replica: func(c *reference.ReplicaConfig) { c.UnsafeNoFsync = true },
		server:  func(c *reference.ServerConfig) { c.UnsafeNoFsync = true },
	},
	MutBusyFromLocalTable:  {front: func(c *frontend.Config) { c.UnsafeBusyFromTable = true }},
	MutRequestIDNotInLog:   {front: func(c *frontend.Config) { c.UnsafeKeyNotInLog = true }},
	MutLockdAOFEverySec:    {redis: func(c *lockdsim.RedisConfig) { c.Fsync = lockdsim.FsyncEverySec }},
	MutLockdForgetsRequest: {lockd: func(c *lockdsim.InstanceConfig) { c.RequestMemory = -1 }},
	MutTokenWallclock:      {replica: func(c *reference.ReplicaConfig) { c.Tokens = wallTokens{} }},
	MutWaitSkipsLeaseCheck: {replica: func(c *reference.ReplicaConfig) { c.Grants = &waitSkipsLeaseCheck{waiting: map[string]time.Duration{}} }},
}

// tableRules are m's lock table rules. Under any planted bug a broken
// token invariant is the checker's to see, not a panic.
func tableRules(m lockservice.Mutant) reference.TableRules {
	var r reference.TableRules
	if inj := injections[m]; inj.table != nil {
		r = inj.table()
	}
	if m != "" {
		r.Broken = func(string) {}
	}
	return r
}

// InjectReplica sets m's injections in the config of one replica process
// (call it per process: some keep state).
func InjectReplica(m lockservice.Mutant, cfg *reference.ReplicaConfig) {
	cfg.Table = tableRules(m)
	if f := injections[m].replica; f != nil {
		f(cfg)
	}
}

// InjectServer sets m's injections in the config of one single-node
// server process.
func InjectServer(m lockservice.Mutant, cfg *reference.ServerConfig) {
	cfg.Table = tableRules(m)
	if f := injections[m].server; f != nil {
		f(cfg)
	}
}

// InjectFrontEnd sets m's injections in the config of one reference
// node's front end.
func InjectFrontEnd(m lockservice.Mutant, cfg *frontend.Config) {
	if f := injections[m].front; f != nil {
		f(cfg)
	}
}

// InjectLockd sets m's injections in the config of one lockd instance.
func InjectLockd(m lockservice.Mutant, cfg *lockdsim.InstanceConfig) {
	if f := injections[m].lockd; f != nil {
		f(cfg)
	}
}

// InjectRedis sets m's injections in the config of lockd's Redis process.
func InjectRedis(m lockservice.Mutant, cfg *lockdsim.RedisConfig) {
	if f := injections[m].redis; f != nil {
		f(cfg)
	}
}

// InjectStore sets m's injections in the fenced store's config.
func InjectStore(m lockservice.Mutant, cfg *fencedstore.StoreConfig) {
	if f := injections[m].store; f != nil {
		f(cfg)
	}
}

// InjectClient sets m's injections in a lock client's config.
func InjectClient(m lockservice.Mutant, cfg *lockservice.ClientConfig) {
	if f := injections[m].client; f != nil {
		f(cfg)
	}
}

// predictFromApplied (MutAckBeforeCommit) answers an acquire as soon as it
// is proposed, predicting the outcome from the leader's applied table.
func predictFromApplied(t *reference.LockTable, c reference.Command, index uint64) (lockservice.LockReply, bool) {
	if l, held := t.Lease(c.Resource); !held {
		return lockservice.LockReply{Request: c.Request, Status: lockservice.Granted, Token: index, TTL: c.TTL}, true
	} else if l.Holder == c.Client {
		return lockservice.LockReply{Request: c.Request, Status: lockservice.Granted, Token: l.Token, TTL: c.TTL}, true
	}
	return lockservice.LockReply{}, false
}

// wallNow (MutExpiryWallclock) dates the single node's leases by its wall
// clock, as a duration since the Unix epoch.
func wallNow(env process.Env) time.Duration { return time.Duration(env.Clock().Now().UnixNano()) }

// wallTimers (MutExpiryWallclock) time the leader's leases by its wall
// clock: a wall deadline per lease, checked at every tick.
type wallTimers struct{ due map[string]wallLease }

type wallLease struct {
	at   time.Time
	fire func()
}

func (w *wallTimers) Arm(env process.Env, resource string, ttl time.Duration, due func()) {
	w.due[resource] = wallLease{at: env.Clock().Now().Add(ttl), fire: due}
}

func (w *wallTimers) Disarm(resource string) { delete(w.due, resource) }

func (w *wallTimers) Tick(env process.Env) {
	now := env.Clock().Now()
	//detlint:sorted keys are sorted before use
	for _, res := range slices.Sorted(maps.Keys(w.due)) {
		if l, ok := w.due[res]; ok && !now.Before(l.at) {
			delete(w.due, res)
			l.fire()
		}
	}
}

// renewAfterExpiry (MutRenewAfterExpiry): a renewal past the deadline
// succeeds, and one of a lease that expired revives it if nobody took the
// resource (each resource's last expired lease is kept in memory).
func renewAfterExpiry() reference.TableRules {
	expired := map[string]reference.Lease{}
	return reference.TableRules{
		RenewLate: true,
		Lapsed:    func(l reference.Lease) { expired[l.Resource] = l },
		Revive: func(r lockservice.RenewRequest) (reference.Lease, bool) {
			e, ok := expired[r.Resource]
			if !ok || e.Token != r.Token || e.Holder != r.Client {
				return reference.Lease{}, false
			}
			delete(expired, r.Resource)
			return e, true
		},
	}
}

// reuseTokens (MutTokenReuseOnReacquire): a free → held transition issues
// the resource's last token again (kept in memory).
func reuseTokens() reference.TableRules {
	lastOf := map[string]uint64{}
	return reference.TableRules{Issue: func(resource string, token uint64) uint64 {
		if last, ok := lastOf[resource]; ok {
			token = last
		}
		lastOf[resource] = token
		return token
	}}
}

// stampedToken is the token of a grant whose leader stamped one (0: the
// log index, as in the reference).
func stampedToken(stamp, index uint64) uint64 {
	if stamp != 0 {
		return stamp
	}
	return index
}

// wallTokens (MutTokenWallclock): the token is the leader's wall clock in
// milliseconds when it proposes.
type wallTokens struct{}

func (wallTokens) Stamp(env process.Env) uint64     { return uint64(env.Clock().Now().UnixMilli()) }
func (wallTokens) Token(stamp, index uint64) uint64 { return stampedToken(stamp, index) }

// localCounter (MutTokenLocalCounter): each replica process counts the
// tokens it hands out, from 1 at every start.
type localCounter struct{ n uint64 }

func (l *localCounter) Stamp(process.Env) uint64       { l.n++; return l.n }
func (*localCounter) Token(stamp, index uint64) uint64 { return stampedToken(stamp, index) }

// staleLeaderGrants (MutStaleLeaderGrants): an acquire of a resource free
// in the leader's applied table is a grant the leader decided; applying it
// on the leader overwrites whatever lease the log gave the resource
// meanwhile, which is never reported ended.
type staleLeaderGrants struct{}

func (staleLeaderGrants) Decide(_ process.Env, t *reference.LockTable, c reference.Command) reference.GrantDecision {
	if _, held := t.Lease(c.Resource); held {
		return reference.LogDecides
	}
	return reference.LeaderGrants
}
func (staleLeaderGrants) Applied(process.Env, reference.Command, lockservice.LockReply) {}
func (staleLeaderGrants) StepDown()                                                     {}

// waitSkipsLeaseCheck (MutWaitSkipsLeaseCheck): a client the leader has
// answered busy for a full TTL is granted, the leader deeming the holder's
// lease over without checking that it ended (LeaderExpires).
type waitSkipsLeaseCheck struct {
	waiting map[string]time.Duration // client+resource → first busy answer, leader only
}

func waitKey(client, resource string) string { return client + "\x00" + resource }

func (w *waitSkipsLeaseCheck) Decide(env process.Env, _ *reference.LockTable, c reference.Command) reference.GrantDecision {
	if since, ok := w.waiting[waitKey(c.Client, c.Resource)]; ok && env.Clock().Monotonic()-since >= c.TTL {
		return reference.LeaderExpires
	}
	return reference.LogDecides
}

func (w *waitSkipsLeaseCheck) Applied(env process.Env, c reference.Command, rep lockservice.LockReply) {
	switch k := waitKey(c.Client, c.Resource); rep.Status {
	case lockservice.Busy:
		if _, ok := w.waiting[k]; !ok {
			w.waiting[k] = env.Clock().Monotonic()
		}
	case lockservice.Granted:
		delete(w.waiting, k)
	}
}

func (w *waitSkipsLeaseCheck) StepDown() { clear(w.waiting) }
