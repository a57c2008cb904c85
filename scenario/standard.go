package scenario

import (
	"fmt"
	"time"

	"github.com/fencesim/fencesim/lockservice/designs/shape"
)

// StandardSpec is the standard run that simrun bench measures: 5 replicas,
// 10 clients on 3 resources, swarm faults for 50 simulated seconds and a
// 10 s liveness phase (60 s in all), checker included. The clients of r0
// and r1 wait in the leader's queue for a held lock (a wait bound of one
// TTL); those of r2 poll, so that busy answers through the log and the
// backoff stay exercised. Pollers are kept off the waiters' resources: two
// waiters that take turns leave the lock free for no poll to find (each
// release promotes the next waiter), and the liveness phase would fail.
func StandardSpec() Spec {
	ms := func(n int64) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	s := Spec{Version: SpecVersion, Name: "standard", Description: "simrun bench's standard run",
		Expect: Expectation{Verdict: "pass"}, Design: shape.DesignReplicated, Replicas: 5,
		LatencyMin: Duration(500 * time.Microsecond), LatencyMean: ms(1), LatencyMax: ms(5),
		Swarm: true, Duration: ms(50_000), Liveness: &LivenessSpec{Bound: ms(10_000)}, StepLimit: 20_000_000}
	for i := range 10 {
		s.Clients = append(s.Clients, ClientSpec{Name: fmt.Sprintf("c%d", i), Resource: fmt.Sprintf("r%d", i%3),
			TTL: ms(500), StartDelay: ms(300 + 10*int64(i)), WritesPerHold: 2, WorkDuration: ms(20), DriftBoundPPM: 1000})
		if i%3 != 2 {
			s.Clients[i].Wait = ms(500)
		}
	}
	return s
}
