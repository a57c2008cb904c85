package workload

import (
	"testing"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/sim"
)

// addStore and addServer add the fenced store and a single-node lock
// server for the client to work against.
func addStore(t *testing.T, w *sim.World, obs lockservice.Observer) sim.NodeID {
	return simtest.AddNode(t, w, "store", func() sim.Process {
		return fencedstore.NewFencedStore(fencedstore.StoreConfig{Limits: lockservice.DefaultLimits(), Observer: obs})
	}, fakeclock.Config{})
}

func addServer(t *testing.T, w *sim.World, obs lockservice.Observer, clock fakeclock.Config) sim.NodeID {
	return simtest.AddNode(t, w, "server", func() sim.Process {
		return reference.NewServer(reference.ServerConfig{Limits: lockservice.DefaultLimits(), Observer: obs})
	}, clock)
}
