package reference

import "time"

// CommandKind names an entry of the replicated lock log.
type CommandKind uint8

const (
	CmdAcquire CommandKind = iota + 1
	CmdRenew
	CmdRelease
	// CmdExpire ends a lease the leader's monotonic timer found due.
	CmdExpire
)

// Command is one entry of the replicated lock log. Applying it is a pure
// function of the log: no replica's clock enters, so every replica reaches
// the same table.
type Command struct {
	Kind     CommandKind   `json:"k"`
	Resource string        `json:"r"`
	Client   string        `json:"c,omitempty"`
	TTL      time.Duration `json:"ttl,omitempty"`
	Token    uint64        `json:"t,omitempty"`
	Request  uint64        `json:"q,omitempty"`
	// Since, for CmdExpire: the log index of the grant or renewal whose
	// lease the leader's timer measured. A renewal applied in between makes
	// the Expire stale, so a lease is never cut short.
	Since uint64 `json:"s,omitempty"`
	// RequestID, for CmdRelease: the caller's id of the release
	// (ReleaseRequest.RequestID), reported with its EvEnded so that a
	// front end on any replica recognises a retry of it. Empty in the
	// simulator, where the entry's bytes stay as before the field existed.
	RequestID string `json:"id,omitempty"`
}
