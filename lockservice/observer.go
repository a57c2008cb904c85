package lockservice

// EventKind says what an observed event is.
type EventKind uint8

const (
	// EvGranted: the service granted Resource to Client with Token (a
	// decision of the service itself, the first time it is applied). A
	// service that knows which of the client's requests the grant answers
	// sets Request (or RequestID, the acquire's key), and the checker holds
	// it to granting each request at most once (S11).
	EvGranted EventKind = iota + 1
	// EvRenewed: the service restarted the lease of Token.
	EvRenewed
	// EvEnded: the service ended the grant Token; Reason is "released" or
	// "expired".
	EvEnded
	// EvApplied: the store decided a write (an entry of its apply log).
	EvApplied
	// EvCall: a client sent Op; Request pairs it with its EvReturn.
	EvCall
	// EvReturn: a client received the answer to Op.
	EvReturn
	// EvBeliefEnd: a client stopped believing it holds Token (its watchdog
	// fired, the lock was lost, or it sent its release); Reason says which.
	// Its belief starts at the EvReturn of a granted acquire.
	EvBeliefEnd
	// EvEntryApplied: replica Node applied the committed log entry at Index,
	// of Term, whose encoded command has digest Digest (CommandDigest). A
	// replicated service reports every entry it applies, a new leader's
	// empty entry included, and again after a restart replays its log, so
	// that the checker can compare what each replica applied at each index
	// (S10).
	EvEntryApplied
	// EvElected: replica Node became the leader of Term (S9), reported
	// once per term it wins: a second report of a term by one replica (a
	// restart leading the term again) is a violation.
	EvElected
	// EvVoted: replica Node persisted a vote for another replica in Term
	// (synced, unless its sync is slow and still in flight). A moment for the nemesis's
	// triggers, not a fact the checker judges.
	EvVoted
	// EvAppended: follower Node persisted log entries a leader sent, up
	// to Index (as EvVoted, a moment for the nemesis).
	EvAppended
)

var eventKindNames = [...]string{EvGranted: "granted", EvRenewed: "renewed", EvEnded: "ended", EvApplied: "applied",
	EvCall: "call", EvReturn: "return", EvBeliefEnd: "belief-end", EvEntryApplied: "entry-applied", EvElected: "elected",
	EvVoted: "voted", EvAppended: "appended"}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "event?"
}

// Op names a client operation.
type Op uint8

const (
	OpAcquire Op = iota + 1
	OpRenew
	OpRelease
	OpWrite
	OpRead
)

var opNames = [...]string{OpAcquire: "acquire", OpRenew: "renew", OpRelease: "release", OpWrite: "write", OpRead: "read"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op?"
}

// Event is one observation. Only the fields its kind uses are set.
type Event struct {
	Kind     EventKind
	Op       Op // EvCall, EvReturn
	Client   string
	Resource string
	Request  uint64 // EvCall, EvReturn: the client's request id; EvGranted: the acquire granted (0: not said)
	Token    uint64
	Value    int64  // writes: the value written; reads: the value read
	Status   Status // EvReturn of a lock operation
	Accepted bool   // EvApplied; EvReturn of a write
	Reason   string // EvEnded, EvBeliefEnd
	// RequestID is, for EvEnded by a release, the release's RequestID
	// (ReleaseRequest.RequestID; empty in the simulator); for EvGranted,
	// the acquire's key (AcquireRequest.Key: the client's own name for the
	// attempt, which a front end may submit under several request numbers),
	// if it has one.
	RequestID string
	// Node is the replica reporting EvEntryApplied or EvElected. For a
	// design with SyncedDecisions, the harness also stamps the service node
	// that reported an event here (see DesignInfo.SyncedDecisions).
	Node string
	// Index is the log index of the entry whose apply this event reports:
	// EvEntryApplied, and a replicated service's EvGranted and EvEnded, so
	// that the several replicas' reports of one decision are told apart
	// from two decisions with the same token. 0 for a service without a
	// log.
	Index uint64
	// Term is the entry's term (EvEntryApplied) or the term won
	// (EvElected).
	Term uint64
	// Digest identifies the entry's command (EvEntryApplied).
	Digest uint64
}

// Observer receives what the simulator's checker needs from the service,
// the store and the clients. Processes call it at the instant something
// happens; the harness stamps each event with true time and step, which the
// processes themselves cannot see. Records come from each component's own
// decisions (the service's grants, the store's apply log), not from what
// another component believes. One method taking a struct keeps the
// interface stable as observations are added.
type Observer interface {
	Observe(Event)
}

// NopObserver ignores everything; for unit tests and real deployments.
type NopObserver struct{}

// Observe does nothing.
func (NopObserver) Observe(Event) {}
