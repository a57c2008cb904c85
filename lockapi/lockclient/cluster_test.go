package lockclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
)

// TestClusterLeaderStopWhileHeld: a lock held on a 3-node cluster keeps
// its lease across the leader's stop — the renewer's next renewal fails
// to connect, goes to another node at once, follows its 307 to the new
// leader — and is released there; tokens keep growing.
func TestClusterLeaderStopWhileHeld(t *testing.T) {
	// The simulator's 100 ms election timeout: this test is about the
	// client following the leader change, not about how long it takes.
	c := nodesvctest.NewTuned(t, 0, func(cfg *nodesvc.Config) { cfg.ElectionTimeout = 100 * time.Millisecond })
	lead := c.Leader()
	// The old leader first: the state machine has to leave it.
	eps := []string{c.Peers[lead].HTTP, c.Peers[(lead+1)%3].HTTP, c.Peers[(lead+2)%3].HTTP}
	cl, err := lockclient.New(lockclient.Config{Name: "go", Endpoints: eps, RequestTimeout: 300 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	const ttl = 1500 * time.Millisecond
	l, err := cl.Acquire(ctx, "x", ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(lead)
	before := l.Deadline()
	select {
	case <-l.Lost():
		t.Fatal("lost the lease when the leader stopped: the renewer did not reach the new leader in time")
	case <-time.After(2 * ttl):
	}
	if !l.Deadline().After(before) {
		t.Fatalf("deadline %v did not move past %v: no renewal reached the new leader", l.Deadline(), before)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release at the new leader: %v", err)
	}
	l2, err := cl.TryAcquire(ctx, "x", ttl)
	if err != nil || l2.Token() <= l.Token() {
		t.Fatalf("acquire after release: %v, token %d after %d", err, l2.Token(), l.Token())
	}
	l2.Release(ctx)
}
