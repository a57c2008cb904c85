package live

import (
	"time"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC, the machine-wide base the harness, the
// store's apply log (GET /test/applies, mono_ns) and every client op share:
// Go's own monotonic readings are relative to the process, so another
// process's instants could not be placed on the run's timeline.
func monoNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("live: CLOCK_MONOTONIC unreadable: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
