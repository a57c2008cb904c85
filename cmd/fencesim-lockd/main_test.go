package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/fencesim/fencesim/internal/httpx/httpxtest"
	"github.com/fencesim/fencesim/internal/redistest"
	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	"github.com/fencesim/fencesim/lockapi/lockclient"
)

// syncBuffer is a stderr that tests may read while run writes.
type syncBuffer = svcmain.SyncBuffer

func TestBadConfigExits2NamingTheVariable(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"FENCESIM_TTL_MIN": "soon"}, []string{`FENCESIM_TTL_MIN="soon"`, "not a duration"}},
		{map[string]string{"FENCESIM_TTL_MIN": "2s", "FENCESIM_TTL_MAX": "1s"}, []string{"FENCESIM_TTL_MAX=1s", "FENCESIM_TTL_MIN (2s)..24h"}},
		{map[string]string{"FENCESIM_MAX_INFLIGHT": "0"}, []string{"FENCESIM_MAX_INFLIGHT=0", "1..100000"}},
		{map[string]string{"FENCESIM_MAX_INFLIGHT": "lots"}, []string{`FENCESIM_MAX_INFLIGHT="lots"`, "not a int"}},
		{map[string]string{"FENCESIM_MIN_INFLIGHT": "500"}, []string{"FENCESIM_MIN_INFLIGHT=500", "FENCESIM_MAX_INFLIGHT (256)"}},
		{map[string]string{"FENCESIM_LISTEN": "7070"}, []string{"FENCESIM_LISTEN=7070", "host:port"}},
		{map[string]string{"FENCESIM_REDIS_ADDR": "redis"}, []string{"FENCESIM_REDIS_ADDR=redis", "host:port"}},
		{map[string]string{"FENCESIM_DRAIN_DELAY": "20s"}, []string{"FENCESIM_DRAIN_DELAY=20s", "FENCESIM_DRAIN_TIMEOUT (10s)"}},
		{map[string]string{"FENCESIM_REQUIRE_DURABLE": "maybe"}, []string{"FENCESIM_REQUIRE_DURABLE", "true or false"}},
		{map[string]string{"FENCESIM_KEY_PREFIX": "a b"}, []string{"FENCESIM_KEY_PREFIX=a b", "[A-Za-z0-9._:-]"}},
		{map[string]string{"FENCESIM_TTL_MAXX": "1m"}, []string{"FENCESIM_TTL_MAXX", "unknown variable"}},
		{map[string]string{"FENCESIM_LOG_FORMAT": "xml"}, []string{"FENCESIM_LOG_FORMAT=xml", "text or json"}},
		{map[string]string{"FENCESIM_ADMISSION": "vegas"}, []string{"FENCESIM_ADMISSION=vegas", "gradient, aimd, static"}},
		{map[string]string{"FENCESIM_TEST_HOOKS": "on"}, []string{"FENCESIM_TEST_HOOKS=on", "must be 0 or 1"}},
		{map[string]string{"FENCESIM_REDIS_PIPELINES": "-1"}, []string{"FENCESIM_REDIS_PIPELINES=-1", "0..64"}},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		if code := run(context.Background(), nil, c.env, &stderr, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr:\n%s", c.env, code, stderr.String())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.env, w, stderr.String())
			}
		}
	}
}

// TestAdmissionReachesTheLimiter: FENCESIM_ADMISSION picks the server's
// algorithm, gradient by default.
func TestAdmissionReachesTheLimiter(t *testing.T) {
	for env, want := range map[string]string{"": "gradient", "aimd": "aimd", "static": "static"} {
		e := map[string]string{}
		if env != "" {
			e["FENCESIM_ADMISSION"] = env
		}
		c, err := loadConfig(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.serverConfig().Limiter.Algorithm; got != want {
			t.Errorf("FENCESIM_ADMISSION=%q: algorithm %q, want %q", env, got, want)
		}
	}
}

// TestAdmissionFloorIsThePool: the admission limit's floor is the Redis
// pool's size unless FENCESIM_MIN_INFLIGHT sets it, and never above the
// maximum.
func TestAdmissionFloorIsThePool(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, 64},
		{map[string]string{"FENCESIM_REDIS_POOL_SIZE": "100"}, 100},
		{map[string]string{"FENCESIM_REDIS_POOL_SIZE": "500"}, 256},
		{map[string]string{"FENCESIM_MIN_INFLIGHT": "16"}, 16},
	} {
		cfg, err := loadConfig(c.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.serverConfig().Limiter.Min; got != c.want {
			t.Errorf("%v: admission floor %d, want %d", c.env, got, c.want)
		}
	}
}

func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, nil, &out, nil); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	for v := range varNames() {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h lacks %s", v)
		}
	}
	if code := run(context.Background(), []string{"-listen=x"}, nil, &out, nil); code != 2 {
		t.Errorf("an argument: exit %d, want 2", code)
	}
}

// instance runs fencesim-lockd in-process; stop drains it and returns its
// exit code.
func instance(t *testing.T, env map[string]string) (base string, stop func() int, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	env["FENCESIM_LISTEN"] = "127.0.0.1:0"
	addr := make(chan string, 1)
	code := make(chan int, 1)
	stderr = &syncBuffer{}
	go func() { code <- run(ctx, nil, env, stderr, func(a string) { addr <- a }) }()
	select {
	case a := <-addr:
		base = "http://" + a
	case c := <-code:
		t.Fatalf("exited %d before serving:\n%s", c, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("not serving after 10s")
	}
	var once sync.Once
	exit := -1
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case exit = <-code:
			case <-time.After(15 * time.Second):
				t.Error("did not drain within 15s")
			}
		})
		return exit
	}
	t.Cleanup(func() { stop() })
	return base, stop, stderr
}

// twoInstances: two fencesim-lockd over one Redis; a client using both
// sees strictly increasing tokens, and each drains with exit 0.
func twoInstances(t *testing.T, redisAddr string) {
	env := func() map[string]string {
		return map[string]string{"FENCESIM_REDIS_ADDR": redisAddr, "FENCESIM_TTL_MIN": "10ms"}
	}
	a, stopA, _ := instance(t, env())
	b, stopB, _ := instance(t, env())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ca, err := lockclient.New(lockclient.Config{Endpoints: []string{a}, Name: "via-a"})
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := lockclient.New(lockclient.Config{Endpoints: []string{b}, Name: "via-b"})
	var last uint64
	for i := range 30 {
		c := []*lockclient.Client{ca, cb}[i%2]
		l, err := c.Acquire(ctx, "invoice-42", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("cycle %d via %s: token %d after %d", i, c.Name(), l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if code := stopA(); code != 0 {
		t.Fatalf("instance a exit %d after drain", code)
	}
	// b still serves after a is gone: nothing lived in a.
	l, err := cb.Acquire(ctx, "invoice-42", 2*time.Second)
	if err != nil || l.Token() <= last {
		t.Fatalf("after a left: %v token %d, want > %d", err, l.Token(), last)
	}
	l.Release(ctx)
	if code := stopB(); code != 0 {
		t.Fatalf("instance b exit %d after drain", code)
	}
}

func TestTwoInstancesMiniredis(t *testing.T) {
	twoInstances(t, miniredis.RunT(t).Addr())
}

func TestTwoInstancesRealRedis(t *testing.T) {
	twoInstances(t, redistest.Start(t).Addr)
}

// TestEmbeddedRedis: with no FENCESIM_REDIS_ADDR it serves from an
// embedded Redis whose leases expire in real time, and says loudly that
// nothing is durable.
func TestEmbeddedRedis(t *testing.T) {
	base, stop, stderr := instance(t, map[string]string{})
	// A lease nobody renews (a raw request, not the client)...
	r := lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"gone","ttl_ms":100,"request_id":"q"}`)
	if r.Status != 200 {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	// ...expires in real time, so another client gets the lock soon.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	b, _ := lockclient.New(lockclient.Config{Endpoints: []string{base}, Name: "b"})
	lb, err := b.Acquire(ctx, "r", time.Second)
	if err != nil {
		t.Fatalf("the 100ms lease did not expire: %v", err)
	}
	if lb.Token() != 2 {
		t.Fatalf("token %d, want 2", lb.Token())
	}
	lb.Release(ctx)
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"embedded in-memory Redis", "FENCE TOKENS ARE NOT DURABLE"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, stderr.String())
		}
	}
}

// TestClockHookOnlyWithTestHooks: POST /test/clock exists only with
// FENCESIM_TEST_HOOKS=1, where it validates and sets the instance's clock;
// lockd has no disk of its own, so no /test/disk.
func TestClockHookOnlyWithTestHooks(t *testing.T) {
	off, _, _ := instance(t, map[string]string{})
	if r := lockapitest.Do(t, "POST", off+"/test/clock", `{"drift_ppm":1000}`); r.Status != 404 {
		t.Errorf("POST /test/clock without test hooks = %d %s, want 404", r.Status, r.Body)
	}
	on, _, _ := instance(t, map[string]string{"FENCESIM_TEST_HOOKS": "1"})
	if r := lockapitest.Do(t, "POST", on+"/test/clock", `{"offset_ms":-2000,"drift_ppm":300000}`); r.Status != 200 || !strings.Contains(r.Body, `"drift_ppm":300000`) {
		t.Errorf("POST /test/clock = %d %s, want 200", r.Status, r.Body)
	}
	if r := lockapitest.Do(t, "POST", on+"/test/clock", `{"offset_ms":"soon"}`); r.Status != 400 || !strings.Contains(r.Body, `"field":"body"`) {
		t.Errorf("POST /test/clock with a string = %d %s, want 400", r.Status, r.Body)
	}
	if r := lockapitest.Do(t, "POST", on+"/test/disk", `{"sync_delay_ms":1}`); r.Status != 404 {
		t.Errorf("POST /test/disk on lockd = %d %s, want 404", r.Status, r.Body)
	}
	// The lock API still serves with the adjusted clock under its limiter.
	if r := lockapitest.Do(t, "POST", on+"/v1/locks/r/acquire", `{"client":"c","ttl_ms":1000,"request_id":"1"}`); r.Status != 200 {
		t.Errorf("acquire = %d %s", r.Status, r.Body)
	}
}

func TestRequireDurableRefusesMiniredis(t *testing.T) {
	var stderr bytes.Buffer
	env := map[string]string{"FENCESIM_REDIS_ADDR": miniredis.RunT(t).Addr(), "FENCESIM_REQUIRE_DURABLE": "true", "FENCESIM_LISTEN": "127.0.0.1:0"}
	if code := run(context.Background(), nil, env, &stderr, nil); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "NOT durable") && !strings.Contains(stderr.String(), "do NOT survive") {
		t.Fatalf("stderr does not say why:\n%s", stderr.String())
	}
}

// TestSIGTERMDrains runs the real binary entry point (this test binary
// re-executed as main) and sends it SIGTERM: it drains and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	if os.Getenv("FENCESIM_LOCKD_AS_MAIN") == "1" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMain$")
	cmd.Env = append(os.Environ(), "FENCESIM_LOCKD_AS_MAIN=1", "FENCESIM_LISTEN=127.0.0.1:0", "FENCESIM_DRAIN_DELAY=50ms")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "fencesim-lockd serving"); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("exited (%v) before serving:\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("not serving after 10s:\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit 10s after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "fencesim-lockd drained") {
		t.Fatalf("no drain in the log:\n%s", stderr.String())
	}
}

// TestMain doubles as the program's main when re-executed by
// TestSIGTERMDrains.
func TestMain(m *testing.M) {
	if os.Getenv("FENCESIM_LOCKD_AS_MAIN") == "1" {
		os.Unsetenv("FENCESIM_LOCKD_AS_MAIN")
		os.Args = os.Args[:1]
		main()
		return
	}
	os.Exit(m.Run())
}

// TestStalledBodiesHoldNoSlot: 64 acquires that send their headers and
// never their body, against a static limit of 16 requests in flight, do
// not make lockd answer 429 to a client that sends its body.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	base, _, _ := instance(t, map[string]string{"FENCESIM_ADMISSION": "static", "FENCESIM_MIN_INFLIGHT": "16", "FENCESIM_MAX_INFLIGHT": "16"})
	httpxtest.StallBodies(t, base, "POST", "/v1/locks/r/acquire", 64)
	resp, err := http.Post(base+"/v1/locks/good/acquire", "application/json", strings.NewReader(`{"client":"good","ttl_ms":1000,"request_id":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a well-behaved acquire beside 64 stalled bodies: %d", resp.StatusCode)
	}
}

// TestClientTokens: with FENCESIM_CLIENT_TOKENS_FILE a request without a
// known bearer token is 401, and a client acts only under its identity.
func TestClientTokens(t *testing.T) {
	p := t.TempDir() + "/clients"
	if err := os.WriteFile(p, []byte("alice alice-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, _ := instance(t, map[string]string{"FENCESIM_CLIENT_TOKENS_FILE": p})
	post := func(bearer, body string) int {
		req, _ := http.NewRequest("POST", base+"/v1/locks/r/acquire", strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("", `{"client":"alice","ttl_ms":1000,"request_id":"1"}`); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := post("alice-0123456789abcdef", `{"client":"bob","ttl_ms":1000,"request_id":"1"}`); code != 403 {
		t.Errorf("alice acquiring as bob: %d, want 403", code)
	}
	if code := post("alice-0123456789abcdef", `{"client":"alice","ttl_ms":1000,"request_id":"1"}`); code != 200 {
		t.Errorf("alice acquiring as alice: %d, want 200", code)
	}
}
