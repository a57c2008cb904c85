package nodesvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
)

// cluster is nodesvctest's three-node cluster.
type cluster = nodesvctest.Cluster

func newCluster(t testing.TB) *cluster { return nodesvctest.New(t, 0) }

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
		c := nodesvctest.New(t, offset)
		b := c.Nodes[c.Leader()]
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
	base := c.Peers[c.Leader()].HTTP
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
	lead := c.Leader()
	f := (lead + 1) % 3
	r := lockapitest.Do(t, "POST", c.Peers[f].HTTP+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":5000,"request_id":"1"}`)
	if r.Status != http.StatusTemporaryRedirect || r.Header.Get("Location") != c.Peers[lead].HTTP+"/v1/locks/r/acquire" {
		t.Fatalf("follower: %d Location %q, want 307 to %s", r.Status, r.Header.Get("Location"), c.Peers[lead].HTTP)
	}

	var urls []string
	for _, p := range c.Peers {
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
	c.Stop(lead)
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
