package lockapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

func TestMemPassesTheSuite(t *testing.T) {
	lockapitest.Suite(t, func(t *testing.T) lockapitest.Harness {
		m := lockapitest.NewMem()
		return lockapitest.Harness{Backends: [2]lockapi.Backend{m, m}, Advance: m.Advance, SetFence: m.SetFence}
	})
}

func TestTokenJSON(t *testing.T) {
	for _, v := range []uint64{1, 1<<53 + 1, ^uint64(0)} {
		b, err := json.Marshal(lockapi.LeaseResponse{Token: lockapi.Token(v), TTLms: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := `"token":"` + lockapi.Token(v).String() + `"`
		if !strings.Contains(string(b), want) {
			t.Fatalf("%d encodes as %s, want %s", v, b, want)
		}
		var back lockapi.LeaseResponse
		if err := json.Unmarshal(b, &back); err != nil || uint64(back.Token) != v {
			t.Fatalf("round trip of %d: %d, %v", v, back.Token, err)
		}
	}
	for _, bad := range []string{`42`, `"-1"`, `"+1"`, `"1e3"`, `"18446744073709551616"`, `""`, `" 1"`, `null`} {
		var tok lockapi.Token
		if err := json.Unmarshal([]byte(bad), &tok); err == nil {
			t.Errorf("token %s accepted as %d", bad, tok)
		}
	}
}

// TestBadInput: every malformed request is a 400 (naming the field) or a
// 413, and never reaches the backend.
func TestBadInput(t *testing.T) {
	m := lockapitest.NewMem()
	var reached atomic.Int32
	m.SetHook(func(_ context.Context, op string) error {
		if op != "ready" {
			reached.Add(1)
		}
		return nil
	})
	_, base := lockapitest.Serve(t, m, lockapi.Config{MaxBodyBytes: 512})
	acq := base + "/v1/locks/r/acquire"
	cases := []struct {
		name, url, body string
		status          int
		field           string
	}{
		{"malformed", acq, `{"client":`, 400, "body"},
		{"not an object", acq, `[1,2]`, 400, "body"},
		{"empty body", acq, ``, 400, "body"},
		{"name in another case", acq, `{"Client":"a","ttl_ms":1000,"request_id":"q"}`, 400, "Client"},
		{"a name twice inside a field", acq, `{"client":{"a":1,"a":2},"ttl_ms":1000,"request_id":"q"}`, 400, "client"},
		{"trailing data", acq, `{"client":"a","ttl_ms":1000,"request_id":"q"} {}`, 400, "body"},
		{"unknown field", acq, `{"client":"a","ttl_ms":1000,"request_id":"q","tll_ms":5}`, 400, "tll_ms"},
		{"missing client", acq, `{"ttl_ms":1000,"request_id":"q"}`, 400, "client"},
		{"client charset", acq, `{"client":"a b","ttl_ms":1000,"request_id":"q"}`, 400, "client"},
		{"client too long", acq, `{"client":"` + strings.Repeat("a", 129) + `","ttl_ms":1000,"request_id":"q"}`, 400, "client"},
		{"missing request id", acq, `{"client":"a","ttl_ms":1000}`, 400, "request_id"},
		{"ttl too small", acq, `{"client":"a","ttl_ms":5,"request_id":"q"}`, 400, "ttl_ms"},
		{"ttl too large", acq, `{"client":"a","ttl_ms":99999999999,"request_id":"q"}`, 400, "ttl_ms"},
		{"ttl not a number", acq, `{"client":"a","ttl_ms":"1000","request_id":"q"}`, 400, "ttl_ms"},
		{"wait too long", acq, `{"client":"a","ttl_ms":1000,"request_id":"q","wait_ms":10001}`, 400, "wait_ms"},
		{"negative wait", acq, `{"client":"a","ttl_ms":1000,"request_id":"q","wait_ms":-1}`, 400, "wait_ms"},
		{"bad resource", base + "/v1/locks/a%7Bb%7D/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`, 400, "resource"},
		{"long resource", base + "/v1/locks/" + strings.Repeat("r", 129) + "/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`, 400, "resource"},
		{"token as number", base + "/v1/locks/r/renew", `{"client":"a","token":42,"ttl_ms":1000}`, 400, "token"},
		{"token negative", base + "/v1/locks/r/release", `{"client":"a","token":"-1"}`, 400, "token"},
		{"token zero", base + "/v1/locks/r/release", `{"client":"a","token":"0"}`, 400, "token"},
		{"token missing", base + "/v1/locks/r/release", `{"client":"a"}`, 400, "token"},
		{"huge body", acq, `{"client":"` + strings.Repeat("a", 4000) + `","ttl_ms":1000,"request_id":"q"}`, 413, ""},
	}
	for _, c := range cases {
		r := lockapitest.Do(t, "POST", c.url, c.body)
		if r.Status != c.status {
			t.Errorf("%s: status %d %s, want %d", c.name, r.Status, r.Body, c.status)
			continue
		}
		e := r.Error(t)
		if c.field != "" && (e.Field != c.field || !strings.Contains(e.Message, c.field)) {
			t.Errorf("%s: %+v, want field %q named in the message", c.name, e, c.field)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d bad requests reached the backend", n)
	}
	if r := lockapitest.Do(t, "GET", acq, ""); r.Status != 405 {
		t.Errorf("GET on acquire: %d, want 405", r.Status)
	}
}

// TestNotLeaderRedirects: a backend that is not the leader makes the
// server answer 307 to the leader's URL with the same path, or 503 with
// Retry-After when no leader is known.
func TestNotLeaderRedirects(t *testing.T) {
	m := lockapitest.NewMem()
	leader := "http://127.0.0.1:1"
	m.SetHook(func(context.Context, string) error { return &lockapi.NotLeaderError{Leader: leader} })
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	r := lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire?x=1", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 307 || r.Header.Get("Location") != leader+"/v1/locks/r/acquire?x=1" || r.Error(t).Leader != leader {
		t.Fatalf("not leader: %d Location %q %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	m.SetHook(func(context.Context, string) error { return &lockapi.NotLeaderError{} })
	r = lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("no leader: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
}

// TestBackendDownFailsClosed: a backend error is 503 with Retry-After,
// never a grant; backend overload is 429.
func TestBackendDownFailsClosed(t *testing.T) {
	m := lockapitest.NewMem()
	m.SetHook(func(context.Context, string) error { return errors.New("connection refused") })
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	r := lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 503 || r.Header.Get("Retry-After") != "1" || r.Error(t).Error != lockapi.CodeUnavailable {
		t.Fatalf("backend down: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := lockapitest.Do(t, "GET", base+"/readyz", ""); r.Status != 503 || !strings.Contains(r.Body, "connection refused") {
		t.Fatalf("readyz with backend down: %d %s", r.Status, r.Body)
	}
	m.SetHook(func(context.Context, string) error {
		return &lockapi.OverloadedError{RetryAfter: 2500 * time.Millisecond}
	})
	r = lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 429 || r.Header.Get("Retry-After") != "3" || r.Error(t).RetryAfterMs != 2500 {
		t.Fatalf("backend overloaded: %d %v %s", r.Status, r.Header, r.Body)
	}
}

// blocker makes a Mem's acquires wait until released, counting arrivals.
type blocker struct {
	arrived chan struct{}
	release chan struct{}
}

func newBlocker(m *lockapitest.Mem) *blocker {
	b := &blocker{arrived: make(chan struct{}, 100), release: make(chan struct{})}
	m.SetHook(func(ctx context.Context, op string) error {
		if op != "acquire" {
			return nil
		}
		b.arrived <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	return b
}

func (b *blocker) wait(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-b.arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("requests did not reach the backend")
		}
	}
}

// fill sends n acquires, of resources r0..r<n-1>, that the blocker holds
// in the backend (taking an admission limit of n) and waits until all
// arrived; done lets them finish and waits for their answers.
func (b *blocker) fill(t testing.TB, base string, n int) (done func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockapitest.Do(t, "POST", base+"/v1/locks/r"+strconv.Itoa(i)+"/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
		}()
	}
	b.wait(t, n)
	return func() { close(b.release); wg.Wait() }
}

// TestOverloadShedsImmediately: with the limit reached, the next request
// is refused at once with 429 + Retry-After, not queued behind the ones
// in flight.
func TestOverloadShedsImmediately(t *testing.T) {
	m := lockapitest.NewMem()
	b := newBlocker(m)
	s, base := lockapitest.Serve(t, m, lockapi.Config{Limiter: lockapi.LimiterConfig{Min: 2, Max: 2}})
	done := b.fill(t, base, 2)
	start := time.Now()
	r := lockapitest.Do(t, "POST", base+"/v1/locks/x/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	took := time.Since(start)
	if r.Status != 429 || r.Header.Get("Retry-After") == "" || r.Error(t).Error != lockapi.CodeOverloaded {
		t.Fatalf("over the limit: %d %v %s", r.Status, r.Header, r.Body)
	}
	if took > 500*time.Millisecond {
		t.Fatalf("shedding took %v: the request queued", took)
	}
	if got := s.Limiter().InFlight(); got != 2 {
		t.Fatalf("in flight %d, want 2", got)
	}
	done()
	if r := lockapitest.Do(t, "GET", base+"/metrics", ""); !strings.Contains(r.Body, "fencesim_lockapi_shed_total 1") ||
		!strings.Contains(r.Body, `fencesim_lockapi_grants_total{op="acquire"} 2`) {
		t.Fatalf("metrics lack the shed request or the grants:\n%s", r.Body)
	}
}

// TestHoldersFirst: with the limit reached by acquires, an acquire is
// shed but a holder's release and renewal are admitted, up to twice the
// limit; past it a holder's request is shed too.
func TestHoldersFirst(t *testing.T) {
	m := lockapitest.NewMem()
	arrived, release := make(chan string, 10), make(chan struct{})
	m.SetHook(func(ctx context.Context, op string) error { // every op waits in the backend
		arrived <- op
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	s, base := lockapitest.Serve(t, m, lockapi.Config{Limiter: lockapi.LimiterConfig{Min: 2, Max: 2}})
	var wg sync.WaitGroup
	send := func(path, body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockapitest.Do(t, "POST", base+path, body)
		}()
	}
	await := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-arrived:
			case <-time.After(5 * time.Second):
				t.Fatalf("requests did not reach the backend (in flight %d)", s.Limiter().InFlight())
			}
		}
	}
	send("/v1/locks/r0/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q0"}`)
	send("/v1/locks/r1/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q1"}`)
	await(2)
	if r := lockapitest.Do(t, "POST", base+"/v1/locks/x/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q2"}`); r.Status != 429 {
		t.Fatalf("an acquire over the limit: %d %s, want 429", r.Status, r.Body)
	}
	send("/v1/locks/r0/release", `{"client":"a","token":"1","request_id":"h"}`)
	send("/v1/locks/r1/renew", `{"client":"a","token":"2","ttl_ms":1000}`)
	await(2) // both reached the backend: admitted past the limit
	if got := s.Limiter().InFlight(); got != 4 {
		t.Fatalf("in flight %d, want 4", got)
	}
	if r := lockapitest.Do(t, "POST", base+"/v1/locks/r1/release", `{"client":"a","token":"2","request_id":"h2"}`); r.Status != 429 {
		t.Fatalf("a release at twice the limit: %d %s, want 429", r.Status, r.Body)
	}
	close(release)
	wg.Wait()
	if got := s.Limiter().InFlight(); got != 0 {
		t.Fatalf("in flight %d after every request ended", got)
	}
}

// TestLimiterAdapts: with aimd, slow requests shrink the limit toward Min,
// fast ones under load grow it back toward Max.
func TestLimiterAdapts(t *testing.T) {
	l := lockapi.NewLimiter(lockapi.LimiterConfig{Algorithm: lockapi.AlgorithmAIMD, Min: 4, Max: 64, Target: time.Millisecond})
	for i := 0; i < 200 && l.Limit() > 4; i++ {
		if !l.TryAcquire() {
			t.Fatal("refused under the limit")
		}
		time.Sleep(1100 * time.Microsecond) // one decrease per Target window
		l.Done(10*time.Millisecond, false)
	}
	if l.Limit() != 4 {
		t.Fatalf("limit %d after slow requests, want 4", l.Limit())
	}
	for range 4 {
		l.TryAcquire()
	}
	if l.TryAcquire() {
		t.Fatal("admitted a 5th request over a limit of 4")
	}
	for range 4 {
		l.Done(0, false)
	}
	for range 5000 { // fast and busy: additive increase
		for range l.Limit() {
			l.TryAcquire()
		}
		for range l.Limit() {
			l.Done(time.Microsecond, false)
		}
		if l.Limit() == 64 {
			break
		}
	}
	if l.Limit() != 64 || l.InFlight() != 0 {
		t.Fatalf("limit %d in flight %d after fast busy requests, want 64 and 0", l.Limit(), l.InFlight())
	}
}

// TestDrain: on Shutdown, readyz turns 503 and new lock requests get 503
// with Retry-After during the drain delay, while the request in flight
// completes with its grant; then Shutdown returns.
func TestDrain(t *testing.T) {
	m := lockapitest.NewMem()
	b := newBlocker(m)
	s, base := lockapitest.Serve(t, m, lockapi.Config{DrainDelay: 300 * time.Millisecond})
	if r := lockapitest.Do(t, "GET", base+"/readyz", ""); r.Status != 200 {
		t.Fatalf("readyz before drain: %d %s", r.Status, r.Body)
	}
	inflight := make(chan lockapitest.Reply, 1)
	go func() {
		inflight <- lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q"}`)
	}()
	b.wait(t, 1)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	for deadline := time.Now().Add(2 * time.Second); !s.Draining(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not draining")
		}
	}
	if r := lockapitest.Do(t, "GET", base+"/readyz", ""); r.Status != 503 || !strings.Contains(r.Body, "draining") {
		t.Fatalf("readyz while draining: %d %s", r.Status, r.Body)
	}
	r := lockapitest.Do(t, "POST", base+"/v1/locks/other/acquire", `{"client":"b","ttl_ms":1000,"request_id":"q"}`)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || r.Error(t).Error != lockapi.CodeDraining {
		t.Fatalf("new request while draining: %d %v %s", r.Status, r.Header, r.Body)
	}
	close(b.release)
	if r := <-inflight; r.Status != 200 {
		t.Fatalf("in-flight request during drain: %d %s", r.Status, r.Body)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestServerTimeouts: a client that never finishes its headers is cut off
// by ReadHeaderTimeout rather than holding a connection forever.
func TestServerTimeouts(t *testing.T) {
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{ReadHeaderTimeout: 100 * time.Millisecond})
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("POST /v1/locks/r/acquire HTTP/1.1\r\nHost: x\r\n"))
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 512)
	start := time.Now()
	_, err = conn.Read(buf)
	for err == nil {
		_, err = conn.Read(buf)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("slow-header connection survived %v (%v)", took, err)
	}
}

// TestShedDecisionUnderOverload: 256 goroutines hammering a gradient
// limiter of at most 32: most decisions are sheds, and their p99 — timed by
// the caller, preemption and the algorithm's mutex on Done included — is
// under seed 003's 0.1 ms. The limit is never exceeded.
func TestShedDecisionUnderOverload(t *testing.T) {
	l := lockapi.NewLimiter(lockapi.LimiterConfig{Algorithm: lockapi.AlgorithmGradient, Min: 8, Max: 32})
	shed, admitted, peak := hammer(l, 256, 2000)
	if len(shed) < len(admitted) {
		t.Fatalf("%d shed, %d admitted: not overloaded", len(shed), len(admitted))
	}
	p99 := shed[len(shed)*99/100]
	t.Logf("%d shed decisions: p50 %v p99 %v; %d admitted", len(shed), shed[len(shed)/2], p99, len(admitted))
	if p99 > 100*time.Microsecond {
		t.Fatalf("shed decision p99 %v, want < 100µs", p99)
	}
	if peak > 32 || l.InFlight() != 0 {
		t.Fatalf("%d admitted at once (limit at most 32); in flight %d after every request ended", peak, l.InFlight())
	}
}

// TestWaitingAcquireLeavesAdmission: a waiting acquire gives its admission
// slot back and gets a backend deadline covering its wait; beyond
// MaxWaiting an acquire is served without waiting, inside the admission
// limit like any request.
func TestWaitingAcquireLeavesAdmission(t *testing.T) {
	m := lockapitest.NewMem()
	type arrival struct{ left time.Duration }
	arrived := make(chan arrival, 10)
	release := make(chan struct{})
	m.SetHook(func(ctx context.Context, op string) error {
		dl, _ := ctx.Deadline()
		arrived <- arrival{time.Until(dl)}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	s, base := lockapitest.Serve(t, m, lockapi.Config{Limiter: lockapi.LimiterConfig{Min: 2, Max: 2},
		MaxWaiting: 1, RequestTimeout: time.Second, MaxWait: 5 * time.Second})
	var wg sync.WaitGroup
	send := func(res, body string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockapitest.Do(t, "POST", base+"/v1/locks/"+res+"/acquire", body)
		}()
	}
	next := func() arrival {
		select {
		case a := <-arrived:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("the request did not reach the backend")
		}
		return arrival{}
	}
	send("a", `{"client":"a","ttl_ms":1000,"request_id":"q","wait_ms":3000}`)
	if a := next(); a.left <= 3*time.Second {
		t.Fatalf("the waiting acquire's backend deadline is %v away, want its wait (3s) plus the request timeout", a.left)
	}
	if n := s.Limiter().InFlight(); n != 0 {
		t.Fatalf("in flight %d with one acquire waiting, want 0", n)
	}
	send("b", `{"client":"b","ttl_ms":1000,"request_id":"q","wait_ms":3000}`) // beyond MaxWaiting
	if a := next(); a.left > time.Second {
		t.Fatalf("an acquire beyond MaxWaiting has a deadline %v away, want the request timeout (1s)", a.left)
	}
	send("c", `{"client":"c","ttl_ms":1000,"request_id":"q"}`)
	next()
	if r := lockapitest.Do(t, "POST", base+"/v1/locks/d/acquire", `{"client":"d","ttl_ms":1000,"request_id":"q"}`); r.Status != 429 {
		t.Fatalf("a third request beside two admitted ones: %d %s, want 429", r.Status, r.Body)
	}
	close(release)
	wg.Wait()
}

// TestDrainEndsWaits: Shutdown ends a waiting acquire at once with 503
// draining (the client waits on another instance) instead of holding the
// drain for the rest of its wait.
func TestDrainEndsWaits(t *testing.T) {
	m := lockapitest.NewMem()
	b := newBlocker(m) // the acquire blocks until its context ends
	s, base := lockapitest.Serve(t, m, lockapi.Config{})
	waiting := make(chan lockapitest.Reply, 1)
	go func() {
		waiting <- lockapitest.Do(t, "POST", base+"/v1/locks/r/acquire", `{"client":"a","ttl_ms":1000,"request_id":"q","wait_ms":8000}`)
	}()
	b.wait(t, 1)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	r := <-waiting
	if r.Status != 503 || r.Error(t).Error != lockapi.CodeDraining {
		t.Fatalf("waiting acquire at drain: %d %s, want 503 draining", r.Status, r.Body)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("Shutdown took %v: it waited for the wait", took)
	}
}
