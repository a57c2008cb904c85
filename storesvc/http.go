package storesvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/internal/httpx"
	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
)

// Header names. A token header holds a decimal uint64 and nothing else.
const (
	HeaderToken    = "Fencing-Token"     // PUT: the writer's token; GET answer: the token that wrote the value
	HeaderTokenMax = "Fencing-Token-Max" // answers: the key's T_max after the request
)

// MaxKeyLen bounds a key; keys are 1..MaxKeyLen characters of
// [A-Za-z0-9._-], the lock API's resource names, so that the resource a
// lock guards can name the object it protects.
const MaxKeyLen = 128

// Error codes, the "error" field of an error body.
const (
	CodeInvalid     = "invalid"
	CodeStale       = "stale_token"
	CodeNotFound    = "not_found"
	CodeTooLarge    = "too_large"
	CodeOverloaded  = "overloaded"
	CodeDraining    = "draining"
	CodeUnavailable = "unavailable"
	CodeFull        = "full"
	CodeInternal    = "internal"
	CodeForged      = "forged_token"
	CodeUnauth      = "unauthorized"
)

// identityKey carries the authenticated client in a request's context.
type identityKey struct{}

// WriteResponse is a 200 to a PUT: the write was accepted and synced.
type WriteResponse struct {
	Key   string `json:"key"`
	Token uint64 `json:"token,string"` // the accepted write's token
	TMax  uint64 `json:"t_max,string"` // the key's highest accepted token
}

// ObjectResponse is a 200 to a GET.
type ObjectResponse struct {
	Key   string `json:"key"`
	Value int64  `json:"value,string"`
	Token uint64 `json:"token,string"` // the token of the write Value came from
	TMax  uint64 `json:"t_max,string"`
}

// ErrorResponse is every non-2xx body. A 409 carries the token refused and
// the key's T_max; 429 and 503 carry retry_after_ms.
type ErrorResponse struct {
	Error        string `json:"error"`
	Message      string `json:"message"`
	Field        string `json:"field,omitempty"`
	Key          string `json:"key,omitempty"`
	Token        uint64 `json:"token,omitempty,string"`
	TMax         uint64 `json:"t_max,omitempty,string"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
}

// apiError is a non-2xx answer; reason labels the error metric.
type apiError struct {
	status int
	reason string
	body   ErrorResponse
}

func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, reason: "invalid", body: ErrorResponse{
		Error: CodeInvalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...),
	}}
}

func (s *Service) newHTTPServer() *httpx.Server {
	mux := http.NewServeMux()
	mux.Handle("PUT /v1/objects/{key}", s.objectOp("write", s.put))
	mux.Handle("GET /v1/objects/{key}", s.objectOp("read", s.get))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	if s.cfg.TestHooks {
		mux.Handle("/test/", testhooks.Handler(s.testHooks()))
	}
	return httpx.NewServer(mux, httpx.Timeouts{
		ReadHeader: s.cfg.ReadHeaderTimeout, Read: s.cfg.ReadTimeout, Write: s.cfg.WriteTimeout, Idle: s.cfg.IdleTimeout,
	}, s.cfg.Logger)
}

func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	type ready struct {
		Ready  bool   `json:"ready"`
		Reason string `json:"reason,omitempty"`
	}
	if s.draining.Load() {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, ready{Reason: "draining"})
		return
	}
	// The store answers when its executor runs a no-op in time.
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.node.Do(ctx, func(process.Env) {}); err != nil {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, ready{Reason: "store: " + err.Error()})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ready{Ready: true})
}

// opFunc handles one admitted object request: the status and body of the
// answer, headers set on w.
type opFunc func(w http.ResponseWriter, r *http.Request, key string) (int, any, *apiError)

// objectOp wraps an object operation in the draining check, the in-flight
// bound, key validation, a deadline, metrics and the JSON answer.
func (s *Service) objectOp(op string, h opFunc) http.Handler {
	om := s.m.op(op)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			om.errors.WithLabelValues("draining").Inc()
			s.writeError(w, s.retryLater(http.StatusServiceUnavailable, "draining", CodeDraining, "the store is draining; retry shortly"))
			return
		}
		if httpx.FromBrowser(r) {
			om.errors.WithLabelValues("browser").Inc()
			s.writeError(w, &apiError{status: http.StatusForbidden, reason: "browser", body: ErrorResponse{
				Error: CodeInvalid, Message: "requests from web pages (Origin, Sec-Fetch-Site) are refused"}})
			return
		}
		if s.cfg.Authenticate != nil {
			id, ok := s.cfg.Authenticate(r)
			if !ok {
				om.errors.WithLabelValues("unauthorized").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="fencesim"`)
				s.writeError(w, &apiError{status: http.StatusUnauthorized, reason: "unauthorized", body: ErrorResponse{
					Error: CodeUnauth, Message: "an object request needs Authorization: Bearer <token> naming a known client"}})
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		}
		// The body first, then the slot: a request whose body is still
		// arriving (or never will) must not hold one of MaxInFlight.
		raw, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes, httpx.BodyTimeout)
		if err != nil {
			aerr := bodyError(err)
			om.errors.WithLabelValues(aerr.reason).Inc()
			s.writeError(w, aerr)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if s.inFlight.Add(1) > int64(s.cfg.MaxInFlight) {
			s.inFlight.Add(-1)
			om.errors.WithLabelValues("shed").Inc()
			s.writeError(w, s.retryLater(http.StatusTooManyRequests, "shed", CodeOverloaded, fmt.Sprintf("more than %d requests in flight; retry later", s.cfg.MaxInFlight)))
			return
		}
		defer s.inFlight.Add(-1)
		start := time.Now()
		key := r.PathValue("key")
		var (
			status int
			body   any
			aerr   *apiError
		)
		if !httpx.ValidName(key, MaxKeyLen) {
			aerr = invalid("key", "must be 1..%d characters of [A-Za-z0-9._-], got %q", MaxKeyLen, httpx.Truncate(key, 40))
		} else {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			status, body, aerr = h(w, r.WithContext(ctx), key)
			cancel()
		}
		om.latency.Observe(time.Since(start).Seconds())
		if aerr != nil {
			if aerr.reason != "" {
				om.errors.WithLabelValues(aerr.reason).Inc()
			}
			s.writeError(w, aerr)
			return
		}
		httpx.WriteJSON(w, status, body)
	})
}

// put is PUT /v1/objects/{key}: a fenced write.
func (s *Service) put(w http.ResponseWriter, r *http.Request, key string) (int, any, *apiError) {
	token, aerr := parseToken(r.Header.Values(HeaderToken))
	if aerr != nil {
		return 0, nil, aerr
	}
	if aerr := s.checkMAC(r, key, token); aerr != nil {
		return 0, nil, aerr
	}
	value, aerr := s.parseValue(w, r)
	if aerr != nil {
		return 0, nil, aerr
	}
	rep, err := s.write(r.Context(), key, token, value)
	if err != nil {
		return 0, nil, s.storeError(r, err)
	}
	if rep.Err != "" { // validation in the store; parseToken and validKey should have caught it
		return 0, nil, invalid("request", "%s", rep.Err)
	}
	w.Header().Set(HeaderTokenMax, strconv.FormatUint(rep.Highest, 10))
	if !rep.Accepted {
		s.m.writes.WithLabelValues("stale").Inc()
		return 0, nil, &apiError{status: http.StatusConflict, body: ErrorResponse{
			Error: CodeStale, Key: key, Token: token, TMax: rep.Highest,
			Message: fmt.Sprintf("token %d is below the highest token accepted for this key, %d: a newer lock holder has written", token, rep.Highest),
		}}
	}
	s.m.writes.WithLabelValues("accepted").Inc()
	return http.StatusOK, WriteResponse{Key: key, Token: token, TMax: rep.Highest}, nil
}

// checkMAC, with a fencing key, refuses a token the lock service did not
// sign for this key (resource) and the holder the request names: 403,
// before the store sees the write.
func (s *Service) checkMAC(r *http.Request, key string, token uint64) *apiError {
	if s.cfg.TokenKey == nil {
		return nil
	}
	holder, mac := r.Header.Get(fencemac.HeaderHolder), r.Header.Get(fencemac.HeaderMAC)
	if id, _ := r.Context().Value(identityKey{}).(string); id != "" && holder != id {
		return &apiError{status: http.StatusForbidden, reason: "forbidden", body: ErrorResponse{
			Error: CodeForged, Key: key, Token: token,
			Message: fmt.Sprintf("the token's holder %q is not the authenticated client %q: only a lease's holder writes with its token", httpx.Truncate(holder, 40), id),
		}}
	}
	if holder != "" && mac != "" && fencemac.Verify(s.cfg.TokenKey, key, token, holder, mac) {
		return nil
	}
	s.cfg.Logger.Warn("storesvc.forged-token", slog.String("key", key), slog.Uint64("token", token), slog.String("holder", httpx.Truncate(holder, 40)), slog.String("remote", r.RemoteAddr))
	return &apiError{status: http.StatusForbidden, reason: "forged", body: ErrorResponse{
		Error: CodeForged, Key: key, Token: token,
		Message: fmt.Sprintf("token %d for %q carries no valid lock-service signature (headers %s and %s): this store accepts only tokens its lock service issued", token, key, fencemac.HeaderHolder, fencemac.HeaderMAC),
	}}
}

// get is GET /v1/objects/{key}.
func (s *Service) get(w http.ResponseWriter, r *http.Request, key string) (int, any, *apiError) {
	o, err := s.read(r.Context(), key)
	if err != nil {
		return 0, nil, s.storeError(r, err)
	}
	if o.token == 0 {
		s.m.reads.WithLabelValues("not_found").Inc()
		return 0, nil, &apiError{status: http.StatusNotFound, body: ErrorResponse{
			Error: CodeNotFound, Key: key, Message: "no write to this key was ever accepted",
		}}
	}
	s.m.reads.WithLabelValues("found").Inc()
	w.Header().Set(HeaderToken, strconv.FormatUint(o.token, 10))
	w.Header().Set(HeaderTokenMax, strconv.FormatUint(o.tmax, 10))
	return http.StatusOK, ObjectResponse{Key: key, Value: o.value, Token: o.token, TMax: o.tmax}, nil
}

// parseToken reads the Fencing-Token header: exactly one, a decimal
// uint64 of digits only (no sign, no spaces), never 0 (no lock service
// grants token 0).
func parseToken(vals []string) (uint64, *apiError) {
	switch len(vals) {
	case 0:
		return 0, invalid(HeaderToken, "header is required: the fencing token of the lock the writer holds, a decimal uint64")
	case 1:
	default:
		return 0, invalid(HeaderToken, "header given %d times; give it once", len(vals))
	}
	v := vals[0]
	ok := v != "" && len(v) <= 20
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] >= '0' && v[i] <= '9'
	}
	t, err := strconv.ParseUint(v, 10, 64)
	switch {
	case !ok || err != nil:
		return 0, invalid(HeaderToken, "must be a decimal uint64 (digits only, at most 18446744073709551615), got %q", httpx.Truncate(v, 40))
	case t == 0:
		return 0, invalid(HeaderToken, "token 0 is never granted by a lock service")
	}
	return t, nil
}

// parseValue reads a PUT's body: a decimal int64, surrounding whitespace
// allowed (curl -d, echo), at most MaxBodyBytes.
func (s *Service) parseValue(w http.ResponseWriter, r *http.Request) (int64, *apiError) {
	b, err := io.ReadAll(r.Body) // read whole, bounded and timed, by objectOp
	if err != nil {
		return 0, bodyError(err)
	}
	v := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, invalid("body", "must be a decimal int64 (the store holds integers, as the simulated store does), got %q", httpx.Truncate(v, 40))
	}
	return n, nil
}

// bodyError answers a body that could not be read whole.
func bodyError(err error) *apiError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: "too_large", body: ErrorResponse{
			Error: CodeTooLarge, Field: "body", Message: fmt.Sprintf("body: exceeds %d bytes (the value is a decimal int64)", mbe.Limit),
		}}
	case errors.Is(err, httpx.ErrBodyTimeout):
		return &apiError{status: http.StatusRequestTimeout, reason: "body_timeout", body: ErrorResponse{
			Error: CodeInvalid, Field: "body", Message: "body: " + err.Error(),
		}}
	default:
		return invalid("body", "reading it failed: %v", err)
	}
}

// storeError maps a failure to reach the store: a request that timed out
// before the executor ran it was never submitted; a closed node is a
// draining or failed instance. Both are retryable 503s.
func (s *Service) storeError(r *http.Request, err error) *apiError {
	switch {
	case errors.Is(err, errFull):
		return &apiError{status: http.StatusInsufficientStorage, reason: "full", body: ErrorResponse{
			Error: CodeFull, Field: "key", Message: fmt.Sprintf("the store holds its maximum of %d keys; a new key is refused, existing keys take writes", s.cfg.MaxKeys),
		}}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, realrt.ErrClosed):
		return s.retryLater(http.StatusServiceUnavailable, "unavailable", CodeUnavailable, "the store did not take the request in time; it was not applied, retry")
	default:
		s.cfg.Logger.Error("storesvc.store.error", slog.String("path", r.URL.Path), slog.Any("err", err))
		return &apiError{status: http.StatusInternalServerError, reason: "internal", body: ErrorResponse{Error: CodeInternal, Message: err.Error()}}
	}
}

func (s *Service) retryLater(status int, reason, code, msg string) *apiError {
	return &apiError{status: status, reason: reason, body: ErrorResponse{
		Error: code, Message: msg, RetryAfterMs: s.cfg.RetryAfter.Milliseconds(),
	}}
}

func (s *Service) writeError(w http.ResponseWriter, e *apiError) {
	httpx.SetRetryAfter(w, e.status, e.body.RetryAfterMs)
	if e.body.TMax != 0 {
		w.Header().Set(HeaderTokenMax, strconv.FormatUint(e.body.TMax, 10))
	}
	httpx.WriteJSON(w, e.status, e.body)
}
