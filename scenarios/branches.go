package scenarios

import (
	"sync"

	"github.com/fencesim/fencesim/coverage/branches"
)

// branchMu serialises the simulations of runs that read Go's coverage
// counters (RunOptions.Branches): the counters are the process's, so a
// run's are its own only while no other run executes covered code. The
// checks after the loop run outside it (the checker is not covered), so
// a sweep's workers still overlap one run's check with the next run.
var branchMu sync.Mutex

// branchProbe is one run's hold on the counters: cleared when it starts,
// read when its loop ends.
type branchProbe struct {
	held bool
	r    branches.Reader
}

// startBranches clears the counters for a run that reads them (nil probe
// for one that does not).
func startBranches(on bool) (*branchProbe, error) {
	if !on {
		return nil, nil
	}
	branchMu.Lock()
	if err := branches.Reset(); err != nil {
		branchMu.Unlock()
		return nil, err
	}
	return &branchProbe{held: true}, nil
}

// finish reads the run's counters and lets the next run have them.
func (b *branchProbe) finish() ([]branches.Feature, error) {
	if b == nil {
		return nil, nil
	}
	defer b.release()
	return b.r.Read()
}

// release lets the next run have the counters (a run that panicked, or
// returned early, never read them).
func (b *branchProbe) release() {
	if b != nil && b.held {
		b.held = false
		branchMu.Unlock()
	}
}
