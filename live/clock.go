package live

import (
	"time"

	"github.com/fencesim/fencesim/internal/testhooks"
)

// monoNow reads CLOCK_MONOTONIC, the machine-wide base the harness, the
// store's apply log (GET /test/applies, mono_ns) and every client op share:
// Go's own monotonic readings are relative to the process, so another
// process's instants could not be placed on the run's timeline.
func monoNow() time.Duration { return time.Duration(testhooks.MonoNow()) }
