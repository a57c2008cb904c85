// Package httpx is the HTTP plumbing the lock API (lockapi) and the fenced
// store service (storesvc) share: the http.Server with its timeouts,
// JSON answers, Retry-After, draining, name validation and the latency
// buckets. It imports nothing of fencesim.
package httpx

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Timeouts are an http.Server's connection timeouts.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// NewServer is an http.Server for h with the timeouts, 16 KiB of headers
// at most, and its error log at warning level on logger.
func NewServer(h http.Handler, t Timeouts, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Drain waits delay (or until ctx ends), then shuts srv down; if that
// fails, the remaining connections are closed. It returns Shutdown's error.
// The caller turns draining on (and logs) around it.
func Drain(ctx context.Context, srv *http.Server, delay time.Duration) error {
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	return err
}

// SetRetryAfter sets the Retry-After header of a 429 or 503 to retryMs in
// whole seconds, rounded up, at least 1; other statuses get none.
func SetRetryAfter(w http.ResponseWriter, status int, retryMs int64) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		secs := (retryMs + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
}

// WriteJSON answers status with v as JSON, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
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
