// Package httpx is the HTTP plumbing the lock API (lockapi) and the fenced
// store service (storesvc) share: the http.Server with its timeouts,
// JSON answers, Retry-After, draining, name validation and the latency
// buckets. It imports nothing of fencesim.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Timeouts are an http.Server's connection timeouts.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// Server is an http.Server that keeps track of its connections' states,
// so that Drain can end the ones that never sent a request.
type Server struct {
	*http.Server
	conns conns
}

// NewServer is a Server for h with the timeouts, 16 KiB of headers at
// most, and its error log at warning level on logger.
func NewServer(h http.Handler, t Timeouts, logger *slog.Logger) *Server {
	s := &Server{Server: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	s.conns.readTimeout = t.Read
	s.ConnState = s.conns.hook
	return s
}

// Drain waits delay (or until ctx ends), then shuts the server down; if
// that fails, the remaining connections are closed. It returns Shutdown's
// error. The caller turns draining on (and logs) around it.
//
// http.Server.Shutdown closes idle keep-alive connections at once but
// waits for a connection that has not sent a request yet (StateNew: a
// client's spare or pre-dialled connection, a load balancer's probe)
// until the read of its first header times out — ReadHeaderTimeout, 2 s
// by default — or 5 s have passed. Drain ends those itself, while
// Shutdown waits for the requests in flight: no request was read from
// them, so nothing is lost, and a drain takes as long as its slowest
// request.
func (s *Server) Drain(ctx context.Context, delay time.Duration) error {
	// Every answer from now on closes its connection, so that a keep-alive
	// client does not send its next request into a socket about to close.
	s.SetKeepAlivesEnabled(false)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	done := make(chan struct{})
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		// Shutdown closes the listeners first, but a connection accepted
		// just before becomes StateNew a moment later: cut until it
		// returns (bounded by ctx, which bounds Shutdown).
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			s.conns.cutNew()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := s.Shutdown(ctx)
	close(done)
	<-cut
	if err != nil {
		s.Close()
	}
	return err
}

// conns holds the connections that have not sent a request yet, from
// the ConnState hook. A connection leaves it at its first request: its
// later transitions (every request's active and idle) cost a lock-free
// lookup that misses, and Shutdown itself closes it when idle.
type conns struct {
	m           sync.Map // net.Conn → *connInfo
	readTimeout time.Duration
}

type connInfo struct {
	mu  sync.Mutex
	cut bool // cutNew set a past read deadline on it
}

func (c *conns) hook(conn net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		c.m.Store(conn, &connInfo{})
		return
	case http.StateIdle:
		return // a connection is idle only after a request: no longer tracked
	}
	v, ok := c.m.Load(conn)
	if !ok {
		return
	}
	c.m.Delete(conn)
	if st != http.StateActive {
		return
	}
	ci := v.(*connInfo)
	ci.mu.Lock()
	defer ci.mu.Unlock()
	if ci.cut {
		// Its request's header arrived just before the cut: the hook runs
		// before the handler reads the body, so give that read back the
		// deadline the server would have set.
		var d time.Time
		if c.readTimeout > 0 {
			d = time.Now().Add(c.readTimeout)
		}
		conn.SetReadDeadline(d)
	}
	ci.cut = false
}

// cutNew ends the wait of every connection that has not sent a request:
// a read deadline in the past fails the server's read of its first header,
// and the server closes it. It cuts again on every call: a connection
// accepted a moment ago may set its header deadline after the first cut.
// A connection whose first request arrives meanwhile is taken out of the
// map by the hook, under the same lock, before its handler runs.
func (c *conns) cutNew() {
	c.m.Range(func(k, v any) bool {
		ci := v.(*connInfo)
		ci.mu.Lock()
		if _, still := c.m.Load(k); still {
			k.(net.Conn).SetReadDeadline(time.Unix(1, 0))
			ci.cut = true
		}
		ci.mu.Unlock()
		return true
	})
}

// open counts the connections that have sent no request (tests).
func (c *conns) open() int {
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	return n
}

// SetRetryAfter sets the Retry-After header of a 429 or 503 to retryMs in
// whole seconds, rounded up, at least 1; other statuses get none.
func SetRetryAfter(w http.ResponseWriter, status int, retryMs int64) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		secs := (retryMs + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
}

// The header values WriteJSON sets, shared by every response instead of a
// new slice each (Header.Set's way). Each is full (length = capacity), so
// a later Header.Add appends to a copy; nothing changes them in place.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// WriteJSON answers status with v as JSON, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"], h["Cache-Control"] = jsonContentType, noStore
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ValidName reports whether s is 1..max characters of [A-Za-z0-9._-].
func ValidName(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Truncate cuts s to n bytes, marking a cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LatencyBuckets are the request latency histograms' buckets, in seconds.
func LatencyBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
}

// FromBrowser reports whether r comes from a web page (it carries Origin
// or a Sec-Fetch-Site header, which browsers set and curl, Go and other
// programs do not): the services refuse those (403), so that a page a
// user visits cannot post to a service on their machine or network (a
// text/plain or form POST needs no CORS preflight).
func FromBrowser(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != ""
}

// BodyTimeout is how long ReadBody waits for a whole request body by
// default: a client that sends its headers and then stalls is cut off
// after it, well before the server's ReadTimeout.
const BodyTimeout = time.Second

// ErrBodyTimeout is ReadBody's error for a body that did not arrive in time.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// ReadBody reads r's whole body, at most max bytes (else an
// *http.MaxBytesError), within timeout (else ErrBodyTimeout). A service
// reads the body with it before the request takes an admission slot, so
// that requests whose bodies are still arriving — or never will — hold no
// slot and cannot shed well-behaved clients.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = ErrBodyTimeout
	}
	if err == nil {
		rc.SetReadDeadline(time.Time{})
	}
	return b, err
}
