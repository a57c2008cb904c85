package nodesvc_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/fencesim/fencesim/filedisk"
)

// TestGroupCommit: 64 acquires sent at once to the leader, each on a
// resource of its own, are all granted with fewer fsyncs at the leader
// than proposals: those that arrive while a sync is in flight go out in
// one append and one fsync (reference.ReplicaConfig.GroupCommit).
func TestGroupCommit(t *testing.T) {
	const n = 64
	c := newCluster(t)
	lead := c.Leader()
	base := c.Peers[lead].HTTP
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
	c.Stop(lead)
	d, err := filedisk.Open(c.Dirs[lead], filedisk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Every proposal, synced alone, would take a sync of its own, plus
	// the elections' hard states and empty entries.
	if syncs := d.Recovery().Seq; syncs >= n {
		t.Fatalf("the leader synced %d times for %d acquires: no group commit", syncs, n)
	} else {
		t.Logf("%d acquires, %d syncs at the leader", n, syncs)
	}
}
