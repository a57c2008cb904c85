package nodesvc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/process"
)

// TestHandover: a follower has nothing to hand over; the leader hands the
// lead to a follower, which leads the next term, while a grant made before
// stays with its holder; the old leader then redirects to the new one.
func TestHandover(t *testing.T) {
	c := newCluster(t)
	old := c.Leader()
	post(t, c.Peers[old].HTTP, "h", "acquire", `{"client":"a","ttl_ms":10000,"request_id":"1"}`, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	follower := (old + 1) % 3
	if to, err := c.Nodes[follower].Handover(ctx); err != nil || to != lockservice.NoLeader {
		t.Fatalf("a follower's Handover = %d, %v; want NoLeader, nil", to, err)
	}
	term := c.Nodes[old].Term()
	start := time.Now()
	to, err := c.Nodes[old].Handover(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if to == process.NodeID(old) || to == lockservice.NoLeader {
		t.Fatalf("handed over to %d from %d", to, old)
	}
	// No election could have done it: the old leader was alive, and
	// CheckQuorum's lease makes the followers ignore a campaign that is not
	// a transfer.
	t.Logf("handed over from %d to %d in %v", old, to, took)
	if !c.Nodes[to].IsLeader() || c.Nodes[to].Term() != term+1 {
		t.Fatalf("node %d: leader %v in term %d; want the leader of term %d", to, c.Nodes[to].IsLeader(), c.Nodes[to].Term(), term+1)
	}
	if c.Nodes[old].IsLeader() {
		t.Fatalf("the old leader %d still leads", old)
	}
	// The lease stays a's: b is refused, at the new leader.
	post(t, c.Peers[to].HTTP, "h", "acquire", `{"client":"b","ttl_ms":10000,"request_id":"1"}`, http.StatusConflict)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(c.Peers[old].HTTP + "/v1/locks/h")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusTemporaryRedirect || loc != c.Peers[to].HTTP+"/v1/locks/h" {
		t.Errorf("GET at the old leader: %d to %q, want 307 to %s", resp.StatusCode, loc, c.Peers[to].HTTP)
	}
}

// TestReleaseRetryAfterALeaderChange: a release applied by one leader
// whose answer the client never saw (the leader stepped down between
// applying and answering: 503 or 307) is retried, same request id, at the
// next leader, which never saw the first attempt: it answers released,
// since the request id travelled in the log entry. Another request id is
// still refused.
func TestReleaseRetryAfterALeaderChange(t *testing.T) {
	c := newCluster(t)
	old := c.Leader()
	l := post(t, c.Peers[old].HTTP, "r", "acquire", `{"client":"a","ttl_ms":10000,"request_id":"1"}`, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Nodes[old].Release(ctx, "r", "a", uint64(l.Token), "rel-1"); err != nil {
		t.Fatal(err) // applied; this answer is the one the client lost
	}
	to, err := c.Nodes[old].Handover(ctx)
	if err != nil || to == lockservice.NoLeader {
		t.Fatalf("handover: %d, %v", to, err)
	}
	if err := c.Nodes[to].Release(ctx, "r", "a", uint64(l.Token), "rel-1"); err != nil {
		t.Fatalf("the retried release at the new leader: %v, want released", err)
	}
	tok := `"token":"` + l.Token.String() + `"`
	post(t, c.Peers[to].HTTP, "r", "release", `{"client":"a",`+tok+`,"request_id":"rel-1"}`, http.StatusOK)
	post(t, c.Peers[to].HTTP, "r", "release", `{"client":"a",`+tok+`,"request_id":"rel-2"}`, http.StatusConflict)
}
