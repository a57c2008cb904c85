package reference

import (
	"testing"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/sim"
)

// addStore adds the fenced store the replicas' clients write to.
func addStore(t *testing.T, w *sim.World, obs lockservice.Observer) sim.NodeID {
	return simtest.AddNode(t, w, "store", func() sim.Process {
		return fencedstore.NewFencedStore(fencedstore.StoreConfig{Limits: lockservice.DefaultLimits(), Observer: obs})
	}, fakeclock.Config{})
}
