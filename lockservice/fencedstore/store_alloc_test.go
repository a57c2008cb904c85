package fencedstore

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
)

// Without a trace the node's logger takes no record, and the store builds
// none: an applied write costs its disk record and its reply, not the
// attributes of a log line nobody reads (slog's Info boxes each one).
func TestStoreWriteWithoutTraceLogsForFree(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	p, id := simtest.AddProbe(t, w, "p")
	w.Run(time.Second, 10) // the probe's Start, which keeps its env
	s := NewFencedStore(StoreConfig{Limits: lockservice.DefaultLimits()})
	s.Start(p.Env)
	req := uint64(0)
	write := func() {
		req++
		s.Receive(p.Env, id, lockservice.WriteRequest{Resource: "r", Client: "c", Token: 1, Value: int64(req), Request: req})
	}
	for range 100 { // warm-up: the table's and the disk's buffers have grown
		write()
	}
	// The disk's copy of the record, the boxed reply and the reported
	// event; the log line was five more.
	if allocs := testing.AllocsPerRun(100, write); allocs > 3 {
		t.Errorf("an applied write made %v allocations, want at most 3", allocs)
	}
}
