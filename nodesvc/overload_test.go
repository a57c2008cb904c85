package nodesvc_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
)

// TestOverloadKeepsTheLeader: 1,000 concurrent clients against the
// leader's API for a few seconds: the excess is answered 429 at once, and
// the leader keeps its term (no election: peer traffic and timers keep
// priority over client work on the replica's executor).
func TestOverloadKeepsTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 clients for 3 s")
	}
	c := nodesvctest.New(t, 0)
	lead := c.Leader()
	term := c.Nodes[lead].Term()
	url := strings.TrimSuffix(c.Peers[lead].HTTP, "/")
	tr := &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var ok, shed, other atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for w := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				body := fmt.Sprintf(`{"client":"c%d","ttl_ms":1000,"request_id":"%d"}`, w, i)
				resp, err := hc.Post(fmt.Sprintf("%s/v1/locks/r%d/acquire", url, w), "application/json", strings.NewReader(body))
				if err != nil {
					other.Add(1)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 200, 409:
					ok.Add(1)
				case 429:
					shed.Add(1)
					time.Sleep(10 * time.Millisecond)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("answered %d, shed (429) %d, other %d", ok.Load(), shed.Load(), other.Load())
	if got := c.Nodes[lead].Term(); got != term || !c.Nodes[lead].IsLeader() {
		t.Fatalf("the overload cost the leader its term: term %d -> %d, leader %v", term, got, c.Nodes[lead].IsLeader())
	}
	if shed.Load() == 0 {
		t.Errorf("1,000 clients and nothing shed")
	}
}
