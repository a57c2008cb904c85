package reference

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
)

// TestRenewTakesTheRequestedTTL: a renewal with a TTL restarts the lease
// for it and the lease keeps it (a later renewal without one, and a new
// leader's restart, use it); a renewal without one keeps the lease's.
func TestRenewTakesTheRequestedTTL(t *testing.T) {
	tb := NewLockTable()
	g := tb.Acquire(lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: 10 * time.Second, Request: 1}, 0, 5)
	if g.Status != lockservice.Granted {
		t.Fatalf("acquire: %v", g)
	}
	steps := []struct {
		ttl, now, wantTTL time.Duration
	}{
		{0, time.Second, 10 * time.Second},                  // keeps the granted TTL
		{2 * time.Second, 2 * time.Second, 2 * time.Second}, // takes the new one
		{0, 3 * time.Second, 2 * time.Second},               // and keeps it
	}
	for i, s := range steps {
		rep := tb.Renew(lockservice.RenewRequest{Resource: "r", Client: "c", Token: g.Token, Request: uint64(2 + i), TTL: s.ttl}, s.now)
		l, _ := tb.Lease("r")
		if rep.Status != lockservice.Renewed || rep.TTL != s.wantTTL || l.TTL != s.wantTTL || l.Deadline != s.now+s.wantTTL {
			t.Fatalf("renew %d with ttl %v at %v: reply %v, lease %+v; want TTL %v to %v", i, s.ttl, s.now, rep, l, s.wantTTL, s.now+s.wantTTL)
		}
	}
	lim := lockservice.DefaultLimits()
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, time.Hour} {
		if err := lim.CheckRenew(lockservice.RenewRequest{Resource: "r", Client: "c", Token: 5, TTL: ttl}); err == nil {
			t.Errorf("CheckRenew accepted ttl %v", ttl)
		}
	}
	if err := lim.CheckRenew(lockservice.RenewRequest{Resource: "r", Client: "c", Token: 5}); err != nil {
		t.Errorf("CheckRenew refused a renewal keeping its TTL: %v", err)
	}
}
