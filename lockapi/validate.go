package lockapi

import (
	"fmt"
	"time"

	"github.com/fencesim/fencesim/internal/httpx"
)

// Name limits: resource and client names and request ids are short ASCII
// identifiers. The charset keeps them safe as Redis key parts and inside
// the space-separated lease value lockd stores (no spaces, braces or
// colons), and printable in logs without escaping.
const (
	MaxNameLen      = 128
	MaxRequestIDLen = 64
)

// ValidName reports whether s is a valid resource or client name (max
// MaxNameLen) or request id (max MaxRequestIDLen).
func ValidName(s string, max int) bool {
	return httpx.ValidName(s, max)
}

// invalid is a 400 naming the field.
func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: 400, reason: "invalid", body: ErrorResponse{
		Error: CodeInvalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...),
	}}
}

func checkName(field, v string, max int) *apiError {
	if !ValidName(v, max) {
		return invalid(field, "must be 1..%d characters of [A-Za-z0-9._-], got %q", max, httpx.Truncate(v, 40))
	}
	return nil
}

func (s *Server) checkTTL(ms int64) (time.Duration, *apiError) {
	lo, hi := s.cfg.MinTTL.Milliseconds(), s.cfg.MaxTTL.Milliseconds()
	if ms < lo || ms > hi {
		return 0, invalid("ttl_ms", "must be between %d and %d (milliseconds), got %d", lo, hi, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
