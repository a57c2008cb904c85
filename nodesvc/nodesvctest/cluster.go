// Package nodesvctest runs a three-replica fencesim-node cluster in the
// test's process on loopback, each replica on realrt with the lock API in
// front of it: the one cluster harness of nodesvc's tests and of the HTTP
// client's cluster tests (lockapi/lockclient).
package nodesvctest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
)

// Cluster is three nodes; Nodes[i] and Servers[i] are nil while node i is
// stopped.
type Cluster struct {
	T       testing.TB
	Peers   []nodesvc.Peer
	Dirs    []string // each node's data directory, kept across restarts
	Nodes   []*nodesvc.Backend
	Servers []*lockapi.Server
	hls     []string // HTTP listen addresses
	// offset is the group's token offset (nodesvc.Config.TokenOffset).
	offset uint64
	// opts change each node's configuration on every start.
	opts []func(*nodesvc.Config)
	// first are the listeners of each node's first start (Raft, HTTP),
	// opened before any node starts so that no parallel test takes a
	// port in between; a restart listens on the same addresses again.
	first [][2]net.Listener
}

// listen opens a loopback listener on a port the kernel picks.
func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// NewTuned is New with every node's configuration adjusted by tune.
func NewTuned(t testing.TB, offset uint64, tune func(*nodesvc.Config)) *Cluster {
	if tune == nil {
		return New(t, offset)
	}
	return New(t, offset, tune)
}

// New starts three nodes whose tokens start above offset, their
// configuration changed by opts on every start; they are stopped when the
// test ends.
func New(t testing.TB, offset uint64, opts ...func(*nodesvc.Config)) *Cluster {
	c := &Cluster{T: t, offset: offset, opts: opts}
	for i := range 3 {
		raft, http := listen(t), listen(t)
		c.first = append(c.first, [2]net.Listener{raft, http})
		c.hls = append(c.hls, http.Addr().String())
		c.Peers = append(c.Peers, nodesvc.Peer{ID: process.NodeID(i), Raft: raft.Addr().String(), HTTP: "http://" + http.Addr().String()})
		c.Dirs = append(c.Dirs, t.TempDir())
	}
	c.Nodes = make([]*nodesvc.Backend, 3)
	c.Servers = make([]*lockapi.Server, 3)
	for i := range 3 {
		c.Start(i)
	}
	t.Cleanup(func() {
		for i := range c.Nodes {
			c.Stop(i)
		}
	})
	return c
}

// Start starts node i: on its first start with the listeners New opened,
// on a restart on the same addresses again (retried for up to 5s while
// the old socket lingers).
func (c *Cluster) Start(i int) {
	c.T.Helper()
	cfg := nodesvc.Config{ID: process.NodeID(i), DataDir: c.Dirs[i], Listen: c.Peers[i].Raft, Peers: c.Peers, TokenOffset: c.offset}
	for _, o := range c.opts {
		o(&cfg)
	}
	var l net.Listener
	if first := c.first[i]; first[0] != nil {
		cfg.Listener, l = first[0], first[1]
		c.first[i] = [2]net.Listener{}
	}
	b, err := nodesvc.Open(cfg)
	if err != nil {
		c.T.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); l == nil; time.Sleep(10 * time.Millisecond) {
		if l, err = net.Listen("tcp", c.hls[i]); err == nil {
			break
		}
		if time.Now().After(end) {
			b.Close()
			c.T.Fatal(err)
		}
	}
	s := lockapi.NewServer(b, lockapi.Config{})
	go s.Serve(l)
	c.Nodes[i], c.Servers[i] = b, s
}

// Stop shuts node i's API down (5s at most) and closes the node; a
// stopped node is left alone.
func (c *Cluster) Stop(i int) {
	if c.Nodes[i] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Servers[i].Shutdown(ctx)
	c.Nodes[i].Close()
	c.Nodes[i], c.Servers[i] = nil, nil
}

// Leader waits (at most 10s) until one running node leads and returns it.
func (c *Cluster) Leader() int {
	c.T.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for i, n := range c.Nodes {
			if n != nil && n.IsLeader() {
				return i
			}
		}
	}
	c.T.Fatal("no leader within 10s")
	return -1
}
