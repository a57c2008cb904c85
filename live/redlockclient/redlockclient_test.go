package redlockclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/live/liveclient"
)

// nodes starts n real redis-servers (skipped without redis-server,
// except in CI) and returns their addresses.
func nodes(t *testing.T, n int) []string {
	var addrs []string
	for range n {
		addrs = append(addrs, redistest.Start(t).Addr)
	}
	return addrs
}

func openLocker(t *testing.T, client string, endpoints []string) *Locker {
	t.Helper()
	l, err := open(liveclient.Config{Client: client, Endpoints: endpoints, Options: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLockerAnswersDefinitely walks two clients through a hold on five
// nodes: the second is refused with ErrBusy, renews and releases of a
// non-holder are ErrNotHolder, and after the release the second gets it.
func TestLockerAnswersDefinitely(t *testing.T) {
	addrs := nodes(t, 5)
	a, b := openLocker(t, "a", addrs), openLocker(t, "b", addrs)
	ctx := context.Background()
	if tok, err := a.Acquire(ctx, "r", 5*time.Second); err != nil || tok != 0 {
		t.Fatalf("a's acquire: token %d, %v; want token 0 (Redlock has none), nil", tok, err)
	}
	if _, err := b.Acquire(ctx, "r", 5*time.Second); !errors.Is(err, liveclient.ErrBusy) {
		t.Fatalf("b's acquire of a held lock: %v, want ErrBusy", err)
	}
	if err := a.Renew(ctx, "r", 0, 5*time.Second); err != nil {
		t.Fatalf("a's renew: %v", err)
	}
	if err := b.Renew(ctx, "r", 0, 5*time.Second); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("b's renew: %v, want ErrNotHolder", err)
	}
	if err := b.Release(ctx, "r", 0); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("b's release: %v, want ErrNotHolder", err)
	}
	if err := a.Release(ctx, "r", 0); err != nil {
		t.Fatalf("a's release: %v", err)
	}
	if err := a.Release(ctx, "r", 0); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("a's second release: %v, want ErrNotHolder", err)
	}
	if _, err := b.Acquire(ctx, "r", 5*time.Second); err != nil {
		t.Fatalf("b's acquire after a's release: %v", err)
	}
}

// TestHoldExpiresOnTheNodes is the ground of Kleppmann's case: once the
// ttl has passed on the nodes, another client gets the lock while the
// first still has its Mutex, and the first then learns it is no holder.
func TestHoldExpiresOnTheNodes(t *testing.T) {
	addrs := nodes(t, 5)
	a, b := openLocker(t, "a", addrs), openLocker(t, "b", addrs)
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "r", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := b.Acquire(ctx, "r", 5*time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, liveclient.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("b's acquire after a's ttl: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.Renew(ctx, "r", 0, time.Second); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("a's renew after its ttl: %v, want ErrNotHolder", err)
	}
}

// TestNoMajorityIsUnknown: with three of five nodes unreachable an
// acquire fails, but not as ErrBusy (no majority said "taken"), so the
// harness records it as an unknown outcome.
func TestNoMajorityIsUnknown(t *testing.T) {
	addrs := nodes(t, 2)
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close() // nothing listens there now
	}
	a := openLocker(t, "a", addrs)
	_, err := a.Acquire(context.Background(), "r", time.Second)
	if err == nil || errors.Is(err, liveclient.ErrBusy) || errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("acquire without a majority: %v, want an error of unknown outcome", err)
	}
}

func TestOpenRefusesBadEndpoints(t *testing.T) {
	for _, eps := range [][]string{nil, {"http://127.0.0.1:1/x"}} {
		if _, err := open(liveclient.Config{Endpoints: eps}); err == nil {
			t.Errorf("open(%q): no error", eps)
		}
	}
}
