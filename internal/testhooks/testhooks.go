// Package testhooks is the test-only HTTP surface of the real services
// (fencesim-node, fencesim-store, fencesim-lockd) that `simrun live`
// drives: POST /test/clock skews the service's own clock, POST /test/disk
// slows each fsync, GET /test/applies pages the store's apply log. A
// service mounts it only when FENCESIM_TEST_HOOKS=1 (Enabled); otherwise
// the routes do not exist (404). They are for fault-injection runs on a
// test machine and must never be turned on in a deployment: anyone who
// reaches the port could move the lease clock.
//
// Wire format (JSON; unknown fields and bodies over 4 KiB refused):
//
//	POST /test/clock {"offset_ms":int,"drift_ppm":int}
//	     sets the wall offset (ms, ±86400000) and the drift (ppm,
//	     ±999999); a field left out keeps its current value. The drift
//	     moves the monotonic reading, the wall reading and the timers the
//	     service's logic uses (a fast clock ends a lease early in real
//	     time). → 200 {"offset_ms","drift_ppm"}: the clock's state now.
//	POST /test/disk  {"sync_delay_ms":int}  (0..60000, required)
//	     every later fsync of the service's data waits that long first.
//	     → 200 {"sync_delay_ms"}
//	GET  /test/applies?after=N&limit=M  (store only; after ≥ 0, default
//	     0; limit 1..1000, default 1000)
//	     → 200 {"boot_mono_ns","first_seq","last_seq","more","applies":[
//	        {"seq","key","value","token","accepted","mono_ns"}, ...]}
//	     the applies with seq > N in order. mono_ns is CLOCK_MONOTONIC
//	     (read with clock_gettime, not Go's own origin) right after the
//	     apply was fsynced, so a harness on the same machine reading the
//	     same clock shares the base. The log is in memory: a restarted
//	     store starts again at seq 1 under a new boot_mono_ns; it keeps
//	     the last MaxApplies entries (first_seq says where it starts).
//
// Every 400 is {"error":"invalid","field":NAME,"message":"NAME: ..."}.
package testhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// EnvVar turns the hooks on when set to "1"; FlagName is the flag of the
// commands that take flags.
const (
	EnvVar   = "FENCESIM_TEST_HOOKS"
	FlagName = "test-hooks"
)

// ParseEnabled reads EnvVar's value: "" or "0" off, "1" on; anything else
// is an error saying what is allowed.
func ParseEnabled(v string) (bool, error) {
	switch v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, errors.New("must be 0 or 1 (1 turns on the test-only /test/* endpoints; never in a deployment)")
}

// Bounds of the requests' fields.
const (
	MaxOffsetMs    = 86_400_000
	MaxDriftPPM    = 999_999
	MaxSyncDelayMs = 60_000
	MaxPage        = 1000
)

// Hooks are what a service can do; a nil field leaves its route out.
type Hooks struct {
	// Clock sets the service's clock skew: the wall offset and the drift.
	Clock func(ctx context.Context, offset time.Duration, ppm int64) error
	// Disk sets the delay before each fsync.
	Disk func(delay time.Duration)
	// Applies is the store's apply log.
	Applies *ApplyLog
}

// ClockState is /test/clock's answer, and its request with both fields.
type ClockState struct {
	OffsetMs int64 `json:"offset_ms"`
	DriftPPM int64 `json:"drift_ppm"`
}

// DiskState is /test/disk's request and answer.
type DiskState struct {
	SyncDelayMs int64 `json:"sync_delay_ms"`
}

// ErrorResponse is every non-2xx body.
type ErrorResponse struct {
	Error   string `json:"error"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Handler serves h's routes under /test/.
func Handler(h Hooks) http.Handler {
	mux := http.NewServeMux()
	if h.Clock != nil {
		c := &clockHook{set: h.Clock}
		mux.HandleFunc("POST /test/clock", c.serve)
	}
	if h.Disk != nil {
		mux.HandleFunc("POST /test/disk", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				SyncDelayMs *int64 `json:"sync_delay_ms"`
			}
			if !decode(w, r, &req) {
				return
			}
			switch {
			case req.SyncDelayMs == nil:
				invalid(w, "sync_delay_ms", "is required: the delay before each fsync, 0..%d ms", MaxSyncDelayMs)
				return
			case *req.SyncDelayMs < 0 || *req.SyncDelayMs > MaxSyncDelayMs:
				invalid(w, "sync_delay_ms", "must be 0..%d, got %d", MaxSyncDelayMs, *req.SyncDelayMs)
				return
			}
			h.Disk(time.Duration(*req.SyncDelayMs) * time.Millisecond)
			writeJSON(w, http.StatusOK, DiskState{SyncDelayMs: *req.SyncDelayMs})
		})
	}
	if h.Applies != nil {
		mux.HandleFunc("GET /test/applies", h.Applies.serve)
	}
	return mux
}

// clockHook keeps the state it set, so a request may change one field.
type clockHook struct {
	set   func(ctx context.Context, offset time.Duration, ppm int64) error
	mu    sync.Mutex
	state ClockState
}

func (c *clockHook) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OffsetMs *int64 `json:"offset_ms"`
		DriftPPM *int64 `json:"drift_ppm"`
	}
	if !decode(w, r, &req) {
		return
	}
	switch {
	case req.OffsetMs == nil && req.DriftPPM == nil:
		invalid(w, "offset_ms", "give offset_ms, drift_ppm or both")
		return
	case req.OffsetMs != nil && (*req.OffsetMs < -MaxOffsetMs || *req.OffsetMs > MaxOffsetMs):
		invalid(w, "offset_ms", "must be -%d..%d (a day), got %d", MaxOffsetMs, MaxOffsetMs, *req.OffsetMs)
		return
	case req.DriftPPM != nil && (*req.DriftPPM < -MaxDriftPPM || *req.DriftPPM > MaxDriftPPM):
		invalid(w, "drift_ppm", "must be -%d..%d (the clock must keep moving forward), got %d", MaxDriftPPM, MaxDriftPPM, *req.DriftPPM)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.state
	if req.OffsetMs != nil {
		next.OffsetMs = *req.OffsetMs
	}
	if req.DriftPPM != nil {
		next.DriftPPM = *req.DriftPPM
	}
	if err := c.set(r.Context(), time.Duration(next.OffsetMs)*time.Millisecond, next.DriftPPM); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, ErrorResponse{Error: "unavailable", Message: "setting the clock: " + err.Error()})
		return
	}
	c.state = next
	writeJSON(w, http.StatusOK, next)
}

// decode reads a bounded JSON body with no unknown fields into v, or
// answers 400 and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		invalid(w, "body", "must be one JSON object with the documented fields: %v", err)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		invalid(w, "body", "must hold one JSON object and nothing after it")
		return false
	}
	return true
}

func invalid(w http.ResponseWriter, field, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: "invalid", Field: field, Message: field + ": " + fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// parseQueryInt reads an optional decimal query parameter in lo..hi.
func parseQueryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("must be a decimal integer in %d..%d, got %q", lo, hi, v)
	}
	return n, nil
}
