package reference

import (
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// The injection points: the decisions of the reference that a variant of
// the service may replace. Each is a field of a config (or of TableRules)
// whose zero value is the reference's own behaviour, so the reference code
// reads as the correct protocol with one call where a decision is made; the
// planted bugs of lockservice/mutants are nothing but values for these fields. A
// stateful value (a token counter, a timer set) belongs to one process:
// build the config per process, as the designs do at every boot.

// TableRules are the lock table's replaceable decisions (LockTable.Rules).
// The zero value is the reference.
type TableRules struct {
	// Replays reports whether a request of kind that the table still
	// remembers is answered from memory (and a late copy of a forgotten one
	// refused as stale) rather than applied again. nil: every kind.
	Replays func(kind CommandKind) bool
	// Issue returns the token a free → held grant of resource issues, given
	// the fresh one offered. nil: the offered token.
	Issue func(resource string, offered uint64) uint64
	// Lapsed is told of every lease that expires; Revive returns a lapsed
	// lease that a renewal of a lease no longer held brings back. nil: none
	// is remembered, none revived.
	Lapsed func(l Lease)
	Revive func(r lockservice.RenewRequest) (Lease, bool)
	// RenewLate lets a renewal restart a lease past its deadline. false:
	// refused (the holder must acquire again).
	RenewLate bool
	// ReleaseCheck decides a release of the current lease l: Released, or
	// the status it is refused with. nil: the holder's own token and a
	// request no older than the one that granted l (releaseCheck).
	ReleaseCheck func(l Lease, r lockservice.ReleaseRequest) lockservice.Status
	// Broken is told of a broken invariant (a token that does not
	// increase). nil: panic — a bug in the reference; a variant that breaks
	// it on purpose lets the run go on so the checker sees the damage.
	Broken func(msg string)
}

// releaseCheck is the reference's release rule: only the holder, with its
// grant's token, and not a late copy of a release the holder gave up on
// before it acquired the lease again (its earlier hold's release): applying
// that would end the hold the client now believes in.
func releaseCheck(l Lease, r lockservice.ReleaseRequest) lockservice.Status {
	if l.Token != r.Token || l.Holder != r.Client {
		return lockservice.NotHolder
	}
	if r.Request < l.Request {
		return lockservice.Stale
	}
	return lockservice.Released
}

// TokenSource is where a replicated grant's fencing token comes from. The
// reference (a nil TokenSource) has none: the token is the log index of
// the entry that granted it, which every replica computes alike.
type TokenSource interface {
	// Stamp is the token the leader writes into an acquire it proposes (0:
	// none), read back by Token when the entry applies.
	Stamp(env process.Env) uint64
	// Token is the token of a grant by the entry at index that carries
	// stamp.
	Token(stamp, index uint64) uint64
}

// LeaseTimers time a leader's leases: due runs once the lease of resource
// has run ttl, unless disarmed first. Tick is called at every Raft tick.
// The reference (nil) arms one timer per lease on the monotonic clock.
type LeaseTimers interface {
	Arm(env process.Env, resource string, ttl time.Duration, due func())
	Disarm(resource string)
	Tick(env process.Env)
}

// monotonicTimers is the reference's LeaseTimers. A timer that fired stays
// in the map until the resource is armed again: the replica disarms only
// the leases it still times.
type monotonicTimers map[string]clockwork.Timer

func (m monotonicTimers) Arm(env process.Env, resource string, ttl time.Duration, due func()) {
	m[resource] = env.Clock().AfterFunc(ttl, due)
}

func (m monotonicTimers) Disarm(resource string) {
	if t, ok := m[resource]; ok {
		t.Stop()
		delete(m, resource)
	}
}

func (monotonicTimers) Tick(process.Env) {}

// GrantDecision is who decides an acquire the leader proposes.
type GrantDecision uint8

const (
	// LogDecides: the entry's place in the log decides (the reference).
	LogDecides GrantDecision = iota
	// LeaderGrants: the leader decides the grant itself. The log does not
	// carry the decision: when the entry applies on this process (in the
	// term it was proposed in), it first ends any other client's lease of
	// the resource — on this replica only, silently.
	LeaderGrants
	// LeaderExpires: the leader deems the current holder's lease (in its
	// applied table) over, and proposes its expiry ahead of the acquire.
	LeaderExpires
)

// GrantRule lets the leader decide part of an acquire outside the log. The
// reference has none (nil): the log decides every grant.
type GrantRule interface {
	// Decide is called on the leader with an acquire it is about to
	// propose and its applied table.
	Decide(env process.Env, t *LockTable, c Command) GrantDecision
	// Applied is told, on the leader, of the reply to each acquire applied
	// for the first time.
	Applied(env process.Env, c Command, rep lockservice.LockReply)
	// StepDown is called when the replica stops leading.
	StepDown()
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m { //detlint:sorted
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
