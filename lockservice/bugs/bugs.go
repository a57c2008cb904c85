// Package bugs names the planted bugs: their names, what each plants
// and the design each lives in — data only, so that a plan naming a
// mutant (package scenario) is checked without linking the bugs' code
// (package mutants, which injects them into the components).
package bugs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencesim/fencesim/lockservice"
)

// The planted bugs. Each reproduces a failure class real lock services have
// shipped, and is nothing but values for the reference's injection points
// (reference/variant.go): package mutants says which, and its Inject*
// put them in a component's config. The reference's files never name a mutant.
const (
	// MutAckBeforeCommit: the leader answers a grant as soon as it has
	// proposed the entry, predicting the outcome from its applied table,
	// before the entry commits.
	MutAckBeforeCommit lockservice.Mutant = "ack-before-commit"
	// MutClientNoDriftMargin: the client's watchdog measures the lease from
	// the reply instead of the request start, and leaves out ρ and the
	// margin.
	MutClientNoDriftMargin lockservice.Mutant = "client-no-drift-margin"
	// MutExpiryWallclock: the leader times leases by its wall clock (a
	// wall deadline checked every tick) instead of its monotonic clock.
	MutExpiryWallclock lockservice.Mutant = "expiry-wallclock"
	// MutNoRetryDedup: acquires are not deduplicated: a duplicated or
	// retried copy is applied again.
	MutNoRetryDedup lockservice.Mutant = "no-retry-dedup"
	// MutQuorumOffByOne: Raft's majority is computed as n/2.
	MutQuorumOffByOne lockservice.Mutant = "quorum-off-by-one"
	// MutReleaseNoOwnerCheck: a release ends whatever lease holds the
	// resource, whoever asks and with whatever token.
	MutReleaseNoOwnerCheck lockservice.Mutant = "release-no-owner-check"
	// MutRenewAfterExpiry: a renewal of a lease that has expired succeeds
	// (and revives it if the resource is free).
	MutRenewAfterExpiry lockservice.Mutant = "renew-after-expiry"
	// MutSendBeforeSync: a replica sends its votes and append acks before
	// it persists and syncs the term, vote and entries they promise (the
	// order etcd's raft README warns about): a crash during the sync takes
	// back what another replica already counted.
	MutSendBeforeSync lockservice.Mutant = "send-before-sync"
	// MutStaleLeaderGrants: the leader decides a grant from its local
	// applied state when it proposes, and applying the entry on that leader
	// grants it whatever the replicated state says by then (a decision the
	// log does not carry: the other replicas apply the entry as the log
	// says).
	MutStaleLeaderGrants lockservice.Mutant = "stale-leader-grants"
	// MutStoreFenceStrictGT: the store accepts only tokens strictly above
	// the highest, so the holder's second write is rejected.
	MutStoreFenceStrictGT lockservice.Mutant = "store-fence-strict-gt"
	// MutStoreFenceVolatile: the store's highest token per resource is
	// kept in memory only and is lost when the store crashes.
	MutStoreFenceVolatile lockservice.Mutant = "store-fence-volatile"
	// MutStoreNoFence: the store ignores tokens.
	MutStoreNoFence lockservice.Mutant = "store-no-fence"
	// MutToken32Bit: the store keeps tokens in 32 bits (an unsigned
	// 32-bit column, a uint32 field): it compares them truncated, so once
	// the service's tokens pass 2^32 a new holder's token reads as lower
	// than its predecessors' and the fence turns backwards. Only a run
	// whose tokens cross 2^32 (or a multiple of it) can show it: the swarm
	// draws token offsets near 2^32, 2^53 and 2^63.
	MutToken32Bit lockservice.Mutant = "token-32bit"
	// MutTokenLocalCounter: the leader stamps each acquire with a token
	// from its own in-memory counter instead of the log index.
	MutTokenLocalCounter lockservice.Mutant = "token-local-counter"
	// MutTokenReuseOnReacquire: a free → held transition reuses the
	// resource's last token instead of issuing a new one.
	MutTokenReuseOnReacquire lockservice.Mutant = "token-reuse-on-reacquire"
	// MutTokenUnsynced: term, vote, log (the token counter) and the single
	// node's state are written but not synced before the replies that
	// depend on them.
	MutTokenUnsynced lockservice.Mutant = "token-unsynced"
	// MutTokenWallclock: the token is the leader's wall clock in
	// milliseconds, stamped when it proposes.
	MutTokenWallclock lockservice.Mutant = "token-wallclock"
	// MutWaitSkipsLeaseCheck: a client that has queued (been answered
	// busy) for a full TTL is granted the lock: the leader deems the
	// holder's lease over without checking that it ended, and proposes its
	// expiry ahead of the acquire.
	MutWaitSkipsLeaseCheck lockservice.Mutant = "wait-skips-lease-check"
	// MutLockdForgetsRequest: lockd as the live runner found it — an
	// acquire's request id is remembered only while its lease is held, so
	// a copy of the request that runs late (queued in a paused instance
	// while its client retried on another, was granted and released) is
	// granted a second time, with a new token. Planted in the lockd design.
	MutLockdForgetsRequest lockservice.Mutant = "lockd-forgets-request"
	// MutLockdAOFEverySec: lockd's Redis syncs its append-only file once a
	// second (appendfsync everysec, Redis's default with appendonly yes)
	// instead of before every reply: a Redis crash loses grants already
	// acknowledged, and the fence tokens they carried are issued again —
	// what lockd's durability check warns of. Planted in the lockd design.
	MutLockdAOFEverySec lockservice.Mutant = "lockd-aof-everysec"
	// MutBusyFromLocalTable: fencesim-node's front end as the live runner
	// found it — an acquire is answered busy from the node's own applied
	// lock table, without a proposal, when that table shows the resource
	// held under another attempt: on a follower, or on a leader that has
	// not applied the release yet, the table is stale, and a free lock is
	// answered busy.
	MutBusyFromLocalTable lockservice.Mutant = "busy-from-local-table"
	// MutRequestIDNotInLog: fencesim-node's front end as the live runner
	// found it — an acquire's request id never reaches the log: only the
	// node that answered a grant remembers it, so the client's retry at
	// another node (its answer lost) is a fresh acquire there, granted a
	// second time with a new token once the first grant has ended.
	MutRequestIDNotInLog lockservice.Mutant = "request-id-not-in-log"
)

// designOf names the design a planted bug lives in, for the bugs that are
// not the reference's: a run of such a mutant runs that design
// (Design).
var designOf = map[lockservice.Mutant]string{
	MutLockdForgetsRequest: "lockd",
	MutLockdAOFEverySec:    "lockd",
}

// Design returns the design m is planted in, or "" for the reference's
// bugs (which every design built on the reference's components takes).
func Design(m lockservice.Mutant) string { return designOf[m] }

// mutants is the catalogue, sorted by name.
var mutants = []MutantInfo{
	{MutAckBeforeCommit, "the leader answers a grant before the entry commits (predicted from its applied table)"},
	{MutBusyFromLocalTable, "the node's front end answers busy from its own applied table (stale on a follower) instead of the log"},
	{MutClientNoDriftMargin, "the client watchdog ignores ρ and the margin and measures the lease from the reply, not the request start"},
	{MutExpiryWallclock, "the leader expires leases by its wall clock instead of its monotonic clock"},
	{MutLockdAOFEverySec, "lockd: Redis syncs its AOF once a second, so a Redis crash forgets acknowledged grants and reissues their tokens"},
	{MutLockdForgetsRequest, "lockd: a request id is forgotten with its lease, so a late copy of a granted and released acquire is granted again"},
	{MutNoRetryDedup, "a duplicated or retried acquire is applied twice"},
	{MutQuorumOffByOne, "Raft's majority is computed as n/2"},
	{MutReleaseNoOwnerCheck, "release ends whatever lease holds the resource, whoever asks"},
	{MutRenewAfterExpiry, "renewing an expired lease succeeds (and revives it)"},
	{MutRequestIDNotInLog, "an acquire's request id never reaches the log, so a retry at another node is granted again"},
	{MutSendBeforeSync, "a replica sends votes and append acks before it syncs the state they promise"},
	{MutStaleLeaderGrants, "the leader decides grants from its local state, not through the log"},
	{MutStoreFenceStrictGT, "the store rejects the holder's second write with the same token (token > highest)"},
	{MutStoreFenceVolatile, "the store's highest token is not synced and is lost when the store crashes"},
	{MutStoreNoFence, "the store ignores tokens"},
	{MutToken32Bit, "the store compares tokens truncated to 32 bits"},
	{MutTokenLocalCounter, "each replica counts tokens itself instead of using the log index"},
	{MutTokenReuseOnReacquire, "a free → held transition reuses the resource's last token"},
	{MutTokenUnsynced, "term, vote, log and the single node's counter are not synced before the replies that depend on them"},
	{MutTokenWallclock, "token = the leader's wall clock in ms"},
	{MutWaitSkipsLeaseCheck, "a client queued for a TTL is granted without checking that the holder's lease ended"},
}

// MutantInfo describes one planted bug.
type MutantInfo struct {
	Name        lockservice.Mutant
	Description string
}

// Mutants lists every planted bug, sorted by name.
func Mutants() []MutantInfo {
	out := slices.Clone(mutants)
	slices.SortFunc(out, func(a, b MutantInfo) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// ParseMutant checks a mutant name ("" is the reference).
func ParseMutant(s string) (lockservice.Mutant, error) {
	if s == "" {
		return "", nil
	}
	for _, m := range mutants {
		if string(m.Name) == s {
			return m.Name, nil
		}
	}
	var names []string
	for _, m := range Mutants() {
		names = append(names, string(m.Name))
	}
	return "", fmt.Errorf("lockservice: unknown mutant %q (known: %s)", s, strings.Join(names, ", "))
}
