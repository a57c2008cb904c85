package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/etcdtest"
	"github.com/fencesim/fencesim/live/liveclient"
)

// cluster starts a three-member etcd (etcdtest: as the live targets run
// it) and returns its client URLs; skipped without etcd, except in CI.
func cluster(t *testing.T) []string {
	var urls []string
	for _, m := range etcdtest.Start(t) {
		urls = append(urls, m.ClientURL)
	}
	return urls
}

func openLocker(t *testing.T, urls []string, fenced string) *locker {
	t.Helper()
	l, err := open(liveclient.Config{Client: "c", Endpoints: urls, Options: map[string]string{"fenced": fenced}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestMutexAnswersAndTokens walks two clients through two holds, fenced
// and not: ErrBusy while held, ErrNotHolder for a non-holder, the create
// revision as a token that grows from one holder to the next when fenced,
// 0 when not.
func TestMutexAnswersAndTokens(t *testing.T) {
	urls := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, fenced := range []string{"true", "false"} {
		a, b := openLocker(t, urls, fenced), openLocker(t, urls, fenced)
		r := "r-fenced-" + fenced
		ta, err := a.Acquire(ctx, r, time.Second)
		if err != nil {
			t.Fatalf("fenced=%s: a's acquire: %v", fenced, err)
		}
		if _, err := b.Acquire(ctx, r, time.Second); !errors.Is(err, liveclient.ErrBusy) {
			t.Fatalf("fenced=%s: b's acquire of a held lock: %v, want ErrBusy", fenced, err)
		}
		if err := a.Renew(ctx, r, ta, time.Second); err != nil {
			t.Fatalf("fenced=%s: a's renew: %v", fenced, err)
		}
		if err := b.Renew(ctx, r, 0, time.Second); !errors.Is(err, liveclient.ErrNotHolder) {
			t.Fatalf("fenced=%s: b's renew: %v, want ErrNotHolder", fenced, err)
		}
		if err := a.Release(ctx, r, ta); err != nil {
			t.Fatalf("fenced=%s: a's release: %v", fenced, err)
		}
		tb, err := b.Acquire(ctx, r, time.Second)
		if err != nil {
			t.Fatalf("fenced=%s: b's acquire after a's release: %v", fenced, err)
		}
		if fenced == "true" && (ta == 0 || tb <= ta) {
			t.Errorf("fenced: tokens a=%d then b=%d, want growing revisions", ta, tb)
		}
		if fenced == "false" && (ta != 0 || tb != 0) {
			t.Errorf("unfenced: tokens a=%d b=%d, want 0 (the harness numbers grants)", ta, tb)
		}
	}
}

// TestSilentHolderLosesTheLock is Kleppmann's case inside one process: a
// holder whose keep-alives stop (as a paused process's do) loses its key
// with its lease; the next holder gets a higher token, and the old
// holder's renew and release are ErrNotHolder.
func TestSilentHolderLosesTheLock(t *testing.T) {
	urls := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := openLocker(t, urls, "true"), openLocker(t, urls, "true")
	ta, err := a.Acquire(ctx, "r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.held["r"].s.Orphan() // no more keep-alives
	var tb uint64
	for {
		tb, err = b.Acquire(ctx, "r", time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, liveclient.ErrBusy) || ctx.Err() != nil {
			t.Fatalf("b's acquire after a's lease: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tb <= ta {
		t.Errorf("tokens a=%d then b=%d, want b's higher", ta, tb)
	}
	if err := a.Renew(ctx, "r", ta, time.Second); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Errorf("a's renew after its lease ended: %v, want ErrNotHolder", err)
	}
	if err := a.Release(ctx, "r", ta); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Errorf("a's release after its lease ended: %v, want ErrNotHolder", err)
	}
}

func TestLeaseSecondsRoundsUp(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want int64
	}{{time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {2 * time.Second, 2}, {0, 1}} {
		if got := LeaseSeconds(c.ttl); got != c.want {
			t.Errorf("LeaseSeconds(%v) = %d, want %d", c.ttl, got, c.want)
		}
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	if _, err := open(liveclient.Config{Endpoints: []string{"127.0.0.1:1"}, Options: map[string]string{"fenced": "maybe"}}); err == nil {
		t.Error("fenced=maybe: no error")
	}
	if _, err := open(liveclient.Config{}); err == nil {
		t.Error("no endpoints: no error")
	}
}
