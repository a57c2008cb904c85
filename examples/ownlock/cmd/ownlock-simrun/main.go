// Command ownlock-simrun is simrun with the ownlock design in it: every
// simrun command, and scenario specs naming "design": "ownlock". Copy it
// next to your own design and pass yours to simrun.Main.
//
//	go run ./examples/ownlock/cmd/ownlock-simrun run -spec examples/ownlock/testdata/ownlock-contention.json
//	go run ./examples/ownlock/cmd/ownlock-simrun hunt -spec examples/ownlock/testdata/ownlock-server-crash.json
package main

import (
	"github.com/fencesim/fencesim/examples/ownlock"
	"github.com/fencesim/fencesim/simrun"
)

func main() { simrun.Main(ownlock.Design{}) }
