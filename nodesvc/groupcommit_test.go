package nodesvc_test

import (
	"strconv"
	"sync"
	"testing"
)

// TestGroupCommit: 64 acquires sent at once to the leader, each on a
// resource of its own, are all granted with fewer fsyncs at the leader
// than proposals: those that arrive while a sync is in flight go out in
// one append and one fsync (reference.ReplicaConfig.GroupCommit, and the
// file disk's writer gathering the batches of background syncs). It
// counts fsyncs, not the log's batches: with background syncs each Raft
// Ready is a batch of its own, and several share an fsync.
func TestGroupCommit(t *testing.T) {
	const n = 64
	c := newCluster(t)
	lead := c.Leader()
	base := c.Peers[lead].HTTP
	before := c.Nodes[lead].Node().Fsyncs()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := "g" + strconv.Itoa(i)
			post(t, base, res, "acquire", `{"client":"c`+strconv.Itoa(i)+`","ttl_ms":60000,"request_id":"q"}`, 200)
		}()
	}
	wg.Wait()
	// Every proposal, synced alone, would take an fsync of its own.
	if syncs := c.Nodes[lead].Node().Fsyncs() - before; syncs >= n {
		t.Fatalf("the leader fsynced %d times for %d acquires: no group commit", syncs, n)
	} else {
		t.Logf("%d acquires, %d fsyncs at the leader", n, syncs)
	}
}
