package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/httpx/httpxtest"
)

// TestStalledBodiesHoldNoSlot: 64 acquires on every node that send their
// headers and never their body (more than the API's admission floor, 64)
// do not make any node answer 429 to a client that sends its body.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	us := startDev(t, nil)
	for _, u := range us {
		httpxtest.StallBodies(t, u, "POST", "/v1/locks/r/acquire", 64)
	}
	for i, u := range us {
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.Post(u+"/v1/locks/good/acquire", "application/json",
				strings.NewReader(`{"client":"good","ttl_ms":1000,"request_id":"`+string(rune('a'+i))+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				t.Fatalf("node %d answered 429 beside 64 stalled bodies", i)
			}
			if resp.StatusCode == 200 || resp.StatusCode == 409 || time.Now().After(end) {
				break // granted, or held by an earlier grant of this loop
			}
		}
	}
}
