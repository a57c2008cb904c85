package lockclient_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
)

// cluster is three fencesim-node replicas in this process on loopback,
// each behind the HTTP API.
type cluster struct {
	t       *testing.T
	peers   []nodesvc.Peer
	nodes   []*nodesvc.Backend
	servers []*lockapi.Server
}

// newCluster starts three nodes on loopback. Every listener, HTTP and
// Raft, is opened before any node starts and handed over open, so no other
// test's process can take a port in between.
func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, nodes: make([]*nodesvc.Backend, 3), servers: make([]*lockapi.Server, 3)}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	https, rafts := make([]net.Listener, 3), make([]net.Listener, 3)
	for i := range 3 {
		https[i], rafts[i] = listen(), listen()
		c.peers = append(c.peers, nodesvc.Peer{ID: process.NodeID(i), Raft: rafts[i].Addr().String(), HTTP: "http://" + https[i].Addr().String()})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i := range 3 {
		b, err := nodesvc.Open(nodesvc.Config{ID: process.NodeID(i), DataDir: t.TempDir(), Listener: rafts[i], Peers: c.peers})
		if err != nil {
			for _, l := range append(https[i:], rafts[i+1:]...) {
				l.Close()
			}
			t.Fatal(err)
		}
		s := lockapi.NewServer(b, lockapi.Config{})
		go s.Serve(https[i])
		c.nodes[i], c.servers[i] = b, s
	}
	return c
}

func (c *cluster) stop(i int) {
	if c.nodes[i] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.servers[i].Shutdown(ctx)
	c.nodes[i].Close()
	c.nodes[i], c.servers[i] = nil, nil
}

func (c *cluster) leader() int {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for i, n := range c.nodes {
			if n != nil && n.IsLeader() {
				return i
			}
		}
	}
	c.t.Fatal("no leader within 10s")
	return -1
}

// TestClusterLeaderStopWhileHeld: a lock held on a 3-node cluster keeps
// its lease across the leader's stop — the renewer's next renewal fails
// to connect, goes to another node at once, follows its 307 to the new
// leader — and is released there; tokens keep growing.
func TestClusterLeaderStopWhileHeld(t *testing.T) {
	c := newCluster(t)
	lead := c.leader()
	// The old leader first: the state machine has to leave it.
	eps := []string{c.peers[lead].HTTP, c.peers[(lead+1)%3].HTTP, c.peers[(lead+2)%3].HTTP}
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
	c.stop(lead)
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
