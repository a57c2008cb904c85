package lockservice

// The planted bugs. Each is a guarded branch in the reference code path
// (grep for its constant), switched on by configuration; every component of
// a run gets the same Mutant and acts on the ones that concern it. Each
// reproduces a failure class real lock services have shipped.
const (
	// MutAckBeforeCommit: the leader answers a grant as soon as it has
	// proposed the entry, predicting the outcome from its applied table,
	// before the entry commits.
	MutAckBeforeCommit Mutant = "ack-before-commit"
	// MutClientNoDriftMargin: the client's watchdog measures the lease from
	// the reply instead of the request start, and leaves out ρ and the
	// margin.
	MutClientNoDriftMargin Mutant = "client-no-drift-margin"
	// MutExpiryWallclock: the leader times leases by its wall clock (a
	// wall deadline checked every tick) instead of its monotonic clock.
	MutExpiryWallclock Mutant = "expiry-wallclock"
	// MutNoRetryDedup: acquires are not deduplicated: a duplicated or
	// retried copy is applied again.
	MutNoRetryDedup Mutant = "no-retry-dedup"
	// MutQuorumOffByOne: Raft's majority is computed as n/2.
	MutQuorumOffByOne Mutant = "quorum-off-by-one"
	// MutReleaseNoOwnerCheck: a release ends whatever lease holds the
	// resource, whoever asks and with whatever token.
	MutReleaseNoOwnerCheck Mutant = "release-no-owner-check"
	// MutRenewAfterExpiry: a renewal of a lease that has expired succeeds
	// (and revives it if the resource is free).
	MutRenewAfterExpiry Mutant = "renew-after-expiry"
	// MutStaleLeaderGrants: the leader decides a grant from its local
	// applied state when it proposes, and the entry grants whatever the
	// replicated state says when it applies.
	MutStaleLeaderGrants Mutant = "stale-leader-grants"
	// MutStoreFenceStrictGT: the store accepts only tokens strictly above
	// the highest, so the holder's second write is rejected.
	MutStoreFenceStrictGT Mutant = "store-fence-strict-gt"
	// MutStoreFenceVolatile: the store's highest token per resource is
	// kept in memory only and is lost when the store crashes.
	MutStoreFenceVolatile Mutant = "store-fence-volatile"
	// MutStoreNoFence: the store ignores tokens.
	MutStoreNoFence Mutant = "store-no-fence"
	// MutTokenLocalCounter: the leader stamps each acquire with a token
	// from its own in-memory counter instead of the log index.
	MutTokenLocalCounter Mutant = "token-local-counter"
	// MutTokenReuseOnReacquire: a free → held transition reuses the
	// resource's last token instead of issuing a new one.
	MutTokenReuseOnReacquire Mutant = "token-reuse-on-reacquire"
	// MutTokenUnsynced: term, vote, log (the token counter) and the single
	// node's state are written but not synced before the replies that
	// depend on them.
	MutTokenUnsynced Mutant = "token-unsynced"
	// MutTokenWallclock: the token is the leader's wall clock in
	// milliseconds, stamped when it proposes.
	MutTokenWallclock Mutant = "token-wallclock"
	// MutWaitSkipsLeaseCheck: a client that has queued (been answered
	// busy) for a full TTL is granted the lock, the leader deeming the
	// holder's lease over without checking that it ended.
	MutWaitSkipsLeaseCheck Mutant = "wait-skips-lease-check"
)

// mutants is the catalogue, sorted by name.
var mutants = []MutantInfo{
	{MutAckBeforeCommit, "the leader answers a grant before the entry commits (predicted from its applied table)"},
	{MutClientNoDriftMargin, "the client watchdog ignores ρ and the margin and measures the lease from the reply, not the request start"},
	{MutExpiryWallclock, "the leader expires leases by its wall clock instead of its monotonic clock"},
	{MutNoRetryDedup, "a duplicated or retried acquire is applied twice"},
	{MutQuorumOffByOne, "Raft's majority is computed as n/2"},
	{MutReleaseNoOwnerCheck, "release ends whatever lease holds the resource, whoever asks"},
	{MutRenewAfterExpiry, "renewing an expired lease succeeds (and revives it)"},
	{MutStaleLeaderGrants, "the leader decides grants from its local state, not through the log"},
	{MutStoreFenceStrictGT, "the store rejects the holder's second write with the same token (token > highest)"},
	{MutStoreFenceVolatile, "the store's highest token is not synced and is lost when the store crashes"},
	{MutStoreNoFence, "the store ignores tokens"},
	{MutTokenLocalCounter, "each replica counts tokens itself instead of using the log index"},
	{MutTokenReuseOnReacquire, "a free → held transition reuses the resource's last token"},
	{MutTokenUnsynced, "term, vote, log and the single node's counter are not synced before the replies that depend on them"},
	{MutTokenWallclock, "token = the leader's wall clock in ms"},
	{MutWaitSkipsLeaseCheck, "a client queued for a TTL is granted without checking that the holder's lease ended"},
}
