// Package liveclient is the client side of a live run (package live): the
// workload's clients run as separate processes, so that a SIGSTOP pauses a
// lock holder for real, and each is a small target-specific binary whose
// main is
//
//	func main() { liveclient.Main(openMyLocker) }
//
// The harness drives it with line-delimited JSON on stdin/stdout: one
// Command, one Reply with the same id. The harness stamps the call time
// before it writes the command and the return time after it reads the
// reply; a command without a reply is an operation of unknown outcome.
// Commands run concurrently (a reply may overtake an older one), so one
// that hangs never holds up the next; every one is bounded by
// -op-timeout.
//
// A user testing their own lock service implements Locker for it (four
// methods) and writes that main; the fenced store's writes, reads and the
// work window are this package's.
package liveclient

import (
	"context"
	"errors"
	"time"
)

// Locker is what a lock service must offer to be tested live; users implement it for theirs.
type Locker interface {
	// Acquire tries once to take resource for ttl: the fencing token (0 if the service issues none),
	// ErrBusy if another client holds it, any other error = outcome unknown.
	Acquire(ctx context.Context, resource string, ttl time.Duration) (token uint64, err error)
	// Renew extends the caller's hold; ErrNotHolder if it is not (any longer) the holder.
	Renew(ctx context.Context, resource string, token uint64, ttl time.Duration) error
	// Release ends the caller's hold; ErrNotHolder if it was not the holder.
	Release(ctx context.Context, resource string, token uint64) error
	Close() error
}

// The definite refusals a Locker reports; every other error is an
// unknown outcome.
var (
	ErrBusy      = errors.New("liveclient: held by another client")
	ErrNotHolder = errors.New("liveclient: not the holder")
)

// Config is what the harness passes a client process (flags: -client, -endpoints a,b,c, -store URL, -opt k=v repeated).
type Config struct {
	Client    string            // this client's name in the history
	Endpoints []string          // the target's client-facing addresses (through the fault proxy)
	StoreURL  string            // the fenced store's base URL (through the fault proxy)
	Options   map[string]string // target-specific
}

// The operations of a Command.
const (
	OpAcquire = "acquire"
	OpRenew   = "renew"
	OpRelease = "release"
	OpWrite   = "write"
	OpRead    = "read"
)

// Command is one line the harness writes to a client's stdin.
type Command struct {
	ID       uint64 `json:"id"`
	Op       string `json:"op"`
	Resource string `json:"resource,omitempty"` // acquire, renew, release
	TTLms    int64  `json:"ttl_ms,omitempty"`   // acquire, renew
	Token    uint64 `json:"token,omitempty"`    // renew, release, write
	Key      string `json:"key,omitempty"`      // write, read
	Value    int64  `json:"value,omitempty"`    // write
	// WorkMs is how long a write "works" before it writes: the window in
	// which a pause hits a holder between its check and its write.
	WorkMs int64 `json:"work_ms,omitempty"`
}

// The Error values of a Reply that are definite answers; any other
// non-empty Error is an unknown outcome.
const (
	ErrorBusy      = "busy"       // acquire: held by another client
	ErrorNotHolder = "not_holder" // renew, release
	ErrorStale     = "stale"      // write: the store's fence rejected the token
)

// Reply is one line a client writes to stdout.
type Reply struct {
	ID uint64 `json:"id"`
	// OK: the operation took effect (granted, renewed, released, write
	// accepted, read answered).
	OK bool `json:"ok"`
	// Token is an acquire's fencing token (0: the service has none), or
	// the token of the write a read returned (0: never written).
	Token uint64 `json:"token,omitempty"`
	// Value is what a read returned.
	Value int64 `json:"value,omitempty"`
	// Error is ErrorBusy, ErrorNotHolder, ErrorStale, or anything else
	// for an unknown outcome; Message says more.
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}
