package nodesvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
)

// cluster is three nodes in this process on loopback, each a replica on
// realrt with the lock API in front of it.
type cluster struct {
	t       testing.TB
	peers   []nodesvc.Peer
	dirs    []string
	nodes   []*nodesvc.Backend
	servers []*lockapi.Server
	hls     []string // HTTP listen addresses
	// offset is the group's token offset (nodesvc.Config.TokenOffset).
	offset uint64
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

func newCluster(t testing.TB) *cluster { return newClusterOffset(t, 0) }

// newClusterOffset is newCluster with the group's tokens starting above
// offset.
func newClusterOffset(t testing.TB, offset uint64) *cluster {
	c := &cluster{t: t, offset: offset}
	for i := range 3 {
		raft, http := listen(t), listen(t)
		c.first = append(c.first, [2]net.Listener{raft, http})
		c.hls = append(c.hls, http.Addr().String())
		c.peers = append(c.peers, nodesvc.Peer{ID: process.NodeID(i), Raft: raft.Addr().String(), HTTP: "http://" + http.Addr().String()})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.nodes = make([]*nodesvc.Backend, 3)
	c.servers = make([]*lockapi.Server, 3)
	for i := range 3 {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) start(i int) {
	c.t.Helper()
	cfg := nodesvc.Config{ID: process.NodeID(i), DataDir: c.dirs[i], Listen: c.peers[i].Raft, Peers: c.peers, TokenOffset: c.offset}
	var l net.Listener
	if first := c.first[i]; first[0] != nil {
		cfg.Listener, l = first[0], first[1]
		c.first[i] = [2]net.Listener{}
	}
	b, err := nodesvc.Open(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); l == nil; time.Sleep(10 * time.Millisecond) {
		if l, err = net.Listen("tcp", c.hls[i]); err == nil {
			break
		}
		if time.Now().After(end) {
			b.Close()
			c.t.Fatal(err)
		}
	}
	s := lockapi.NewServer(b, lockapi.Config{})
	go s.Serve(l)
	c.nodes[i], c.servers[i] = b, s
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

// leader waits (at most 10s) until one running node leads and returns it.
func (c *cluster) leader() int {
	c.t.Helper()
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

// TestContract runs lockapi's contract suite against a three-node
// cluster, both of the suite's instances being the leader's API (the
// suite does not follow redirects; TestRedirect covers followers).
func TestContract(t *testing.T) {
	lockapitest.Suite(t, func(t *testing.T) lockapitest.Harness {
		// Tokens are log indexes plus the group's offset: they cannot be
		// set per resource, so the big-token case runs on a group whose
		// tokens start past 2^53.
		var offset uint64
		if strings.HasSuffix(t.Name(), "/tokens-beyond-2^53") {
			offset = 1 << 53
		}
		c := newClusterOffset(t, offset)
		b := c.nodes[c.leader()]
		return lockapitest.Harness{
			Backends:     [2]lockapi.Backend{b, b},
			Advance:      time.Sleep, // real leases, timed by the leader's clock
			TokenOffset:  offset,
			GlobalTokens: true,
			// The replicated table remembers each request id's grant.
			RemembersGrants: true,
		}
	})
}

// TestRenewTTLGovernsTheLease: a renewal's ttl_ms goes through the log
// and the leader's timer, so a lease renewed shorter ends by the new TTL
// (and keeps it), not by the one it was granted with.
func TestRenewTTLGovernsTheLease(t *testing.T) {
	c := newCluster(t)
	base := c.peers[c.leader()].HTTP
	l := post(t, base, "r", "acquire", `{"client":"alice","ttl_ms":20000,"request_id":"q1"}`, 200)
	tok := `"token":"` + l.Token.String() + `"`
	if r := post(t, base, "r", "renew", `{"client":"alice","ttl_ms":300,`+tok+`}`, 200); r.Token != l.Token || r.TTLms != 300 {
		t.Fatalf("renew %+v, want token %d and ttl_ms 300", r, l.Token)
	}
	renewed := time.Now()
	for req := 1; ; req++ {
		r := lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", fmt.Sprintf(`{"client":"bob","ttl_ms":5000,"request_id":"b%d"}`, req))
		if r.Status == 200 {
			break
		}
		if r.Status != 409 || time.Since(renewed) > 10*time.Second {
			t.Fatalf("bob's acquire %v after alice renewed for 300ms: %d %s; want 409, then 200 once the short lease ends (not the granted 20s)", time.Since(renewed), r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func post(t testing.TB, base, res, op, body string, want int) lockapi.LeaseResponse {
	t.Helper()
	r := lockapitest.Do(t, "POST", base+"/v1/locks/"+res+"/"+op, body)
	if r.Status != want {
		t.Fatalf("%s %s %s: %d %s, want %d", op, res, body, r.Status, r.Body, want)
	}
	var l lockapi.LeaseResponse
	if want == 200 && op != "release" {
		if err := json.Unmarshal([]byte(r.Body), &l); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestRedirect: a follower answers 307 to the leader's HTTP address, and
// the Go client follows it across a change of leader.
func TestRedirect(t *testing.T) {
	c := newCluster(t)
	lead := c.leader()
	f := (lead + 1) % 3
	r := lockapitest.Do(t, "POST", c.peers[f].HTTP+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":5000,"request_id":"1"}`)
	if r.Status != http.StatusTemporaryRedirect || r.Header.Get("Location") != c.peers[lead].HTTP+"/v1/locks/r/acquire" {
		t.Fatalf("follower: %d Location %q, want 307 to %s", r.Status, r.Header.Get("Location"), c.peers[lead].HTTP)
	}

	var urls []string
	for _, p := range c.peers {
		urls = append(urls, p.HTTP)
	}
	cl, err := lockclient.New(lockclient.Config{Name: "go", Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l1, err := cl.Acquire(ctx, "x", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.stop(lead)
	l2, err := cl.Acquire(ctx, "x", 3*time.Second)
	if err != nil {
		t.Fatalf("acquire after the leader stopped: %v", err)
	}
	if l2.Token() <= l1.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l1.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAPILimiterFloorIsTheReplicasIngress: fencesim-node's admission limit
// never falls below what its replica admits in flight itself, whatever the
// algorithm, and every algorithm accepts the bounds.
func TestAPILimiterFloorIsTheReplicasIngress(t *testing.T) {
	depth := reference.DefaultReplicaConfig(nil).IngressDepth
	for _, alg := range lockapi.Algorithms {
		c := nodesvc.APILimiter(alg)
		if c.Min != depth || c.Max < c.Min {
			t.Errorf("%s: limit %d..%d, want the replica's ingress depth %d as the floor", alg, c.Min, c.Max, depth)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", alg, err)
		}
		if l := lockapi.NewLimiter(c); l.Limit() < depth {
			t.Errorf("%s: starts at %d, below the floor %d", alg, l.Limit(), depth)
		}
	}
}
