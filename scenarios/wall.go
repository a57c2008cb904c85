package scenarios

import "time"

// stopwatch measures the wall time of a run (Result.Wall, CheckWall) for the
// report. It is the one reading of the machine's clock in the runner, kept
// in this file so that the rest of the runner is held to the determinism
// lint (internal/detlint exempts this file by name): nothing in the loop
// reads it, so it cannot steer a run.
type stopwatch struct{ start time.Time }

func startStopwatch() stopwatch { return stopwatch{start: time.Now()} }

func (s stopwatch) elapsed() time.Duration { return time.Since(s.start) }
