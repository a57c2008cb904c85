package lockclient

import (
	"log/slog"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// Without a trace the node's logger takes no record, and the client builds
// none: logging an event allocates nothing.
func TestClientLogWithoutTraceAllocatesNothing(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	p, _ := simtest.AddProbe(t, w, "c")
	w.Run(time.Second, 10) // the probe's Start, which keeps its env
	c := NewLock(lockservice.DefaultClientConfig("c", []process.NodeID{0}, "r"), nil, nil)
	c.env = p.Env
	allocs := testing.AllocsPerRun(100, func() {
		c.Log("acquire.sent", 7, slog.Int("to", 1))
		c.Log("write.reply", 8, slog.Uint64("token", 3), slog.Bool("accepted", true), slog.Uint64("highest", 3))
		c.logStatus("release.", lockservice.NotHolder, 9, slog.Uint64("token", 3))
	})
	if allocs != 0 {
		t.Fatalf("logging without a trace made %v allocations, want 0", allocs)
	}
}

// Arming a client timer allocates the timer and nothing else: the callbacks
// are bound once.
func TestClientTimerArmAllocatesOnlyTheTimer(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	p, _ := simtest.AddProbe(t, w, "c")
	w.Run(time.Second, 10)
	c := NewLock(lockservice.DefaultClientConfig("c", []process.NodeID{0}, "r"), nil, nil)
	c.env = p.Env
	allocs := testing.AllocsPerRun(100, func() {
		Rearm(c.env, &c.timeout, time.Second, c.retryAcquireFn)
	})
	if allocs > 1 {
		t.Fatalf("arming a timer made %v allocations, want 1 (the timer)", allocs)
	}
}
