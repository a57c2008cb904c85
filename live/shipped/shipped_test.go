package shipped

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// serve serves the API over m behind wrap on a free loopback port.
func serve(t *testing.T, m lockapi.Backend, wrap func(http.Handler) http.Handler) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: wrap(lockapi.NewServer(m, lockapi.Config{}).Handler()), ReadHeaderTimeout: time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func open(t *testing.T, name, base string) liveclient.Locker {
	l, err := Open(liveclient.Config{Client: name, Endpoints: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// unknown reports whether err is an unknown outcome: an error that is
// neither refusal.
func unknown(err error) bool {
	return err != nil && !errors.Is(err, liveclient.ErrBusy) && !errors.Is(err, liveclient.ErrNotHolder)
}

// TestAcquireRenewRelease: grants, busy, a renewal answered by the
// client's own automatic renewal, and a release.
func TestAcquireRenewRelease(t *testing.T) {
	m := lockapitest.NewMem()
	base := serve(t, m, func(h http.Handler) http.Handler { return h })
	a, b := open(t, "a", base), open(t, "b", base)
	tok, err := a.Acquire(ctxT(t, 5*time.Second), "r", 600*time.Millisecond)
	if err != nil || tok == 0 {
		t.Fatalf("acquire: %d, %v", tok, err)
	}
	if _, err := b.Acquire(ctxT(t, 5*time.Second), "r", time.Second); !errors.Is(err, liveclient.ErrBusy) {
		t.Fatalf("second client: %v, want ErrBusy", err)
	}
	start := time.Now()
	if err := a.Renew(ctxT(t, 5*time.Second), "r", tok, 600*time.Millisecond); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Errorf("renew answered after %v: the next automatic renewal is due within TTL/3", d)
	}
	if err := a.Release(ctxT(t, 5*time.Second), "r", tok); err != nil {
		t.Fatalf("release: %v", err)
	}
	if st, _ := m.Get(context.Background(), "r"); st.Held {
		t.Fatalf("state %+v after release", st)
	}
	if err := a.Release(ctxT(t, time.Second), "r", tok); !unknown(err) {
		t.Fatalf("release of a lock it no longer has: %v, want an unknown outcome", err)
	}
}

// TestExpiredLeaseAnswersNotHolder: once the service expired the lease,
// the renewal and the release are answered not_holder.
func TestExpiredLeaseAnswersNotHolder(t *testing.T) {
	m := lockapitest.NewMem()
	base := serve(t, m, func(h http.Handler) http.Handler { return h })
	a := open(t, "a", base)
	tok, err := a.Acquire(ctxT(t, 5*time.Second), "r", 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Hour)
	if err := a.Renew(ctxT(t, 5*time.Second), "r", tok, 900*time.Millisecond); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("renew of an expired lease: %v, want ErrNotHolder", err)
	}
	if err := a.Release(ctxT(t, 5*time.Second), "r", tok); !errors.Is(err, liveclient.ErrNotHolder) {
		t.Fatalf("release of an expired lease: %v, want ErrNotHolder", err)
	}
}

// TestUnansweredIsUnknown: a renewal whose reply is cut is of unknown
// outcome, and so is "held" to an acquire one of whose attempts went
// unanswered (that attempt may have been granted).
func TestUnansweredIsUnknown(t *testing.T) {
	m := lockapitest.NewMem()
	var cutRenew, cutAcquire atomic.Bool
	base := serve(t, m, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/renew") && cutRenew.Load() ||
				strings.HasSuffix(req.URL.Path, "/acquire") && cutAcquire.CompareAndSwap(true, false) {
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close()
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	a, b := open(t, "a", base), open(t, "b", base)
	tok, err := a.Acquire(ctxT(t, 5*time.Second), "r", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cutRenew.Store(true)
	if err := a.Renew(ctxT(t, 5*time.Second), "r", tok, 3*time.Second); !unknown(err) {
		t.Fatalf("renewal with its reply cut: %v, want an unknown outcome", err)
	}
	cutAcquire.Store(true)
	if _, err := b.Acquire(ctxT(t, 5*time.Second), "r", time.Second); !unknown(err) {
		t.Fatalf("held after an unanswered attempt: %v, want an unknown outcome", err)
	}
	if cutAcquire.Load() {
		t.Fatal("no acquire attempt was cut")
	}
}
