package lockapi_test

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/httpx/httpxtest"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// TestStalledBodiesHoldNoSlot: 64 requests that send their headers and
// never their body, against an admission limit of 16, do not make the
// server answer 429 to a client that sends its body: the body is read
// before the slot is taken. The stalled ones get 408 after BodyTimeout.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{
		Limiter: lockapi.LimiterConfig{Algorithm: lockapi.AlgorithmStatic, Min: 16, Max: 16}, BodyTimeout: 3 * time.Second})
	httpxtest.StallBodies(t, base, "POST", "/v1/locks/r/acquire", 64)
	for i := range 3 {
		r := lockapitest.Do(t, "POST", base+"/v1/locks/r"+string(rune('a'+i))+"/acquire", `{"client":"good","ttl_ms":1000,"request_id":"1"}`)
		if r.Status != 200 {
			t.Fatalf("a well-behaved acquire beside 64 stalled bodies: %d %s", r.Status, r.Body)
		}
	}
}
