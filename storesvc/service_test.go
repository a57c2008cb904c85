package storesvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/httpx/httpxtest"
	"github.com/fencesim/fencesim/process"
)

// server is one Service on a loopback port.
type server struct {
	svc    *Service
	url    string
	served chan error
}

func start(t *testing.T, dir string, cfg Config) *server {
	t.Helper()
	cfg.DataDir = dir
	svc, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		svc.Close()
		t.Fatal(err)
	}
	s := &server{svc: svc, url: "http://" + l.Addr().String(), served: make(chan error, 1)}
	go func() { s.served <- svc.Serve(l) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop drains and closes the service (again: a no-op).
func (s *server) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.svc.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := s.svc.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, method, url string, header map[string]string, body string) answer {
	t.Helper()
	a, err := try(method, url, header, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// try is do for a goroutine other than the test's.
func try(method, url string, header map[string]string, body string) (answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &a.body); err != nil {
			return a, fmt.Errorf("%s %s: body %q: %w", method, url, b, err)
		}
	}
	return a, nil
}

// tryPut is put for a goroutine other than the test's: it sends the
// answer, or a status-0 answer whose raw text is the error.
func tryPut(base, key string, token uint64, value string, out chan<- answer) {
	a, err := try("PUT", base+"/v1/objects/"+key, map[string]string{HeaderToken: strconv.FormatUint(token, 10)}, value)
	if err != nil {
		a = answer{raw: err.Error()}
	}
	out <- a
}

func put(t *testing.T, base, key string, token uint64, value string) answer {
	t.Helper()
	return do(t, "PUT", base+"/v1/objects/"+key, map[string]string{HeaderToken: strconv.FormatUint(token, 10)}, value)
}

func get(t *testing.T, base, key string) answer {
	t.Helper()
	return do(t, "GET", base+"/v1/objects/"+key, nil, "")
}

// expect checks the status and the JSON fields given (tokens and values
// are strings in JSON).
func (a answer) expect(t *testing.T, status int, fields map[string]string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d; body %s", a.status, status, a.raw)
	}
	for k, want := range fields {
		if got, ok := a.body[k].(string); !ok || got != want {
			t.Fatalf("field %q is %#v, want %q; body %s", k, a.body[k], want, a.raw)
		}
	}
}

// TestFencing: writes are accepted iff their token is at least the key's
// T_max (equal is accepted: a holder writes many times); a stale one gets
// 409 with T_max in the body and the header and changes nothing.
func TestFencing(t *testing.T) {
	s := start(t, t.TempDir(), Config{})
	put(t, s.url, "acct-1", 5, "100").expect(t, 200, map[string]string{"key": "acct-1", "token": "5", "t_max": "5"})
	put(t, s.url, "acct-1", 5, "101\n").expect(t, 200, map[string]string{"token": "5", "t_max": "5"})
	put(t, s.url, "acct-1", 7, "-7").expect(t, 200, map[string]string{"token": "7", "t_max": "7"})
	a := put(t, s.url, "acct-1", 6, "999")
	a.expect(t, 409, map[string]string{"error": CodeStale, "key": "acct-1", "token": "6", "t_max": "7"})
	if h := a.header.Get(HeaderTokenMax); h != "7" {
		t.Fatalf("409's %s header is %q, want 7", HeaderTokenMax, h)
	}
	g := get(t, s.url, "acct-1")
	g.expect(t, 200, map[string]string{"key": "acct-1", "value": "-7", "token": "7", "t_max": "7"})
	if g.header.Get(HeaderToken) != "7" || g.header.Get(HeaderTokenMax) != "7" {
		t.Fatalf("GET headers %v", g.header)
	}
	// Keys are fenced independently.
	put(t, s.url, "acct-2", 1, "1").expect(t, 200, map[string]string{"t_max": "1"})
	get(t, s.url, "never-written").expect(t, 404, map[string]string{"error": CodeNotFound})

	m := scrape(t, s.url)
	for _, want := range []string{`fencesim_store_writes_total{result="accepted"} 4`, `fencesim_store_writes_total{result="stale"} 1`,
		`fencesim_store_reads_total{result="found"} 1`, `fencesim_store_reads_total{result="not_found"} 1`, "fencesim_store_keys 2",
		`fencesim_store_request_duration_seconds_count{op="write"} 5`} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	a := do(t, "GET", base+"/metrics", nil, "")
	if a.status != 200 {
		t.Fatalf("/metrics: %d", a.status)
	}
	return a.raw
}

// TestTokensBeyondDoublePrecision: tokens above 2^53, up to 2^64−1, cross
// the API exactly, as decimal strings both ways.
func TestTokensBeyondDoublePrecision(t *testing.T) {
	s := start(t, t.TempDir(), Config{})
	const p53plus1 = 1<<53 + 1
	const maxU64 = ^uint64(0)
	put(t, s.url, "k", p53plus1, "9223372036854775807").expect(t, 200, map[string]string{"token": "9007199254740993", "t_max": "9007199254740993"})
	put(t, s.url, "k", p53plus1-1, "1").expect(t, 409, map[string]string{"t_max": "9007199254740993"}) // a double would call these equal
	get(t, s.url, "k").expect(t, 200, map[string]string{"value": "9223372036854775807", "token": "9007199254740993"})
	put(t, s.url, "k", maxU64, "-9223372036854775808").expect(t, 200, map[string]string{"token": "18446744073709551615", "t_max": "18446744073709551615"})
	put(t, s.url, "k", maxU64-1, "0").expect(t, 409, map[string]string{"token": "18446744073709551614", "t_max": "18446744073709551615"})
	put(t, s.url, "k", maxU64, "3").expect(t, 200, nil)
	g := get(t, s.url, "k")
	g.expect(t, 200, map[string]string{"value": "3", "token": "18446744073709551615", "t_max": "18446744073709551615"})
	if g.header.Get(HeaderToken) != "18446744073709551615" {
		t.Fatalf("GET %s header %q", HeaderToken, g.header.Get(HeaderToken))
	}
}

// TestBadInput: every malformed request is a 400 naming what is wrong, or
// a 413, and none reaches the store.
func TestBadInput(t *testing.T) {
	s := start(t, t.TempDir(), Config{MaxBodyBytes: 32})
	url := s.url + "/v1/objects/k"
	cases := []struct {
		name, token, body string
		omitToken         bool
		status            int
		field             string
	}{
		{name: "missing token", omitToken: true, body: "1", status: 400, field: HeaderToken},
		{name: "empty token", token: "", body: "1", status: 400, field: HeaderToken},
		{name: "token 0", token: "0", body: "1", status: 400, field: HeaderToken},
		{name: "negative token", token: "-1", body: "1", status: 400, field: HeaderToken},
		{name: "signed token", token: "+5", body: "1", status: 400, field: HeaderToken},
		{name: "token over 2^64-1", token: "18446744073709551616", body: "1", status: 400, field: HeaderToken},
		{name: "hex token", token: "0x10", body: "1", status: 400, field: HeaderToken},
		{name: "float token", token: "1e3", body: "1", status: 400, field: HeaderToken},
		{name: "empty body", token: "1", body: "", status: 400, field: "body"},
		{name: "text body", token: "1", body: "hello", status: 400, field: "body"},
		{name: "json body", token: "1", body: `{"value":1}`, status: 400, field: "body"},
		{name: "value over int64", token: "1", body: "9223372036854775808", status: 400, field: "body"},
		{name: "body too large", token: "1", body: strings.Repeat("1", 33), status: 413, field: "body"},
		{name: "huge body", token: "1", body: strings.Repeat("x", 1<<20), status: 413, field: "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{HeaderToken: c.token}
			if c.omitToken {
				h = nil
			}
			a := do(t, "PUT", url, h, c.body)
			a.expect(t, c.status, map[string]string{"field": c.field})
			if !strings.Contains(a.body["message"].(string), c.field) {
				t.Fatalf("message %q does not name %s", a.body["message"], c.field)
			}
		})
	}
	// The header twice.
	req, _ := http.NewRequest("PUT", url, strings.NewReader("1"))
	req.Header.Add(HeaderToken, "1")
	req.Header.Add(HeaderToken, "2")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("two token headers: %d", resp.StatusCode)
	}
	for _, key := range []string{strings.Repeat("a", MaxKeyLen+1), "a%20b", "caf%C3%A9", "a:b"} {
		put(t, s.url, key, 1, "1").expect(t, 400, map[string]string{"field": "key"})
		get(t, s.url, key).expect(t, 400, map[string]string{"field": "key"})
	}
	put(t, s.url, strings.Repeat("a", MaxKeyLen), 1, "1").expect(t, 200, nil)
	get(t, s.url, "k").expect(t, 404, nil) // nothing bad was written
	if a := do(t, "POST", url, nil, "1"); a.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", a.status)
	}
	if m := scrape(t, s.url); !strings.Contains(m, `fencesim_store_errors_total{op="write",reason="too_large"} 2`) {
		t.Errorf("metrics lack the 413s:\n%s", m)
	}
}

// TestRestartKeepsState: a new process on the same data directory has
// every write's value and token and each key's T_max, so the stale writer
// is still refused; and its write numbering resumes past the old one's
// (the store drops a write numbered below the last it decided).
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir, Config{})
	put(t, s.url, "a", 10, "1").expect(t, 200, nil)
	put(t, s.url, "b", 3, "2").expect(t, 200, nil)
	put(t, s.url, "a", 12, "3").expect(t, 200, nil)
	s.stop(t)

	s = start(t, dir, Config{})
	get(t, s.url, "a").expect(t, 200, map[string]string{"value": "3", "token": "12", "t_max": "12"})
	get(t, s.url, "b").expect(t, 200, map[string]string{"value": "2", "token": "3", "t_max": "3"})
	put(t, s.url, "a", 11, "4").expect(t, 409, map[string]string{"t_max": "12"})
	put(t, s.url, "a", 12, "5").expect(t, 200, nil)
	put(t, s.url, "c", 1, "6").expect(t, 200, nil)
	s.stop(t)

	s = start(t, dir, Config{})
	get(t, s.url, "a").expect(t, 200, map[string]string{"value": "5", "token": "12"})
	get(t, s.url, "c").expect(t, 200, map[string]string{"value": "6", "token": "1"})
	if m := scrape(t, s.url); !strings.Contains(m, "fencesim_store_keys 3\n") {
		t.Errorf("restored key count wrong:\n%s", m)
	}
}

// TestOneProcessPerDataDir: a second service on a held directory fails
// at Open instead of sharing the files.
func TestOneProcessPerDataDir(t *testing.T) {
	dir := t.TempDir()
	start(t, dir, Config{})
	if svc, err := Open(Config{DataDir: dir}); err == nil {
		svc.Close()
		t.Fatal("a second service opened a held data directory")
	}
}

// TestMaxKeys: past MaxKeys a new key gets 507 and is not stored;
// existing keys still take writes.
func TestMaxKeys(t *testing.T) {
	s := start(t, t.TempDir(), Config{MaxKeys: 2})
	put(t, s.url, "a", 1, "1").expect(t, 200, nil)
	put(t, s.url, "b", 1, "1").expect(t, 200, nil)
	put(t, s.url, "c", 1, "1").expect(t, 507, map[string]string{"error": CodeFull})
	put(t, s.url, "a", 2, "2").expect(t, 200, nil)
	get(t, s.url, "c").expect(t, 404, nil)
}

// blockExecutor occupies the store's executor until the returned function
// is called: requests submitted meanwhile wait in Do (in flight).
func blockExecutor(t *testing.T, svc *Service) (unblock func()) {
	t.Helper()
	running, release := make(chan struct{}), make(chan struct{})
	go svc.node.Do(context.Background(), func(process.Env) {
		close(running)
		select { // bounded: a test that forgets to unblock fails, not hangs
		case <-release:
		case <-time.After(20 * time.Second):
		}
	})
	<-running
	var once bool
	return func() {
		if !once {
			once = true
			close(release)
		}
	}
}

// putInFlight starts a write and waits (5s at most) until it is in
// flight; its answer comes on the returned channel.
func putInFlight(t *testing.T, s *server, key string, token uint64, value string) <-chan answer {
	t.Helper()
	out := make(chan answer, 1)
	go tryPut(s.url, key, token, value, out)
	deadline := time.Now().Add(5 * time.Second)
	for s.svc.inFlight.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write never got in flight")
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

// TestDrain: on Shutdown /readyz turns 503 and new object requests get
// 503 with Retry-After, while a write already in flight finishes, is
// answered 200, and is on disk for the next process.
func TestDrain(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir, Config{DrainDelay: 300 * time.Millisecond})
	do(t, "GET", s.url+"/readyz", nil, "").expect(t, 200, nil)
	unblock := blockExecutor(t, s.svc)
	defer unblock()
	inflight := putInFlight(t, s, "k", 4, "44")
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.svc.Shutdown(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !s.svc.draining.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown never started draining")
		}
		time.Sleep(time.Millisecond)
	}
	r := do(t, "GET", s.url+"/readyz", nil, "")
	r.expect(t, 503, nil)
	if r.body["reason"] != "draining" {
		t.Fatalf("/readyz while draining: %s", r.raw)
	}
	n := put(t, s.url, "k", 5, "55")
	n.expect(t, 503, map[string]string{"error": CodeDraining})
	if n.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	unblock()
	select {
	case a := <-inflight:
		a.expect(t, 200, map[string]string{"token": "4"})
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight write never finished")
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown never returned")
	}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	s.stop(t)
	s = start(t, dir, Config{})
	get(t, s.url, "k").expect(t, 200, map[string]string{"value": "44", "token": "4"})
}

// TestOverload: past MaxInFlight a request is shed at once with 429 and
// Retry-After; and a request that waits RequestTimeout for a busy store
// gets 503 and is never applied, even after the store frees up.
func TestOverload(t *testing.T) {
	s := start(t, t.TempDir(), Config{MaxInFlight: 1, RequestTimeout: 200 * time.Millisecond})
	unblock := blockExecutor(t, s.svc)
	defer unblock()
	first := putInFlight(t, s, "k", 1, "1")
	shed := put(t, s.url, "k", 2, "2")
	shed.expect(t, 429, map[string]string{"error": CodeOverloaded})
	if shed.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	select {
	case a := <-first:
		a.expect(t, 503, map[string]string{"error": CodeUnavailable})
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting write was never answered")
	}
	unblock()
	get(t, s.url, "k").expect(t, 404, nil) // the timed-out write was not applied
	put(t, s.url, "k", 1, "1").expect(t, 200, nil)
}

// BenchmarkWrite: a fenced write over HTTP on loopback, fsync included,
// with the store holding 1 or 1,000 keys (the durable record is the whole
// table, so a write's cost grows with the keys).
func BenchmarkWrite(b *testing.B) {
	for _, keys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			svc, err := Open(Config{DataDir: b.TempDir(), MaxKeys: keys})
			if err != nil {
				b.Fatal(err)
			}
			defer svc.Close()
			ctx := context.Background()
			for i := range keys {
				if _, err := svc.write(ctx, fmt.Sprintf("key-%d", i), 1, 0); err != nil {
					b.Fatal(err)
				}
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go svc.Serve(l)
			url := "http://" + l.Addr().String() + "/v1/objects/key-0"
			b.ResetTimer()
			for i := range b.N {
				req, _ := http.NewRequest("PUT", url, strings.NewReader("42"))
				req.Header.Set(HeaderToken, strconv.Itoa(i+1))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// TestStalledBodiesHoldNoSlot: 64 writes that send their headers and never
// their body, against MaxInFlight 16, do not make the store answer 429 to
// a writer that sends its body: the body is read before the slot is taken.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	s := start(t, t.TempDir(), Config{MaxInFlight: 16})
	httpxtest.StallBodies(t, s.url, "PUT", "/v1/objects/k", 64)
	put(t, s.url, "k", 1, "7").expect(t, 200, map[string]string{"token": "1"})
	get(t, s.url, "k").expect(t, 200, map[string]string{"value": "7"})
}
