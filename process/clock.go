package process

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock is a node's own clock as a process sees it: clockwork.Clock, whose
// Now is the wall reading (it can jump, as a real machine's can), plus the
// monotonic reading that leases and timeouts are measured with.
//
// It holds no fault controls on purpose (drift, wall jumps, dropping
// timers): the code under test must not be able to reach them. The
// simulator's fakeclock.Clock implements Clock and keeps those controls for
// the harness; a real clock implements it over the machine's clock.
//
// Timers are clockwork.Clock.AfterFunc timers. Re-arming one through its
// Reset reuses it, so a heartbeat costs no allocation per period in the
// simulator; the channel-based methods (After, NewTimer, NewTicker, Sleep)
// block, which a process must never do, and the simulator's clock panics in
// them.
type Clock interface {
	clockwork.Clock
	// Monotonic is the time since an arbitrary origin fixed for the life
	// of the node's clock. It never goes back, whatever happens to the wall
	// reading, so it is the reading to measure durations and expiry with.
	Monotonic() time.Duration
}
