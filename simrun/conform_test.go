package simrun

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// memServer serves lockapitest's in-memory backend over HTTP; with
// realTime its leases age with the wall clock (as a real server's do),
// else never.
func memServer(t *testing.T, realTime bool) string {
	m := lockapitest.NewMem()
	if realTime {
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					m.Advance(5 * time.Millisecond)
				}
			}
		}()
	}
	_, url := lockapitest.Serve(t, m, lockapi.Config{})
	return url
}

// TestConform: simrun conform runs the contract against a server by URL:
// a correct one passes every case it can run (the large-token case needs
// a settable counter or a token offset, and is listed as not run); one
// whose leases never expire fails the expiry case, by name and reason.
func TestConform(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"conform", "-url", memServer(t, true)}, &out, &errb); code != exitPass {
		t.Fatalf("exit %d, want 0:\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"PASS     grant-held-renew-release", "PASS     expiry", "NOT RUN  tokens-beyond-2^53", "conform: 6 passed, 0 failed, 1 not run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"conform", "-url", memServer(t, false)}, &out, &errb); code != exitViolation {
		t.Fatalf("leases that never expire: exit %d, want 1:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "FAIL     expiry") || !strings.Contains(out.String(), "1 failed") {
		t.Errorf("the expiry case is not reported failed:\n%s", out.String())
	}
}

func TestConformBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"conform"}, "must be http://host:port"},
		{[]string{"conform", "-url", "ftp://x"}, "must be http://host:port"},
		{[]string{"conform", "-url", "http://127.0.0.1:1/v1"}, "base URL"},
		{[]string{"conform", "-url", "http://127.0.0.1:1"}, "cannot reach"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
