package simrun

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/internal/freeport"
	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockd"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
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
		{[]string{"conform", "-url", "http://127.0.0.1:1", "-ready-wait", "100ms"}, "cannot reach"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// freeAddr is a free loopback host:port for a child to bind, drawn where
// no connection is given a local port (internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startProc starts argv until the test ends.
func startProc(t *testing.T, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered 200", url)
}

// pylockPath is the Python example's service, found before TestMain
// moves the tests into a temporary directory.
var pylockPath, _ = filepath.Abs("../examples/pylock/pylock.py")

// TestConformPythonExample: examples/pylock, a lock service in Python,
// passes the contract; with --no-fencing (no tokens) conform reports the
// cases that need them failed.
func TestConformPythonExample(t *testing.T) {
	_, rerr := exec.LookPath("redis-server")
	perr := exec.Command("/usr/bin/python3", "-c", "import redis").Run()
	if rerr != nil || perr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server (%v) and python3-redis (%v) are required in CI", rerr, perr)
		}
		t.Skip("skipping: needs redis-server and python3-redis (apt-get install redis-server python3-redis)")
	}
	raddr := freeAddr(t)
	_, rport, _ := net.SplitHostPort(raddr)
	startProc(t, "redis-server", "--bind", "127.0.0.1", "--port", rport, "--save", "", "--appendonly", "no")
	for i, flags := range [][]string{nil, {"--no-fencing"}} {
		addr := freeAddr(t)
		startProc(t, append([]string{"/usr/bin/python3", pylockPath, "--listen", addr, "--redis", raddr,
			"--prefix", fmt.Sprintf("t%d:", i)}, flags...)...)
		waitHTTP(t, "http://"+addr+"/readyz")
		var out, errb bytes.Buffer
		code := run([]string{"conform", "-url", "http://" + addr}, &out, &errb)
		if flags == nil && (code != exitPass || !strings.Contains(out.String(), "6 passed, 0 failed, 1 not run")) {
			t.Errorf("pylock: exit %d, want 0 with every case it can run passed:\n%s%s", code, out.String(), errb.String())
		}
		if flags != nil && (code != exitViolation || !strings.Contains(out.String(), "FAIL     grant-held-renew-release")) {
			t.Errorf("pylock --no-fencing: exit %d, want 1 with the token cases failed:\n%s%s", code, out.String(), errb.String())
		}
	}
}

// TestConformFencesimServers: fencesim-node (three replicas, tokens above
// 2^53 so that the large-token case runs too; a follower's redirect
// followed to the leader) and fencesim-lockd (two instances over one real
// redis-server) pass the contract through simrun conform, as their
// backends pass it in go test.
func TestConformFencesimServers(t *testing.T) {
	c := nodesvctest.New(t, 1<<53)
	lead := c.Leader()
	follower := (lead + 1) % 3
	var out, errb bytes.Buffer
	code := run([]string{"conform", "-url", c.Peers[follower].HTTP, "-global-tokens", "-remembers-grants", "-token-offset", fmt.Sprint(uint64(1 << 53))}, &out, &errb)
	if code != exitPass || !strings.Contains(out.String(), "7 passed, 0 failed, 0 not run") || !strings.Contains(errb.String(), "redirects to its leader") {
		t.Errorf("fencesim-node: exit %d:\n%s%s", code, out.String(), errb.String())
	}

	addr := redistest.Start(t).Addr
	var urls []string
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		_, u := lockapitest.Serve(t, lockd.New(rdb, lockd.Options{}), lockapi.Config{})
		urls = append(urls, u)
	}
	out.Reset()
	errb.Reset()
	// lockd remembers a request past its lease (issue 20): a stale retry
	// answers its first grant, ended.
	if code := run([]string{"conform", "-url", urls[0], "-url2", urls[1], "-remembers-grants"}, &out, &errb); code != exitPass || !strings.Contains(out.String(), "6 passed, 0 failed, 1 not run") {
		t.Errorf("fencesim-lockd: exit %d:\n%s%s", code, out.String(), errb.String())
	}
}

// TestConformProbeWaitsForALeader: a replica that knows no leader yet
// answers 503; conform asks again rather than testing it as it is (it
// would run every case against the redirects the replica answers once it
// learns its leader), and gives up with a clear error when 503 lasts.
func TestConformProbeWaitsForALeader(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 3 {
			http.Error(w, `{"error":"not_leader"}`, http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "http://127.0.0.1:9/"+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	leader, err := probe(srv.URL, "/v1/locks/x", 5*time.Second)
	if err != nil || leader != "http://127.0.0.1:9" || asked.Load() != 4 {
		t.Fatalf("probe = %q, %v after %d requests; want the leader named by the 4th answer", leader, err, asked.Load())
	}
	asked.Store(-1 << 30) // 503 for good
	if _, err := probe(srv.URL, "/v1/locks/x", 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "answers 503") {
		t.Fatalf("probe of a server that answers 503 for good: %v, want an error that says so", err)
	}
}

// TestConformProbeWaitsForAServerStarting: a server still starting does
// not listen yet; the probe asks again within its wait (as for a 503)
// instead of giving up at the first refused connection, and names the
// error when the server never comes.
func TestConformProbeWaitsForAServerStarting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens: connections are refused until the server starts
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // a leader: no redirect
	})}
	started := make(chan error, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		ln, err := net.Listen("tcp", addr)
		started <- err
		if err == nil {
			srv.Serve(ln)
		}
	})
	defer srv.Close()
	leader, err := probe("http://"+addr, "/v1/locks/x", 5*time.Second)
	if serr := <-started; serr != nil {
		t.Skipf("the port was taken meanwhile: %v", serr)
	}
	if err != nil || leader != "" {
		t.Fatalf("probe of a server that starts 300 ms late = %q, %v; want no redirect, no error", leader, err)
	}
	srv.Close()
	if _, err := probe("http://"+addr, "/v1/locks/x", 200*time.Millisecond); err == nil {
		t.Fatal("probe of a server that is gone: no error")
	}
}
