package simrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// conformCase is one case's result in simrun conform's report.
type conformCase struct {
	Name    string   `json:"case"`
	Result  string   `json:"result"` // pass, fail, not-run
	Seconds float64  `json:"seconds"`
	Details []string `json:"details,omitempty"`
}

// cmdConform runs the lock API's contract suite (lockapitest.Cases, the
// suite every backend of fencesim passes in go test) against any server
// of the HTTP lock API, by URL.
func cmdConform(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simrun conform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	u1 := fs.String("url", "", "base `URL` of the server under test, http://host:port (required)")
	u2 := fs.String("url2", "", "a second instance over the same state, for the cases that use two (default: -url again)")
	global := fs.Bool("global-tokens", false, "the server's tokens are one sequence across resources (fencesim-node's log indexes), not one per resource")
	remembers := fs.Bool("remembers-grants", false, "the server answers a retried acquire from its memory of the first grant even after that lease ended (fencesim-node)")
	offset := fs.Uint64("token-offset", 0, "the server's tokens start above this (at least 2^53 runs the large-token case against a server whose counters cannot be set)")
	timeout := fs.Duration("timeout", time.Minute, "bound on each case")
	ready := fs.Duration("ready-wait", 10*time.Second, "how long to wait for a server that answers 503 (no leader yet) or does not answer yet (still starting) before giving up")
	asJSON := fs.Bool("json", false, "one JSON object per case, then a summary object")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "simrun conform: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if *u2 == "" {
		*u2 = *u1
	}
	for _, u := range []*string{u1, u2} {
		p, err := url.Parse(*u)
		if *u == "" || err != nil || p.Scheme != "http" || p.Host == "" || (p.Path != "" && p.Path != "/") {
			return fail("-url %q must be http://host:port (the server's base URL)", *u)
		}
		*u = strings.TrimSuffix(*u, "/")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	prefix := "conform-" + hex.EncodeToString(rnd[:]) + "-"
	for _, u := range []*string{u1, u2} {
		leader, err := probe(*u, "/v1/locks/"+prefix+"probe", *ready)
		if err != nil {
			return fail("cannot reach the server: %v", err)
		}
		if leader != "" {
			// A follower (fencesim-node) redirects every lock request to
			// its leader, as the API allows (307, not_leader): the cases
			// run against the leader it names.
			fmt.Fprintf(stderr, "simrun conform: %s redirects to its leader %s: testing the leader\n", *u, leader)
			*u = leader
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tg := lockapitest.Target{URLs: [2]string{*u1, *u2}, Prefix: prefix, H: lockapitest.Harness{
		Advance: time.Sleep, TokenOffset: *offset, GlobalTokens: *global, RemembersGrants: *remembers}}
	cases := lockapitest.Cases()
	if !*asJSON {
		second := "the same URL"
		if *u2 != *u1 {
			second = *u2
		}
		fmt.Fprintf(stdout, "conform %s (second instance: %s): the lock API contract, %d cases, resources %s*\n", *u1, second, len(cases), prefix)
	}
	var passed, failed, notRun int
	enc := json.NewEncoder(stdout)
	for i, c := range cases {
		// Each case its own resources, as each gets a fresh backend in
		// go test.
		tg.Prefix = fmt.Sprintf("%s%d-", prefix, i)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "simrun conform: interrupted")
			return exitInterrupted
		}
		r := runCase(ctx, c, tg, *timeout)
		switch r.Result {
		case "pass":
			passed++
		case "fail":
			failed++
		default:
			notRun++
		}
		if *asJSON {
			enc.Encode(r)
			continue
		}
		switch r.Result {
		case "not-run":
			fmt.Fprintf(stdout, "NOT RUN  %s: %s\n", r.Name, strings.Join(r.Details, "; "))
		default:
			fmt.Fprintf(stdout, "%-8s %s  %.2fs\n", strings.ToUpper(r.Result), r.Name, r.Seconds)
			for _, d := range r.Details {
				fmt.Fprintf(stdout, "         %s\n", d)
			}
		}
	}
	code := exitPass
	switch {
	case failed > 0:
		code = exitViolation
	case passed == 0:
		code = exitUnknown // nothing was checked: never a pass
	}
	if *asJSON {
		enc.Encode(map[string]any{"url": *u1, "url2": *u2, "passed": passed, "failed": failed, "not_run": notRun, "exit": code})
		return code
	}
	fmt.Fprintf(stdout, "conform: %d passed, %d failed, %d not run\n", passed, failed, notRun)
	return code
}

// probe checks that the server at base answers HTTP on path, and returns
// the base URL of the leader it redirects to, if it does. A server that
// answers 503 (a replica that knows no leader yet, just after an election
// or a restart) or does not answer at all yet (still starting: nothing
// listens) is asked again for up to wait: testing it in that state would
// run every case against whatever answer it gives next, a follower's
// redirect included.
func probe(base, path string, wait time.Duration) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	end := time.Now().Add(wait)
	for {
		resp, err := c.Get(base + path)
		if err != nil {
			if time.Now().After(end) {
				return "", err
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			if time.Now().After(end) {
				return "", fmt.Errorf("%s answers 503 to %s for %v: is it ready (does it have a leader)?", base, path, wait)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		case http.StatusTemporaryRedirect:
			loc, err := resp.Location()
			if err != nil || loc.Scheme != "http" {
				return "", fmt.Errorf("%s answers 307 without a usable Location (%v)", base, err)
			}
			return "http://" + loc.Host, nil
		}
		return "", nil
	}
}

// runCase runs one contract case in its own goroutine (a failed check
// ends it, as testing's FailNow ends a test), bounded by timeout.
func runCase(ctx context.Context, c lockapitest.Case, tg lockapitest.Target, timeout time.Duration) conformCase {
	r := conformCase{Name: c.Name}
	if c.Skip != nil {
		if why := c.Skip(tg); why != "" {
			r.Result, r.Details = "not-run", []string{why}
			return r
		}
	}
	t := &conformT{}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("panic: %v", p)
			}
		}()
		c.Run(t, tg)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Errorf("did not finish within %v", timeout)
	case <-ctx.Done():
		t.Errorf("interrupted")
	}
	r.Seconds = time.Since(start).Seconds()
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Result, r.Details = "pass", t.msgs
	if t.failed {
		r.Result = "fail"
	}
	return r
}

// conformT is lockapitest.T for a case run outside go test.
type conformT struct {
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (t *conformT) Helper() {}

func (t *conformT) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	if len(t.msgs) < 10 {
		t.msgs = append(t.msgs, strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf(format, args...)), "\n", " "))
	}
}

func (t *conformT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

func (t *conformT) Fatal(args ...any) {
	t.Errorf("%s", fmt.Sprint(args...))
	runtime.Goexit()
}
