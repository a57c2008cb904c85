package checker

import (
	"fmt"
	"time"
)

// LockKind is the kind of a lock operation.
type LockKind uint8

// The kinds of lock operation.
const (
	// LockAcquire asks for a resource; a grant returns the fencing token.
	LockAcquire LockKind = iota
	// LockRenew restarts the lease of a token the client holds.
	LockRenew
	// LockRelease frees the resource if the token is still the current grant.
	LockRelease
)

// String returns "acquire", "renew" or "release", so that details and
// reports read as prose rather than numbers.
func (k LockKind) String() string {
	switch k {
	case LockAcquire:
		return "acquire"
	case LockRenew:
		return "renew"
	case LockRelease:
		return "release"
	}
	return fmt.Sprintf("LockKind(%d)", uint8(k))
}

// MarshalText encodes the kind as its String, so that JSON histories stay
// readable and do not depend on the numbering of the constants.
func (k LockKind) MarshalText() ([]byte, error) {
	switch k {
	case LockAcquire, LockRenew, LockRelease:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("checker: invalid LockKind %d", uint8(k))
}

// UnmarshalText decodes a kind written by MarshalText, so that a saved history
// can be checked again.
func (k *LockKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "acquire":
		*k = LockAcquire
	case "renew":
		*k = LockRenew
	case "release":
		*k = LockRelease
	default:
		return fmt.Errorf("checker: invalid LockKind %q", b)
	}
	return nil
}

// LockStatus is the answer a client got to a lock operation, spelled as the
// lock service spells its statuses, or LockUnknown when no answer came. It is
// a string rather than an enum so that a status this package does not know
// is kept, and judged impossible, rather than lost.
type LockStatus string

// The statuses a lock operation can end with.
const (
	// LockGranted: the acquire was granted; LockOp.Token is the token.
	LockGranted LockStatus = "granted"
	// LockBusy: another client held the resource.
	LockBusy LockStatus = "busy"
	// LockRenewed: the lease of the token was restarted.
	LockRenewed LockStatus = "renewed"
	// LockReleased: the grant of the token was ended.
	LockReleased LockStatus = "released"
	// LockNotHolder: the token was not the current grant of the client.
	LockNotHolder LockStatus = "not-holder"
	// LockInvalid: the request failed validation and changed nothing.
	LockInvalid LockStatus = "invalid"
	// LockOverloaded: the server shed this copy of the request. Another copy
	// of the same request (a retry, or a duplicate on the wire) may still
	// take effect, so S7 treats the operation as ambiguous.
	LockOverloaded LockStatus = "overloaded"
	// LockNotLeader: the replica could not serve this copy of the request;
	// ambiguous for the same reason as LockOverloaded.
	LockNotLeader LockStatus = "not-leader"
	// LockStale: the service judged this copy a late one of a request the
	// client had abandoned and did not apply it; an earlier copy may have
	// been applied, so it is ambiguous for the same reason too.
	LockStale LockStatus = "stale"
	// LockUnknown: no answer came; the operation may or may not have taken
	// effect, at any time after it was called.
	LockUnknown LockStatus = "unknown"
)

// LockOp is one client lock operation as the client saw it; S7 checks these
// against a fenced-mutex model and S5 checks its grants against the
// service's, so they must record what the client observed.
type LockOp struct {
	// ID identifies the operation; it is unique among a history's LockOps.
	ID       int      `json:"id"`
	Client   string   `json:"client"`
	Resource string   `json:"resource"`
	Kind     LockKind `json:"kind"`
	// Request is the client's request id; retries of one operation share it.
	Request uint64 `json:"request"`
	// Token is the token sent with a renew or release, or the token an
	// acquire returned when granted (0 otherwise).
	Token uint64 `json:"token,omitempty"`
	// Call is the true time the client first sent the request.
	Call time.Duration `json:"call"`
	// Return is the true time the client got the answer; it is ignored when
	// Outcome is LockUnknown.
	Return  time.Duration `json:"return"`
	Outcome LockStatus    `json:"outcome"`
}

// Renewal is one renewal decided by the lock service, taken from its own
// records (the first report of it when several replicas apply it).
type Renewal struct {
	Resource string `json:"resource"`
	// Client is the client that asked for the renewal.
	Client  string `json:"client"`
	Token   uint64 `json:"token"`
	Request uint64 `json:"request"`
	// At is the true time the service decided the renewal.
	At   time.Duration `json:"at"`
	Step uint64        `json:"step"`
}

// GrantEnd is one lease end decided by the lock service: a release or an
// expiry. A history keeps each distinct (token, reason) once, so an end
// decided for a grant that had already ended is kept too, for S6.
type GrantEnd struct {
	Resource string `json:"resource"`
	// Client is the holder of the lease the service ended.
	Client string `json:"client"`
	Token  uint64 `json:"token"`
	// Reason is "released" or "expired".
	Reason string        `json:"reason"`
	At     time.Duration `json:"at"`
	Step   uint64        `json:"step"`
	// Lost: a crash took the decision back before it was durable.
	Lost bool `json:"lost,omitempty"`
}

// Reasons a grant ends.
const (
	EndReleased = "released"
	EndExpired  = "expired"
)

// Belief is a window in which a client believed it held a lock: from the
// instant it received the grant to the instant it stopped using it. Beliefs
// of two clients on one resource overlap in every lease lock; fencing is what
// makes that harmless, so overlaps are measured, not failed.
type Belief struct {
	Client   string        `json:"client"`
	Resource string        `json:"resource"`
	Token    uint64        `json:"token"`
	From     time.Duration `json:"from"`
	// To is the true time the belief ended; it is meaningless if Open.
	To time.Duration `json:"to"`
	// Open reports that the client still believed it at the end of the run.
	Open bool `json:"open"`
	// Reason says why the belief ended ("watchdog", "renew-refused",
	// "fenced-out", "releasing", "restarted", ...).
	Reason string `json:"reason,omitempty"`
}

// StoreRestart is an instant the fenced store started again after a crash:
// what it decides from then on comes from what it had made durable.
type StoreRestart struct {
	At   time.Duration `json:"at"`
	Step uint64        `json:"step"`
}
