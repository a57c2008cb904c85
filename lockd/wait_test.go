package lockd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockd"
)

// TestAcquireWaits: a waiting acquire of a held lock is granted inside
// the same call once the holder releases, and answered held once its
// wait has passed.
func TestAcquireWaits(t *testing.T) {
	ctx := context.Background()
	b := lockd.New(newClient(t, miniredis.RunT(t).Addr()), lockd.Options{})
	held, err := b.Acquire(ctx, "r", "a", time.Minute, 0, "q1")
	if err != nil {
		t.Fatal(err)
	}
	var he *lockapi.HeldError
	start := time.Now()
	if _, err := b.Acquire(ctx, "r", "b", time.Minute, 50*time.Millisecond, "q2"); !errors.As(err, &he) {
		t.Fatalf("acquire waiting 50ms on a lock held for a minute: %v, want held", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("answered held after %v, before its 50ms wait passed", took)
	}
	released := make(chan error, 1)
	var releasedBy time.Duration // after the waiting acquire's call
	start = time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		err := b.Release(ctx, "r", "a", held.Token, "")
		releasedBy = time.Since(start)
		released <- err
	}()
	l, err := b.Acquire(ctx, "r", "b", time.Minute, 10*time.Second, "q3")
	if err != nil {
		t.Fatalf("waiting acquire: %v, want granted once a released", err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	// The release handed the lock over before it returned: a Waited past
	// that would let the client count its lease as later than it is.
	if l.Waited > releasedBy {
		t.Fatalf("Waited %v, but the lease was granted by the release, done %v after the call", l.Waited, releasedBy)
	}
	if l.Token <= held.Token {
		t.Fatalf("token %d after %d", l.Token, held.Token)
	}
	// Granted after a's release, some 100 ms in: the lease began no
	// sooner, and the answer says so.
	if l.Waited < 50*time.Millisecond {
		t.Fatalf("granted after waiting, but Waited is %v", l.Waited)
	}
}
