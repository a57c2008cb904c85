// Command simrun runs fencesim's scenarios: list them, run one seed, and
// report the verdict with a line that reproduces it. Its code is the
// package simrun, which a program of yours calls to run your own designs.
//
// Exit codes: 0 pass, 1 safety violation, 2 usage error, 3 liveness
// failure, 4 nondeterminism, 5 unknown (checker could not decide), 6 crash
// (the run panicked).
package main

import "github.com/fencesim/fencesim/simrun"

func main() { simrun.Main() }
