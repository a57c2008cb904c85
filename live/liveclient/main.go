package liveclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Main parses the flags into a Config, opens the Locker and serves the harness's protocol on stdin/stdout until stdin closes.
func Main(open func(Config) (Locker, error)) {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, open))
}

// run is Main with its streams, for tests; it returns the exit code: 0
// when stdin closed, 2 on bad flags, 1 when the Locker cannot be opened.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, open func(Config) (Locker, error)) int {
	cfg, opTimeout, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "liveclient: %v\n", err)
		return 2
	}
	l, err := open(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "liveclient: opening the lock client: %v\n", err)
		return 1
	}
	s := &server{cfg: cfg, locker: l, opTimeout: opTimeout, out: json.NewEncoder(stdout),
		http: &http.Client{Timeout: opTimeout}}
	s.serve(stdin, stderr)
	l.Close()
	return 0
}

// OptFlag collects repeated -opt key=value: the target options live
// passes to every client (and simrun live takes from its user), parsed
// the same on both sides.
type OptFlag map[string]string

func (m OptFlag) String() string { return fmt.Sprint(map[string]string(m)) }

// Set adds one key=value; a value without "=" or with an empty key is an
// error naming it.
func (m OptFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	m[k] = val
	return nil
}

func parseFlags(args []string, stderr io.Writer) (Config, time.Duration, error) {
	fs := flag.NewFlagSet("liveclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := fs.String("client", "", "this client's name in the history (required)")
	endpoints := fs.String("endpoints", "", "the lock service's addresses, comma-separated (required)")
	store := fs.String("store", "", "the fenced store's base URL, http://host:port (required)")
	opTimeout := fs.Duration("op-timeout", 10*time.Second, "bound on every operation; past it the reply says the outcome is unknown")
	opts := OptFlag{}
	fs.Var(opts, "opt", "a target-specific option key=value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return Config{}, 0, err
	}
	switch {
	case *client == "":
		return Config{}, 0, errors.New("-client is required")
	case *endpoints == "":
		return Config{}, 0, errors.New("-endpoints is required")
	case *store == "":
		return Config{}, 0, errors.New("-store is required")
	case *opTimeout <= 0:
		return Config{}, 0, errors.New("-op-timeout must be positive")
	}
	if u, err := url.Parse(*store); err != nil || u.Host == "" || u.Scheme != "http" {
		return Config{}, 0, fmt.Errorf("-store %q must be http://host:port", *store)
	}
	return Config{Client: *client, Endpoints: strings.Split(*endpoints, ","), StoreURL: strings.TrimSuffix(*store, "/"), Options: opts}, *opTimeout, nil
}

// server serves the protocol: every command in its own goroutine, the
// replies written one at a time.
type server struct {
	cfg       Config
	locker    Locker
	opTimeout time.Duration
	http      *http.Client

	mu  sync.Mutex
	out *json.Encoder
}

func (s *server) serve(stdin io.Reader, stderr io.Writer) {
	var wg sync.WaitGroup
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c Command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			fmt.Fprintf(stderr, "liveclient: bad command %q: %v\n", sc.Text(), err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.do(c)
			r.ID = c.ID
			s.mu.Lock()
			s.out.Encode(r)
			s.mu.Unlock()
		}()
	}
	wg.Wait()
}

func (s *server) do(c Command) Reply {
	ctx, cancel := context.WithTimeout(context.Background(), s.opTimeout)
	defer cancel()
	ttl := time.Duration(c.TTLms) * time.Millisecond
	switch c.Op {
	case OpAcquire:
		tok, err := s.locker.Acquire(ctx, c.Resource, ttl)
		if err != nil {
			return failed(err)
		}
		return Reply{OK: true, Token: tok}
	case OpRenew:
		return answer(s.locker.Renew(ctx, c.Resource, c.Token, ttl))
	case OpRelease:
		return answer(s.locker.Release(ctx, c.Resource, c.Token))
	case OpWrite:
		// The work window: a pause here is a holder paused between
		// believing it holds the lock and writing.
		time.Sleep(time.Duration(c.WorkMs) * time.Millisecond)
		return s.write(ctx, c)
	case OpRead:
		return s.read(ctx, c)
	}
	return Reply{Error: "invalid", Message: fmt.Sprintf("unknown op %q", c.Op)}
}

func answer(err error) Reply {
	if err != nil {
		return failed(err)
	}
	return Reply{OK: true}
}

func failed(err error) Reply {
	switch {
	case errors.Is(err, ErrBusy):
		return Reply{Error: ErrorBusy, Message: err.Error()}
	case errors.Is(err, ErrNotHolder):
		return Reply{Error: ErrorNotHolder, Message: err.Error()}
	}
	return Reply{Error: "unknown", Message: err.Error()}
}

// write is PUT /v1/objects/{key} on fencesim-store with the token in
// Fencing-Token: 200 accepted, 409 stale, anything else unknown.
func (s *server) write(ctx context.Context, c Command) Reply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.cfg.StoreURL+"/v1/objects/"+url.PathEscape(c.Key), strings.NewReader(strconv.FormatInt(c.Value, 10)))
	if err != nil {
		return failed(err)
	}
	req.Header.Set("Fencing-Token", strconv.FormatUint(c.Token, 10))
	resp, err := s.http.Do(req)
	if err != nil {
		return failed(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return Reply{OK: true}
	case http.StatusConflict:
		return Reply{Error: ErrorStale, Message: string(body)}
	}
	return Reply{Error: "unknown", Message: fmt.Sprintf("store: %s: %s", resp.Status, body)}
}

// read is GET /v1/objects/{key}: 200 the value and its token, 404 never
// written (token 0).
func (s *server) read(ctx context.Context, c Command) Reply {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.StoreURL+"/v1/objects/"+url.PathEscape(c.Key), nil)
	if err != nil {
		return failed(err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return failed(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		var o struct {
			Value int64  `json:"value,string"`
			Token uint64 `json:"token,string"`
		}
		if err := json.Unmarshal(body, &o); err != nil {
			return Reply{Error: "unknown", Message: fmt.Sprintf("store: undecodable answer %q", body)}
		}
		return Reply{OK: true, Value: o.Value, Token: o.Token}
	case http.StatusNotFound:
		return Reply{OK: true}
	}
	return Reply{Error: "unknown", Message: fmt.Sprintf("store: %s: %s", resp.Status, body)}
}
