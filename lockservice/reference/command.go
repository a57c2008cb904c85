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
	// Key, for CmdAcquire: the client's own name for the attempt
	// (lockservice.AcquireRequest.Key), deduplicated by the table on
	// every replica alike.
	Key string `json:"key,omitempty"`
	// Next, for CmdRelease: the acquire of the resource's head waiter at
	// the leader, handed the lock by the same entry (waitqueue.go). Zero
	// (no Client): none.
	Next HandOver `json:"next,omitzero"`
}

// HandOver is the acquire a release entry carries for the resource's next
// holder: the waiter's command as it would be proposed on
// its own (the resource is the entry's), so that every replica applies it
// alike, consulting nothing but the log.
type HandOver struct {
	Client  string        `json:"c"`
	TTL     time.Duration `json:"ttl,omitempty"`
	Request uint64        `json:"q,omitempty"`
	Key     string        `json:"key,omitempty"`
	// Token is the leader's stamp (TokenSource.Stamp), as an acquire's.
	Token uint64 `json:"t,omitempty"`
}

// next returns the acquire c hands its resource to, if it carries one.
func (c Command) next() (Command, bool) {
	if c.Next.Client == "" {
		return Command{}, false
	}
	n := c.Next
	return Command{Kind: CmdAcquire, Resource: c.Resource, Client: n.Client, TTL: n.TTL, Token: n.Token, Request: n.Request, Key: n.Key}, true
}
