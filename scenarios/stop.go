package scenarios

import (
	"errors"
	"time"

	"github.com/fencesim/fencesim/sim"
)

// ErrStopped is what a run returns when RunOptions.Stop asked it to stop:
// it has no verdict (it did not reach its end), and a sweep drops it
// instead of counting it as a pass or a failure.
var ErrStopped = errors.New("scenarios: the run was stopped before its end")

// stopChunk is how many events a run fires between two looks at its stop
// hook: about a millisecond of simulation, so a stop takes effect well
// within a second, while the hook costs nothing measurable.
const stopChunk = 1 << 12

// runWorld runs w until end or limit events like w.Run, but in chunks of
// stopChunk events, asking stop (if set) before each: it reports stopped
// when stop said so. Cutting the loop into chunks does not change the run
// (sim's TestRunInSlicesIsTheSameRun), and stop is read only between
// chunks, outside the event loop, so it cannot change what a run does —
// only whether it finishes.
func runWorld(w *sim.World, end time.Duration, limit uint64, stop func() bool) (outcome sim.Outcome, stopped bool) {
	if stop == nil {
		return w.Run(end, limit), false
	}
	start := w.Step()
	for {
		if stop() {
			return sim.StepLimit, true
		}
		left := limit - (w.Step() - start)
		outcome = w.Run(end, min(left, stopChunk))
		if outcome != sim.StepLimit || left <= stopChunk {
			return outcome, false
		}
	}
}
