package lockapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/internal/httpx"
)

// Config is the server's policy. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	MinTTL, MaxTTL time.Duration // accepted ttl_ms range
	// MaxWait bounds an acquire's wait_ms; MaxWaiting bounds the acquires
	// waiting at once (beyond it one is answered without waiting).
	// Waiting acquires do not count against the admission limit. The
	// write timeout is raised to cover MaxWait + RequestTimeout.
	MaxWait      time.Duration
	MaxWaiting   int
	MaxBodyBytes int64 // larger bodies get 413 before they are buffered
	// BodyTimeout bounds the arrival of a request's body, which is read
	// whole before the request takes an admission slot (past it 408): a
	// client that stalls mid-body holds a connection, never a slot.
	BodyTimeout time.Duration
	Limiter     LimiterConfig // bounded ingress
	// RetryAfter is the hint sent with 429 and 503 (Retry-After in whole
	// seconds, rounded up; retry_after_ms exact).
	RetryAfter time.Duration
	// RequestTimeout bounds each backend call; past it the request fails
	// closed with 503.
	RequestTimeout time.Duration
	// DrainDelay is how long Shutdown keeps answering 503 (readyz false)
	// before it stops accepting connections, so a load balancer sees the
	// instance leave before its connections are refused.
	DrainDelay                                                time.Duration
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	Logger                                                    *slog.Logger
	// TestRoutes, if set, serves every path under /test/: the test-only
	// fault endpoints a command mounts with FENCESIM_TEST_HOOKS=1 (package
	// internal/testhooks). nil, the default: no such route exists.
	TestRoutes http.Handler
	// Authenticate, if set, identifies a request's client (package
	// internal/clientauth: a bearer token from a file); without an
	// identity a lock request gets 401. A request's client must be its
	// identity (else 403), so a client renews and releases only leases it
	// holds under its own identity, and GET shows a held lease only to
	// its holder (403 to anyone else). nil: no identities, the owner is
	// whatever client name a request gives.
	Authenticate func(r *http.Request) (identity string, ok bool)
	// TokenKey, if set, is the fencing key shared with the fenced store:
	// every grant and renewal carries a MAC of its token (LeaseResponse).
	TokenKey []byte
}

// DefaultConfig is a production-shaped policy.
func DefaultConfig() Config {
	return Config{
		MinTTL: 100 * time.Millisecond, MaxTTL: 5 * time.Minute,
		MaxWait: 10 * time.Second, MaxWaiting: 1024,
		MaxBodyBytes: 4 << 10,
		Limiter:      LimiterConfig{Algorithm: AlgorithmGradient, Min: 8, Max: 256, Target: 50 * time.Millisecond},
		RetryAfter:   100 * time.Millisecond, RequestTimeout: 2 * time.Second,
		ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *time.Duration, dv time.Duration) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.MinTTL, d.MinTTL)
	def(&c.MaxTTL, d.MaxTTL)
	def(&c.RetryAfter, d.RetryAfter)
	def(&c.RequestTimeout, d.RequestTimeout)
	def(&c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	def(&c.ReadTimeout, d.ReadTimeout)
	def(&c.WriteTimeout, d.WriteTimeout)
	def(&c.IdleTimeout, d.IdleTimeout)
	def(&c.BodyTimeout, httpx.BodyTimeout)
	def(&c.MaxWait, d.MaxWait)
	if c.MaxWaiting == 0 {
		c.MaxWaiting = d.MaxWaiting
	}
	// A waiting acquire is answered up to MaxWait + RequestTimeout after
	// its body was read: the response must still be writable then.
	c.WriteTimeout = max(c.WriteTimeout, c.ReadTimeout+c.MaxWait+c.RequestTimeout+time.Second)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.Limiter.Max == 0 { // the bounds come as a pair; the algorithm stays the caller's
		c.Limiter.Min, c.Limiter.Max = d.Limiter.Min, d.Limiter.Max
	}
	if c.Limiter.Target == 0 {
		c.Limiter.Target = d.Limiter.Target
	}
	if c.Limiter.Algorithm == "" {
		c.Limiter.Algorithm = d.Limiter.Algorithm
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Server serves the lock API over a Backend.
type Server struct {
	cfg      Config
	backend  Backend
	limiter  *Limiter
	reg      *prometheus.Registry
	m        *metrics
	http     *httpx.Server
	draining atomic.Bool
	waiting  atomic.Int64 // acquires waiting (Config.MaxWaiting)
	// stopWaits ends every wait when Shutdown begins: a waiter would hold
	// the drain up to MaxWait, and can wait on another instance.
	stopWaits   context.Context
	cancelWaits context.CancelFunc
}

// NewServer returns a server over b. Its metrics live on a registry of
// their own (Registry), so several servers can run in one process.
func NewServer(b Backend, cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, backend: b, limiter: NewLimiter(cfg.Limiter), reg: prometheus.NewRegistry()}
	s.stopWaits, s.cancelWaits = context.WithCancel(context.Background())
	s.m = newMetrics(s)
	if mb, ok := b.(MetricsBackend); ok {
		for _, c := range mb.Collectors() {
			s.reg.MustRegister(c)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/locks/{resource}/acquire", s.lockOp("acquire", s.acquire))
	mux.Handle("POST /v1/locks/{resource}/renew", s.lockOp("renew", s.renew))
	mux.Handle("POST /v1/locks/{resource}/release", s.lockOp("release", s.release))
	mux.Handle("GET /v1/locks/{resource}", s.lockOp("get", s.get))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	if cfg.TestRoutes != nil {
		mux.Handle("/test/", cfg.TestRoutes)
	}
	s.http = httpx.NewServer(mux, httpx.Timeouts{
		ReadHeader: cfg.ReadHeaderTimeout, Read: cfg.ReadTimeout, Write: cfg.WriteTimeout, Idle: cfg.IdleTimeout,
	}, cfg.Logger)
	return s
}

// Handler is the API's handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Registry is the server's Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Limiter is the server's admission limiter.
func (s *Server) Limiter() *Limiter { return s.limiter }

// Serve accepts connections on l until Shutdown; it returns
// http.ErrServerClosed after a clean shutdown.
func (s *Server) Serve(l net.Listener) error { return s.http.Serve(l) }

// Shutdown drains: /readyz turns 503 and new lock requests get 503 with
// Retry-After for DrainDelay, then the listener closes and in-flight
// requests finish. If ctx ends first, the remaining connections are closed
// and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.cancelWaits()
	s.cfg.Logger.Info("lockapi.drain.start", slog.Duration("delay", s.cfg.DrainDelay), slog.Int("in_flight", s.limiter.InFlight()))
	err := s.http.Drain(ctx, s.cfg.DrainDelay)
	s.cfg.Logger.Info("lockapi.drain.done", slog.Any("err", err))
	return err
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	type ready struct {
		Ready    bool     `json:"ready"`
		Reason   string   `json:"reason,omitempty"`
		Warnings []string `json:"warnings,omitempty"`
	}
	var warn []string
	if wb, ok := s.backend.(WarningBackend); ok {
		warn = wb.Warnings()
	}
	if s.draining.Load() {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, ready{Reason: "draining", Warnings: warn})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.backend.Ready(ctx); err != nil {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, ready{Reason: "backend: " + err.Error(), Warnings: warn})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ready{Ready: true, Warnings: warn})
}

// apiError is a non-2xx answer; reason labels the rejection metric.
type apiError struct {
	status   int
	reason   string
	body     ErrorResponse
	location string // 307
}

// opFunc handles one admitted lock request: a 200 body or an apiError.
type opFunc func(r *http.Request, resource string, call *opCall) (any, *apiError)

// opCall is one admitted lock request: its body, its contexts and its
// admission state.
type opCall struct {
	s    *Server
	ctx  context.Context // for the backend: the request's, with its deadline (RequestTimeout)
	base context.Context // the request's own context, without the backend deadline
	body []byte          // the request's body, read whole
	left bool            // the admission slot was given back for a wait
	// identity is the authenticated client (Config.Authenticate), "" when
	// the server does not authenticate.
	identity string
}

// owns refuses (403) a request whose client is not its authenticated
// identity.
func (c *opCall) owns(client string) *apiError {
	if c.identity == "" || client == c.identity {
		return nil
	}
	return forbidden(fmt.Sprintf("client %q is not the authenticated identity %q: a client acts only on leases held under its own identity", client, c.identity))
}

func forbidden(msg string) *apiError {
	return &apiError{status: http.StatusForbidden, reason: "forbidden", body: ErrorResponse{Error: CodeForbidden, Message: msg}}
}

// wait gives the admission slot back and takes one of the MaxWaiting
// waiting slots, for a backend call that may wait up to d: it returns the
// call's context (deadline d + RequestTimeout) and the function that ends
// the wait, or ok false when MaxWaiting acquires already wait.
func (c *opCall) wait(d time.Duration) (ctx context.Context, done func(), ok bool) {
	s := c.s
	if s.waiting.Add(1) > int64(s.cfg.MaxWaiting) {
		s.waiting.Add(-1)
		return nil, nil, false
	}
	s.limiter.Leave()
	c.left = true
	ctx, cancel := context.WithTimeout(c.base, d+s.cfg.RequestTimeout)
	stop := context.AfterFunc(s.stopWaits, cancel)
	return ctx, func() { stop(); cancel(); s.waiting.Add(-1) }, true
}

// lockOp wraps a lock operation in draining check, admission, a backend
// deadline, metrics and the JSON answer.
func (s *Server) lockOp(op string, h opFunc) http.Handler {
	om := s.m.op(op)
	admit := s.limiter.TryAcquire
	if op == "renew" || op == "release" {
		admit = s.limiter.TryAcquireHolder // holders first
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			om.rejected("draining")
			s.writeError(w, s.retryLater(503, "draining", CodeDraining, "instance is draining; retry on another"))
			return
		}
		if httpx.FromBrowser(r) {
			om.rejected("browser")
			s.writeError(w, forbidden("requests from web pages (Origin, Sec-Fetch-Site) are refused"))
			return
		}
		var identity string
		if s.cfg.Authenticate != nil {
			id, ok := s.cfg.Authenticate(r)
			if !ok {
				om.rejected("unauthorized")
				w.Header().Set("WWW-Authenticate", `Bearer realm="fencesim"`)
				s.writeError(w, &apiError{status: http.StatusUnauthorized, reason: "unauthorized", body: ErrorResponse{
					Error: CodeUnauthorized, Message: "a lock request needs Authorization: Bearer <token> naming a known client"}})
				return
			}
			identity = id
		}
		// The body first, then the slot: a request whose body is still
		// arriving (or never will) must not hold admission.
		raw, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes, s.cfg.BodyTimeout)
		if err != nil {
			aerr := bodyError(err)
			om.rejected(aerr.reason)
			s.writeError(w, aerr)
			return
		}
		if !admit() {
			s.m.shed.Inc()
			s.writeError(w, s.retryLater(429, "shed", CodeOverloaded, "too many requests in flight; retry later"))
			return
		}
		start := time.Now()
		resource := r.PathValue("resource")
		var body any
		var aerr *apiError
		call := &opCall{s: s, base: r.Context(), body: raw, identity: identity}
		if e := checkName("resource", resource, MaxNameLen); e != nil {
			aerr = e
		} else {
			var cancel context.CancelFunc
			call.ctx, cancel = context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			body, aerr = h(r, resource, call)
			cancel()
		}
		lat := time.Since(start)
		if !call.left {
			s.limiter.Done(lat, aerr != nil && aerr.reason == "overloaded")
		}
		if aerr != nil {
			om.rejected(aerr.reason)
			om.observe("rejected", lat)
			s.writeError(w, aerr)
			return
		}
		om.observe("ok", lat)
		httpx.WriteJSON(w, http.StatusOK, body)
	})
}

func (s *Server) retryLater(status int, reason, code, msg string) *apiError {
	return &apiError{status: status, reason: reason, body: ErrorResponse{
		Error: code, Message: msg, RetryAfterMs: s.cfg.RetryAfter.Milliseconds(),
	}}
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	httpx.SetRetryAfter(w, e.status, e.body.RetryAfterMs)
	if e.location != "" {
		w.Header().Set("Location", e.location)
	}
	httpx.WriteJSON(w, e.status, e.body)
}

// jsonKind names what a field must be in the API's terms, not Go's.
func jsonKind(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Token]():
		return "a decimal string (a token, e.g. \"42\")"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	default:
		return "a JSON object"
	}
}

// bodyError answers a body that could not be read whole.
func bodyError(err error) *apiError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: "too_large", body: ErrorResponse{
			Error: CodeTooLarge, Message: "body exceeds " + strconv.FormatInt(mbe.Limit, 10) + " bytes",
		}}
	case errors.Is(err, httpx.ErrBodyTimeout):
		return &apiError{status: http.StatusRequestTimeout, reason: "body_timeout", body: ErrorResponse{
			Error: CodeInvalid, Field: "body", Message: "body: " + err.Error(),
		}}
	default:
		return invalid("body", "reading it failed: %v", err)
	}
}

// decode parses body as one JSON object of v's fields and nothing after
// it, in one pass (JSON v2's rules): a field v does not have, a field
// given twice ({"client":"a","client":"b"}: not "last wins") or a name
// that differs from the field's in case is refused, naming the field.
func decode(body []byte, v any) *apiError {
	err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, errTokenFormat):
		return invalid("token", "%v", errTokenFormat)
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName && syn.JSONPointer.Parent() == "":
		return invalid(member(syn.JSONPointer), "appears twice in the body; give each field once")
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName:
		return invalid(member(syn.JSONPointer), "is not what the field takes: it holds an object that gives a name twice")
	case errors.As(err, &se) && se.Err == jsonv2.ErrUnknownName:
		return invalid(member(se.JSONPointer), "unknown field")
	case errors.As(err, &se) && se.GoType != nil && se.JSONPointer != "":
		return invalid(member(se.JSONPointer), "must be %s, got a JSON %s", jsonKind(se.GoType), kindName(se.JSONKind))
	case errors.As(err, &se):
		return invalid("body", "must be one JSON object, got a JSON %s", kindName(se.JSONKind))
	case errors.As(err, &syn):
		return invalid("body", "malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("body", "malformed JSON: the body ends before its object does")
	default:
		return invalid("body", "malformed JSON: %v", err)
	}
}

// member is the top-level field a JSON pointer into a request body names
// ("body" for the body itself, `""` for a field whose name is empty).
func member(p jsontext.Pointer) string {
	for tok := range p.Tokens() {
		if tok == "" {
			return `""`
		}
		return tok
	}
	return "body"
}

// kindName names a JSON kind as the API's messages do.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '[':
		return "array"
	case '{':
		return "object"
	default:
		return "value"
	}
}

// backendError maps a Backend error to the answer; anything untyped fails
// closed as 503.
func (s *Server) backendError(r *http.Request, err error) *apiError {
	var held *HeldError
	var over *OverloadedError
	var nl *NotLeaderError
	switch {
	case errors.As(err, &held):
		return &apiError{status: http.StatusConflict, reason: "held", body: ErrorResponse{
			Error: CodeHeld, Message: "resource is held by another lease", Holder: held.Holder,
			RetryAfterMs: held.RetryAfter.Milliseconds(),
		}}
	case errors.Is(err, ErrNotHolder):
		return &apiError{status: http.StatusConflict, reason: "not_holder", body: ErrorResponse{
			Error: CodeNotHolder, Message: "client does not hold this resource with this token (expired, released or taken over)",
		}}
	case errors.As(err, &over):
		e := s.retryLater(http.StatusTooManyRequests, "overloaded", CodeOverloaded, "backend overloaded; retry later")
		if over.RetryAfter > 0 {
			e.body.RetryAfterMs = over.RetryAfter.Milliseconds()
		}
		return e
	case errors.As(err, &nl) && nl.Leader != "":
		return &apiError{status: http.StatusTemporaryRedirect, reason: "not_leader", location: nl.Leader + r.URL.RequestURI(),
			body: ErrorResponse{Error: CodeNotLeader, Message: "not the leader", Leader: nl.Leader}}
	case errors.As(err, &nl):
		return s.retryLater(http.StatusServiceUnavailable, "not_leader", CodeUnavailable, "no leader known; retry later")
	default:
		s.cfg.Logger.Warn("lockapi.backend.error", slog.String("path", r.URL.Path), slog.Any("err", err))
		return s.retryLater(http.StatusServiceUnavailable, "unavailable", CodeUnavailable, "backend unavailable: "+err.Error())
	}
}

func (s *Server) acquire(r *http.Request, resource string, call *opCall) (any, *apiError) {
	var req AcquireRequest
	if e := decode(call.body, &req); e != nil {
		return nil, e
	}
	if e := checkName("client", req.Client, MaxNameLen); e != nil {
		return nil, e
	}
	if e := call.owns(req.Client); e != nil {
		return nil, e
	}
	if e := checkName("request_id", req.RequestID, MaxRequestIDLen); e != nil {
		return nil, e
	}
	ttl, e := s.checkTTL(req.TTLms)
	if e != nil {
		return nil, e
	}
	if hi := s.cfg.MaxWait.Milliseconds(); req.WaitMs < 0 || req.WaitMs > hi {
		return nil, invalid("wait_ms", "must be between 0 and %d (milliseconds), got %d", hi, req.WaitMs)
	}
	ctx, wait := call.ctx, time.Duration(req.WaitMs)*time.Millisecond
	if wait > 0 {
		wctx, done, ok := call.wait(wait)
		if ok {
			ctx = wctx
			defer done()
		} else {
			wait = 0 // too many wait already: answered at once
		}
	}
	l, err := s.backend.Acquire(ctx, resource, req.Client, ttl, wait, req.RequestID)
	if err != nil && wait > 0 && s.stopWaits.Err() != nil && ctx.Err() != nil {
		// The drain ended the wait: the client waits on another instance.
		return nil, s.retryLater(503, "draining", CodeDraining, "instance is draining; retry on another")
	}
	if err != nil {
		return nil, s.backendError(r, err)
	}
	s.m.grants.WithLabelValues("acquire").Inc()
	return LeaseResponse{Token: Token(l.Token), TTLms: l.TTL.Milliseconds(), WaitedMs: l.Waited.Milliseconds(),
		TokenMAC: s.tokenMAC(resource, l.Token, req.Client)}, nil
}

func (s *Server) renew(r *http.Request, resource string, call *opCall) (any, *apiError) {
	var req RenewRequest
	if e := decodeHolder(call.body, &req, &req.Client, &req.Token); e != nil {
		return nil, e
	}
	if e := call.owns(req.Client); e != nil {
		return nil, e
	}
	ttl, e := s.checkTTL(req.TTLms)
	if e != nil {
		return nil, e
	}
	l, err := s.backend.Renew(call.ctx, resource, req.Client, uint64(req.Token), ttl)
	if err != nil {
		return nil, s.backendError(r, err)
	}
	s.m.grants.WithLabelValues("renew").Inc()
	return LeaseResponse{Token: Token(l.Token), TTLms: l.TTL.Milliseconds(), TokenMAC: s.tokenMAC(resource, l.Token, req.Client)}, nil
}

// tokenMAC signs a grant for the fenced store, when the server has a key.
func (s *Server) tokenMAC(resource string, token uint64, holder string) string {
	if s.cfg.TokenKey == nil {
		return ""
	}
	return fencemac.Sign(s.cfg.TokenKey, resource, token, holder)
}

func (s *Server) release(r *http.Request, resource string, call *opCall) (any, *apiError) {
	var req ReleaseRequest
	if e := decodeHolder(call.body, &req, &req.Client, &req.Token); e != nil {
		return nil, e
	}
	if e := call.owns(req.Client); e != nil {
		return nil, e
	}
	if req.RequestID != "" {
		if e := checkName("request_id", req.RequestID, MaxRequestIDLen); e != nil {
			return nil, e
		}
	}
	if err := s.backend.Release(call.ctx, resource, req.Client, uint64(req.Token), req.RequestID); err != nil {
		return nil, s.backendError(r, err)
	}
	return ReleaseResponse{Released: true}, nil
}

func (s *Server) get(r *http.Request, resource string, call *opCall) (any, *apiError) {
	st, err := s.backend.Get(call.ctx, resource)
	if err != nil {
		return nil, s.backendError(r, err)
	}
	if st.Held && call.identity != "" && st.Holder != call.identity {
		return nil, forbidden("the lease is held by another client; only its holder may read it")
	}
	resp := LockResponse{Resource: resource, Held: st.Held, LastToken: Token(st.LastToken)}
	if st.Held {
		resp.Holder, resp.Token, resp.TTLms = st.Holder, Token(st.Token), st.TTL.Milliseconds()
	}
	return resp, nil
}

// decodeHolder decodes a renew or release body into v and checks the
// holder's identity in it: the client name and a non-zero token.
func decodeHolder(body []byte, v any, client *string, tok *Token) *apiError {
	if e := decode(body, v); e != nil {
		return e
	}
	if e := checkName("client", *client, MaxNameLen); e != nil {
		return e
	}
	if *tok == 0 {
		return invalid("token", "is required (a decimal string, never 0)")
	}
	return nil
}
