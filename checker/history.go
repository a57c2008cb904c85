// Package checker proves or refutes the safety of a fencesim run after the
// fact, from the records the simulator keeps: the lock service's grants,
// renewals and lease ends, the fenced store's apply log and restarts, and the
// lock and store operations as the clients saw them.
//
// The package stands alone (it imports nothing else from this module) so that
// its verdicts cannot be bent by the code under test. Every function is
// deterministic: identical input gives identical output, except that a
// linearizability check that runs out of its wall-clock budget yields an
// Unknown verdict rather than a Pass.
//
// Each safety property is judged from the records that can refute it, and
// each has a canary test: a history that fails it and no other property.
//
//   - S1 (grants): fencing tokens strictly increase in grant order, across all
//     resources, and no token is issued twice.
//   - S2 (grants): the grant intervals of one resource never overlap in true
//     time.
//   - S3 (applies): per resource, in apply order, no accepted write carries a
//     token below the highest token accepted before it.
//   - S4 (applies and grants): an accepted write with token t comes from the
//     client that was granted t, for the resource t was granted on.
//   - S5 (client acknowledgements against the service's and store's records):
//     every acknowledged operation survives: an acknowledged accepted write
//     is in the store's log and binds every decision and read after a store
//     restart; an acknowledged grant is among the service's grants.
//   - S6 (renewals, lease ends and grants): a renewal or release of token t
//     takes effect only while t is the current grant, and by its holder.
//   - S7 (lock ops): per resource, the lock operations are linearizable
//     against a fenced mutex whose lease may expire at any moment.
//   - S8 (store ops): per resource, the store operations are linearizable
//     against a fenced register.
//   - S9 (elections, replicated services): at most one replica wins the
//     election of a term.
//   - S10 (entry applies, replicated services): every replica that applies
//     the log entry at an index applies the same entry (term and command).
//
// Check judges safety only. CheckLiveness judges progress after a heal and
// Combine merges the two; BeliefOverlap measures, without failing anything,
// how long two clients believed they held the same lock (Check reports it in
// Verdict.Metrics).
//
// CheckLeaseSafety judges L1, lease safety inside the lease fault model: no
// client believes in a grant the service has ended. It holds only while no
// fault outside that model (a client's pause, clock drift beyond the
// bound) was active, so the caller passes those faults' windows; Check does
// not judge it. Its canary is the Kleppmann history with a fenced store,
// which passes S1–S11.
package checker

import (
	"fmt"
	"slices"
	"time"
)

// OpKind is the kind of a store operation; it exists so that a history can
// say whether an operation changed the store or only observed it.
type OpKind uint8

// The kinds of store operation.
const (
	// OpWrite is write(resource, value, token), which the store accepts iff
	// token is at least the highest token it has accepted for resource.
	OpWrite OpKind = iota
	// OpRead returns the current value of a resource and the token of the
	// write that value came from.
	OpRead
)

// String returns "write" or "read", so that details and reports read as
// prose rather than numbers.
func (k OpKind) String() string {
	switch k {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// MarshalText encodes the kind as its String, so that JSON histories stay
// readable and do not depend on the numbering of the constants.
func (k OpKind) MarshalText() ([]byte, error) {
	switch k {
	case OpWrite, OpRead:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("checker: invalid OpKind %d", uint8(k))
}

// UnmarshalText decodes a kind written by MarshalText, so that a saved history
// can be checked again.
func (k *OpKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "write":
		*k = OpWrite
	case "read":
		*k = OpRead
	default:
		return fmt.Errorf("checker: invalid OpKind %q", b)
	}
	return nil
}

// Outcome is what a client learned about one of its store operations; it
// exists because a missing reply is ambiguous and must be checked as such.
type Outcome uint8

// The outcomes of a store operation.
const (
	// OutcomeAccepted means the write was accepted, or the read returned.
	OutcomeAccepted Outcome = iota
	// OutcomeRejected means the store rejected the write because of the
	// fence (its token was below the highest accepted token).
	OutcomeRejected
	// OutcomeUnknown means the client got no reply: the operation may or may
	// not have taken effect, at any time after it was called.
	OutcomeUnknown
)

// String returns "accepted", "rejected" or "unknown", so that details and
// reports read as prose rather than numbers.
func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeRejected:
		return "rejected"
	case OutcomeUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// MarshalText encodes the outcome as its String, so that JSON histories stay
// readable and do not depend on the numbering of the constants.
func (o Outcome) MarshalText() ([]byte, error) {
	switch o {
	case OutcomeAccepted, OutcomeRejected, OutcomeUnknown:
		return []byte(o.String()), nil
	}
	return nil, fmt.Errorf("checker: invalid Outcome %d", uint8(o))
}

// UnmarshalText decodes an outcome written by MarshalText, so that a saved
// history can be checked again.
func (o *Outcome) UnmarshalText(b []byte) error {
	switch string(b) {
	case "accepted":
		*o = OutcomeAccepted
	case "rejected":
		*o = OutcomeRejected
	case "unknown":
		*o = OutcomeUnknown
	default:
		return fmt.Errorf("checker: invalid Outcome %q", b)
	}
	return nil
}

// StoreOp is one client operation on the fenced store as the client saw it;
// S8 checks these against a fenced-register model, so they must record what
// the client observed, not what the store did.
type StoreOp struct {
	// ID identifies the operation; it is unique within a history.
	ID       int    `json:"id"`
	Client   string `json:"client"`
	Resource string `json:"resource"`
	Kind     OpKind `json:"kind"`
	// Token is the fencing token sent with a write.
	Token uint64 `json:"token,omitempty"`
	// Value is the value sent with a write; it is unique per write in a
	// history, so that a read identifies the write it saw.
	Value int64 `json:"value,omitempty"`
	// Call is the true time the client invoked the operation.
	Call time.Duration `json:"call"`
	// Return is the true time the client got the reply; it is ignored when
	// Outcome is OutcomeUnknown.
	Return  time.Duration `json:"return"`
	Outcome Outcome       `json:"outcome"`
	// ReadValue is the value a read returned.
	ReadValue int64 `json:"read_value,omitempty"`
	// ReadToken is the token of the write ReadValue came from (0 if the
	// resource was never written).
	ReadToken uint64 `json:"read_token,omitempty"`
}

// Grant is one grant by the lock service, taken from the service's own records
// rather than from what clients believe, so that S1 and S2 judge what the
// service actually did.
type Grant struct {
	Resource string `json:"resource"`
	Client   string `json:"client"`
	Token    uint64 `json:"token"`
	// Start is the true time the service granted the lease.
	Start time.Duration `json:"start"`
	// End is the true time the service ended the lease (release or expiry);
	// it is meaningless if Open.
	End time.Duration `json:"end"`
	// Open reports that the lease was still held when the run ended.
	Open bool `json:"open"`
	// Step is the simulator step of the grant.
	Step uint64 `json:"step"`
	// Reason says how the grant ended: "released" or "expired"; it is empty
	// while the grant is open.
	Reason string `json:"reason,omitempty"`
	// Request and Key name the client's acquire the grant answers, if the
	// service said: its request number, and the client's own name for the
	// attempt (which a front end may submit under several numbers). S11
	// holds a service to granting each at most once: by Key when it is
	// set, else by Request when that is not 0.
	Request uint64 `json:"request,omitempty"`
	Key     string `json:"key,omitempty"`
	// Lost: a crash took the grant back before it was durable (a
	// single-node server's slow sync never completed), so it was never
	// answered and its token may be issued again; the checker ignores it.
	Lost bool `json:"lost,omitempty"`
}

// StoreApply is one decision of the store, taken from its own apply log; a
// history lists them in apply order, which S3 relies on.
type StoreApply struct {
	Resource string        `json:"resource"`
	Client   string        `json:"client"`
	Token    uint64        `json:"token"`
	Value    int64         `json:"value"`
	Accepted bool          `json:"accepted"`
	At       time.Duration `json:"at"`
	Step     uint64        `json:"step"`
	// Lost: a crash took the decision back before it was durable (its
	// slow sync never completed), so it was never answered and never a
	// fact; the checker ignores it.
	Lost bool `json:"lost,omitempty"`
}

// Election is one replica's win of the election of a term, reported by the
// replica itself, so that S9 sees two leaders of one term even when no
// client notices.
type Election struct {
	Node string        `json:"node"`
	Term uint64        `json:"term"`
	At   time.Duration `json:"at"`
	Step uint64        `json:"step"`
}

// EntryApply is an entry (Term, Command) some replica applied at log index
// Index, as the replicas report it: S10 compares what the replicas applied
// at each index, which a client sees only if it happens to ask the replica
// that diverged. Node, At and Step are the first apply of it; every other
// replica's apply of the same entry at the same index, and a restarted
// replica's replay of it, adds nothing, so that a run keeps one record per
// index rather than one per replica and restart. An apply is a fact once
// made: a committed entry never changes, so nothing a crash does takes it
// back.
type EntryApply struct {
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Command identifies the entry's command: a digest of its encoding, 0
	// for a new leader's empty entry. Kept instead of the command so that a
	// run's every apply on every replica stays small.
	Command uint64        `json:"command"`
	At      time.Duration `json:"at"`
	Step    uint64        `json:"step"`
}

// History is everything the checker needs from one run; keeping the record
// streams separate lets each property be judged from the records that can
// actually refute it.
type History struct {
	Ops     []StoreOp    `json:"ops"`
	Grants  []Grant      `json:"grants"`
	Applies []StoreApply `json:"applies"`
	// LockOps are the clients' lock operations as they saw them (S5, S7,
	// liveness).
	LockOps []LockOp `json:"lock_ops,omitempty"`
	// Renewals are the service's own renewal decisions (S6).
	Renewals []Renewal `json:"renewals,omitempty"`
	// Ends are the service's own lease-end decisions, including any that
	// ended a grant already ended (S6).
	Ends []GrantEnd `json:"ends,omitempty"`
	// Beliefs are the windows in which clients believed they held a lock
	// (the belief-overlap metric).
	Beliefs []Belief `json:"beliefs,omitempty"`
	// StoreRestarts are the instants the fenced store came back from a
	// crash (S5).
	StoreRestarts []StoreRestart `json:"store_restarts,omitempty"`
	// Elections are the replicas' election wins (S9); empty for a service
	// without a leader.
	Elections []Election `json:"elections,omitempty"`
	// EntryApplies are the entries the replicas applied (S10): one record
	// per log index and distinct entry applied there, naming the first
	// replica that applied it; empty for a service without a log.
	EntryApplies []EntryApply `json:"entry_applies,omitempty"`
	// End is the true time the run ended.
	End time.Duration `json:"end"`
}

// facts returns h without the records a crash took back before they were
// durable: decisions nobody was ever told of are not part of the run.
func (h History) facts() History {
	h.Applies = withoutLost(h.Applies, func(a StoreApply) bool { return a.Lost })
	h.Grants = withoutLost(h.Grants, func(g Grant) bool { return g.Lost })
	h.Ends = withoutLost(h.Ends, func(e GrantEnd) bool { return e.Lost })
	return h
}

// withoutLost returns s without its lost records: s itself when none is
// lost (the checks only read it), else a copy.
func withoutLost[E any](s []E, lost func(E) bool) []E {
	if !slices.ContainsFunc(s, lost) {
		return s
	}
	return slices.DeleteFunc(slices.Clone(s), lost)
}
