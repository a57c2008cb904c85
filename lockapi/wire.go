package lockapi

// The JSON bodies of the API. Durations travel as integer milliseconds
// (ttl_ms), tokens as decimal strings (see Token).

// AcquireRequest is the body of POST /v1/locks/{resource}/acquire.
// RequestID makes retries idempotent: the same client retrying the same
// request id gets the same token back instead of "held" by itself.
// WaitMs (optional, 0 to the server's MaxWait) is how long the client is
// willing to wait for a held resource: the server answers once the lock is
// granted (fairly: fencesim-node queues waiters at the leader, first come
// first served) or, when WaitMs has passed, 409 held as without waiting.
// Without it a held resource is answered 409 at once. After a 409 held,
// ask again with a new request id: lockd keeps a request answered held
// held, so that a late copy of it (queued in a paused instance, duplicated
// on the wire) cannot be granted a lock nobody waits for.
type AcquireRequest struct {
	Client    string `json:"client"`
	TTLms     int64  `json:"ttl_ms"`
	RequestID string `json:"request_id"`
	WaitMs    int64  `json:"wait_ms,omitempty"`
}

// RenewRequest is the body of POST /v1/locks/{resource}/renew.
type RenewRequest struct {
	Client string `json:"client"`
	Token  Token  `json:"token"`
	TTLms  int64  `json:"ttl_ms"`
}

// ReleaseRequest is the body of POST /v1/locks/{resource}/release.
// RequestID, optional, makes a retried release idempotent: if a release
// with the same client, token and request id already took effect (its
// answer was lost, or was a 503 or 307 from a leader that stepped down
// after applying it), the retry answers released instead of not holder.
// Without one, a second release of a token is a 409 not_holder.
type ReleaseRequest struct {
	Client    string `json:"client"`
	Token     Token  `json:"token"`
	RequestID string `json:"request_id,omitempty"`
}

// LeaseResponse answers a successful acquire or renew: the lease lasts
// TTLms from no earlier than when the request was sent plus WaitedMs, the
// time (on the server's clock, rounded down) the acquire waited for the
// lock after it arrived (wait_ms); absent when it did not wait.
//
// TokenMAC, when the service has a fencing key (Config.TokenKey), is its
// MAC over the resource, the token and the holder (package
// internal/fencemac): a store that shares the key accepts the token only
// with it (headers Fencing-Token, Fencing-Holder, Fencing-Token-Mac).
type LeaseResponse struct {
	Token    Token  `json:"token"`
	TTLms    int64  `json:"ttl_ms"`
	WaitedMs int64  `json:"waited_ms,omitempty"`
	TokenMAC string `json:"token_mac,omitempty"`
}

// ReleaseResponse answers a successful release.
type ReleaseResponse struct {
	Released bool `json:"released"`
}

// LockResponse answers GET /v1/locks/{resource}. When Held, Holder, Token
// and TTLms describe the current lease; LastToken is the highest token ever
// issued for the resource (0: never), so a fenced resource can be primed —
// or, from a service whose tokens are one sequence across resources
// (fencesim-node: Raft log indexes), the last token it issued at all,
// which primes a fence as well.
type LockResponse struct {
	Resource  string `json:"resource"`
	Held      bool   `json:"held"`
	Holder    string `json:"holder,omitempty"`
	Token     Token  `json:"token,omitempty"`
	TTLms     int64  `json:"ttl_ms,omitempty"`
	LastToken Token  `json:"last_token"`
}

// ErrorResponse is every non-2xx body.
type ErrorResponse struct {
	Error   string `json:"error"` // a Code* constant
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`  // invalid: the offending field
	Holder  string `json:"holder,omitempty"` // held: the current holder
	// RetryAfterMs is the server's hint (held: the lease's remaining time;
	// overloaded/unavailable: as Retry-After, in ms).
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
	Leader       string `json:"leader,omitempty"` // not_leader: the leader's base URL
}

// Error codes of ErrorResponse.Error.
const (
	CodeInvalid     = "invalid"
	CodeTooLarge    = "too_large"
	CodeHeld        = "held"
	CodeNotHolder   = "not_holder"
	CodeOverloaded  = "overloaded"
	CodeDraining    = "draining"
	CodeUnavailable = "unavailable"
	CodeNotLeader   = "not_leader"
	CodeNotFound    = "not_found"
	// CodeUnauthorized (401): no known bearer token; CodeForbidden (403):
	// the request's client is not its identity, or the lease it reads is
	// another's.
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
)
