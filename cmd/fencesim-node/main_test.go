package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/internal/freeport"
	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/process"
)

// childEnv makes the test binary run the command instead of the tests, so
// that a test can run nodes as processes of their own and SIGKILL them.
const childEnv = "FENCESIM_TEST_CHILD_NODE" // outside FENCESIM_NODE_*, whose unknown names the node refuses

func TestMain(m *testing.M) {
	if svcmain.AsChild(childEnv, main) {
		return
	}
	os.Exit(m.Run())
}

// TestConfigErrors: a bad value exits 2 with a message naming the flag or
// variable, the value and what is allowed, and creates nothing.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir() + "/data"
	peers := "0=127.0.0.1:7000=127.0.0.1:8000,1=127.0.0.1:7001=127.0.0.1:8001,2=127.0.0.1:7002=127.0.0.1:8002"
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "FENCESIM_NODE_ID (or -id) is required"},
		{[]string{"-id", "0", "-peers", peers}, nil, "FENCESIM_NODE_DATA (or -data) is required"},
		{[]string{"-id", "0", "-data", dir}, nil, "FENCESIM_NODE_PEERS (or -peers) is required"},
		{[]string{"-id", "3", "-data", dir, "-peers", peers}, nil, "FENCESIM_NODE_ID (or -id) 3 is not one of the ids"},
		{[]string{"-id", "x"}, nil, `-id="x": must be an integer in 0..1048575`},
		{[]string{"-id", "0", "-data", dir}, map[string]string{"FENCESIM_NODE_PEERS": "0=127.0.0.1:7000=127.0.0.1:8000"}, `FENCESIM_NODE_PEERS="0=127.0.0.1:7000=127.0.0.1:8000": has 1 replicas; a group has 3 or 5`},
		{[]string{"-id", "0", "-data", dir, "-peers", "0=a=b"}, nil, `entry "0=a=b": the Raft address must be host:port`},
		{[]string{"-id", "0", "-data", dir, "-peers", "0=127.0.0.1:7000"}, nil, `must be id=raft-host:port=http-host:port`},
		{[]string{"-id", "0", "-data", dir, "-peers", strings.Replace(peers, "1=", "0=", 1)}, nil, "id 0 appears twice"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-listen", "nohost"}, nil, `-listen="nohost": must be host:port`},
		{[]string{"-dev-cluster", "4"}, nil, `-dev-cluster="4": must be 0, 3 or 5`},
		{[]string{"-dev-cluster", "3", "-id", "0"}, nil, "leave -id, -peers, -listen and -peer-listen unset"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_REQUEST_TIMEOUT": "2"}, `FENCESIM_NODE_REQUEST_TIMEOUT="2": must be a duration in 10ms..1m0s`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-log-format", "xml"}, nil, `-log-format="xml": must be text or json`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_SYNC_WRITES": "maybe"}, `FENCESIM_NODE_SYNC_WRITES="maybe": must be true or false`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_ADMISSION": "vegas"}, `FENCESIM_NODE_ADMISSION="vegas": must be one of gradient, aimd, static`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_TOKEN_OFFSET": "-1"}, `FENCESIM_NODE_TOKEN_OFFSET="-1": must be an integer in 0..18446742974197923840`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_SNAPSHOT_ENTRIES": "-1"}, `FENCESIM_NODE_SNAPSHOT_ENTRIES="-1": must be an integer in 0..100000000`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-snapshot-keep", "1e9"}, nil, `-snapshot-keep="1e9": must be an integer in 0..10000000`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-snapshot-entries", "0"}, map[string]string{"FENCESIM_NODE_SNAPSHOT_BYTES": "0"}, "are both 0: the Raft log would grow for ever"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, nil, "the replicas must authenticate each other: set FENCESIM_NODE_PEER_CA_FILE"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-peer-ca-file", "ca.pem"}, nil, "go together: set all three"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers, "-peer-ca-file", "/nonexistent/ca", "-peer-cert-file", "c", "-peer-key-file", "k"}, nil, "peer TLS (FENCESIM_NODE_PEER_*_FILE): peer CA file"},
		{[]string{"-id", "0", "-data", dir, "-peers", strings.ReplaceAll(peers, "127.0.0.1:700", "10.0.0.1:700"), "-peer-insecure", "true"}, nil, `binds loopback only, but the Raft address "10.0.0.1:7000" is not a loopback address`},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_TOKEN_KEY_FILE": "/nonexistent/key"}, "FENCESIM_NODE_TOKEN_KEY_FILE"},
		{[]string{"-id", "0", "-data", dir, "-peers", peers}, map[string]string{"FENCESIM_NODE_PEERZ": "x"}, "unknown variable FENCESIM_NODE_PEERZ"},
		{[]string{"-id", "0", "-data", dir, "-peers", "0=127.0.0.1:7000=127.0.0.1:8000,1=127.0.0.1:7000=127.0.0.1:8001,2=127.0.0.1:7002=127.0.0.1:8002"}, nil, `the Raft address 127.0.0.1:7000 appears twice`},
		{[]string{"-bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		var out bytes.Buffer
		code := run(context.Background(), c.args, c.env, &out, &out, nil)
		if code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("args %q env %v: exit %d, output %q; want exit 2 and %q", c.args, c.env, code, out.String(), c.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a rejected configuration created the data directory (%v)", err)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, nil, &out, &out, nil); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), s.Env) || !strings.Contains(out.String(), "-"+s.Flag) {
			t.Errorf("-h does not list %s / -%s", s.Env, s.Flag)
		}
	}
}

// TestDevClusterDrains: -dev-cluster 3 serves a lock from one command and
// a signal (ctx ending) drains it to exit 0.
func TestDevClusterDrains(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls := make(chan []string, 1)
	done := make(chan int, 1)
	var stdout, logs syncBuffer
	go func() {
		done <- run(ctx, []string{"-dev-cluster", "3"}, nil, &stdout, &logs, func(u []string) { urls <- u })
	}()
	var us []string
	select {
	case us = <-urls:
	case code := <-done:
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("never served")
	}
	if !strings.Contains(stdout.String(), us[2]) {
		t.Fatalf("the addresses are not printed: %q", stdout.String())
	}
	cl := newClient(t, "dev", us)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	l, err := cl.Acquire(cctx, "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(cctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after the signal: %s", code, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("did not drain")
	}
	if !strings.Contains(logs.String(), "fencesim-node drained") {
		t.Fatalf("no drain in the log: %s", logs.String())
	}
}

func newClient(t testing.TB, name string, urls []string) *lockclient.Client {
	t.Helper()
	cl, err := lockclient.New(lockclient.Config{Name: name, Endpoints: urls, RequestTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// syncBuffer is a stderr that tests may read while run writes.
type syncBuffer = svcmain.SyncBuffer

// procCluster is three nodes, each a child process (this test binary
// re-executed as the command) on fixed loopback ports with its own data
// directory, so that a test can SIGKILL one and restart it on its data.
type procCluster struct {
	t     *testing.T
	peers string
	urls  []string
	dirs  []string
	procs []*exec.Cmd
	logs  []*syncBuffer
	// args are added to every node's command line.
	args []string
	tls  [][]string // each node's peer TLS flags
}

// freePort is a free loopback host:port for a child to bind, drawn where
// no connection is given a local port (internal/freeport): a node
// restarted on it must bind it again.
func freePort(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newProcCluster(t *testing.T, args ...string) *procCluster {
	pc := &procCluster{t: t, procs: make([]*exec.Cmd, 3), logs: make([]*syncBuffer, 3), args: args}
	var entries []string
	for i := range 3 {
		h := freePort(t)
		entries = append(entries, fmt.Sprintf("%d=%s=%s", i, freePort(t), h))
		pc.urls = append(pc.urls, "http://"+h)
		pc.dirs = append(pc.dirs, t.TempDir())
	}
	pc.peers = strings.Join(entries, ",")
	// The replicas authenticate each other (mutual TLS), as deployed.
	tdir := t.TempDir()
	files, err := peertls.DevFiles(tdir, []process.NodeID{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f := files[process.NodeID(i)]
		pc.tls = append(pc.tls, []string{"-peer-ca-file", f.CA, "-peer-cert-file", f.Cert, "-peer-key-file", f.Key})
	}
	t.Cleanup(func() {
		for i := range pc.procs {
			pc.kill(i)
		}
	})
	for i := range 3 {
		pc.start(i)
	}
	return pc
}

// start runs node i (again, on its data directory) and waits until its
// API answers.
func (pc *procCluster) start(i int) {
	pc.t.Helper()
	args := append([]string{"-id", fmt.Sprint(i), "-data", pc.dirs[i], "-peers", pc.peers}, pc.tls[i]...)
	cmd := svcmain.Child(childEnv, append(args, pc.args...)...)
	pc.logs[i] = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = pc.logs[i], pc.logs[i]
	if err := cmd.Start(); err != nil {
		pc.t.Fatal(err)
	}
	pc.procs[i] = cmd
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(pc.urls[i] + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(end) {
			pc.t.Fatalf("node %d never served: %s", i, pc.logs[i].String())
		}
	}
}

// kill SIGKILLs node i: no drain, nothing flushed but what it synced.
func (pc *procCluster) kill(i int) {
	if cmd := pc.procs[i]; cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		pc.procs[i] = nil
	}
}

// term SIGTERMs node i and waits (at most 10s) for it to drain and exit
// 0, which it must.
func (pc *procCluster) term(i int) {
	pc.t.Helper()
	cmd := pc.procs[i]
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		pc.procs[i] = nil
		if err != nil {
			pc.t.Fatalf("node %d after SIGTERM: %v: %s", i, err, pc.logs[i].String())
		}
	case <-time.After(10 * time.Second):
		pc.t.Fatalf("node %d did not exit within 10s of SIGTERM: %s", i, pc.logs[i].String())
	}
}

// leader waits (at most 10s) for a live node whose GET answers 200 (a
// follower redirects) and returns it.
func (pc *procCluster) leader() int {
	pc.t.Helper()
	noRedirect := &http.Client{Timeout: time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for i, u := range pc.urls {
			if pc.procs[i] == nil {
				continue
			}
			if resp, err := noRedirect.Get(u + "/v1/locks/probe"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return i
				}
			}
		}
	}
	pc.t.Fatal("no leader within 10s")
	return -1
}

// TestLeaderKill9AndRestart: grants are acknowledged; the leader is
// SIGKILLed while a client cycles a lock; the survivors elect a leader and
// the killed node restarts on its data directory; then the new leader is
// killed too, so that the restarted node's log is needed for every quorum.
// Every acknowledged grant is still its client's (a rival is refused, the
// owner renews and releases it), and tokens only grow.
func TestLeaderKill9AndRestart(t *testing.T) {
	pc := newProcCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	type grant struct {
		client *lockclient.Client
		lock   *lockclient.Lock
	}
	var held []grant
	for i := range 4 {
		cl := newClient(t, fmt.Sprintf("owner-%d", i), pc.urls)
		l, err := cl.TryAcquire(ctx, fmt.Sprintf("r%d", i), 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, grant{cl, l})
	}

	// A client cycles a lock through both kills: every grant it is told
	// of has a token above the previous one.
	var mu sync.Mutex
	var cycleTokens []uint64
	var cycleErr error
	stop := make(chan struct{})
	cycled := make(chan struct{})
	go func() {
		defer close(cycled)
		cl := newClient(t, "cycler", pc.urls)
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := cl.Acquire(ctx, "hot", 15*time.Second)
			if err != nil {
				mu.Lock()
				cycleErr = err
				mu.Unlock()
				return
			}
			mu.Lock()
			cycleTokens = append(cycleTokens, l.Token())
			mu.Unlock()
			// A release whose reply is lost in a kill is retried and may
			// find the lease already released (not-holder): fine.
			if err := l.Release(ctx); err != nil && !errors.Is(err, lockclient.ErrNotHolder) {
				mu.Lock()
				cycleErr = err
				mu.Unlock()
				return
			}
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(cycleTokens)
	}
	waitCycles := func(n int) {
		for end := time.Now().Add(8 * time.Second); count() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the cycler made %d cycles, want %d (err %v)", count(), n, cycleErr)
			}
		}
	}

	waitCycles(5)
	first := pc.leader()
	pc.kill(first)
	second := pc.leader()
	waitCycles(count() + 5)
	pc.start(first)
	time.Sleep(300 * time.Millisecond) // let the restarted node catch up
	pc.kill(second)
	third := pc.leader()
	if third == second {
		t.Fatalf("node %d leads though killed", second)
	}
	waitCycles(count() + 5)
	close(stop)
	<-cycled
	if cycleErr != nil {
		t.Fatalf("cycler: %v", cycleErr)
	}
	for i := 1; i < len(cycleTokens); i++ {
		if cycleTokens[i] <= cycleTokens[i-1] {
			t.Fatalf("cycle tokens do not grow: %v", cycleTokens)
		}
	}

	rival := newClient(t, "rival", pc.urls)
	for i, g := range held {
		res := fmt.Sprintf("r%d", i)
		if _, err := rival.TryAcquire(ctx, res, time.Second); !errors.Is(err, lockclient.ErrHeld) {
			t.Fatalf("a rival acquiring %s, granted to %s with token %d: %v, want held", res, g.client.Name(), g.lock.Token(), err)
		}
		if err := g.lock.Release(ctx); err != nil {
			t.Fatalf("%s releasing %s (token %d): %v", g.client.Name(), res, g.lock.Token(), err)
		}
	}
	last := cycleTokens[len(cycleTokens)-1]
	l, err := rival.TryAcquire(ctx, "r0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= last {
		t.Fatalf("token %d after %d", l.Token(), last)
	}
	t.Logf("leaders %d → %d → %d; %d cycles, tokens %d..%d", first, second, third, len(cycleTokens), cycleTokens[0], last)
}

// TestAdmissionReachesTheLimiter: -admission / FENCESIM_NODE_ADMISSION
// picks the API's algorithm, gradient by default.
func TestAdmissionReachesTheLimiter(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "gradient"},
		{nil, map[string]string{"FENCESIM_NODE_ADMISSION": "static"}, "static"},
		{[]string{"-admission", "aimd"}, map[string]string{"FENCESIM_NODE_ADMISSION": "static"}, "aimd"},
	} {
		cfg, err := loadConfig(append([]string{"-dev-cluster", "3"}, c.args...), c.env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := apiConfig(cfg, nil).Limiter.Algorithm; got != c.want {
			t.Errorf("args %q env %v: algorithm %q, want %q", c.args, c.env, got, c.want)
		}
	}
}

// TestTokenOffsetMismatchExits2: a node whose data directory was created
// with another token offset (here: a log from before offsets, offset 0)
// refuses to start with exit 2, naming the variable to fix.
func TestTokenOffsetMismatchExits2(t *testing.T) {
	dir := t.TempDir()
	d, err := filedisk.Open(dir, filedisk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Write("raft/hardstate", []byte{1})
	d.Sync()
	d.Close()
	peers := "0=127.0.0.1:7000=127.0.0.1:8000,1=127.0.0.1:7001=127.0.0.1:8001,2=127.0.0.1:7002=127.0.0.1:8002"
	var out bytes.Buffer
	code := run(context.Background(), []string{"-id", "0", "-data", dir, "-peers", peers, "-listen", "127.0.0.1:0", "-peer-listen", "127.0.0.1:0", "-peer-insecure", "true"},
		map[string]string{"FENCESIM_NODE_TOKEN_OFFSET": "4294967296"}, &out, &out, nil)
	if code != 2 || !strings.Contains(out.String(), "FENCESIM_NODE_TOKEN_OFFSET") || !strings.Contains(out.String(), "brand-new data directory") {
		t.Fatalf("exit %d, output %q; want exit 2 naming FENCESIM_NODE_TOKEN_OFFSET", code, out.String())
	}
}
