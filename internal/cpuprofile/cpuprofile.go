// Package cpuprofile starts a CPU profile into a file, for the commands'
// -cpuprofile flags (simrun bench, fencesim-bench).
package cpuprofile

import (
	"os"
	"runtime/pprof"
)

// Start starts a CPU profile of this process into a new file at path;
// stop ends it and closes the file (once: a second call does nothing). It
// fails if the file cannot be made or a profile is running already.
func Start(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}
