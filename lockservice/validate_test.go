package lockservice

import (
	"strings"
	"testing"
	"time"
)

// checkErr asserts that err is nil when want is "", and otherwise an error
// starting with "lockservice: " whose message contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("want nil, got %q", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want an error naming %q, got nil", want)
	}
	if !strings.HasPrefix(err.Error(), "lockservice: ") {
		t.Errorf("error %q does not start with %q", err, "lockservice: ")
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the problem %q", err, want)
	}
}

var (
	name128 = strings.Repeat("x", 128)
	name129 = strings.Repeat("x", 129)
)

func TestLimitsCheckAcquireRejectsBadRequestsWithNamedProblem(t *testing.T) {
	l := DefaultLimits()
	ok := AcquireRequest{Resource: "r", Client: "c", TTL: time.Second, Request: 1}
	with := func(f func(*AcquireRequest)) AcquireRequest { r := ok; f(&r); return r }
	cases := []struct {
		name string
		req  AcquireRequest
		want string // "" = valid
	}{
		{"valid", ok, ""},
		{"resource of exactly 128 bytes", with(func(r *AcquireRequest) { r.Resource = name128 }), ""},
		{"client of exactly 128 bytes", with(func(r *AcquireRequest) { r.Client = name128 }), ""},
		{"ttl at the minimum", with(func(r *AcquireRequest) { r.TTL = l.MinTTL }), ""},
		{"ttl at the maximum", with(func(r *AcquireRequest) { r.TTL = l.MaxTTL }), ""},
		{"empty resource", with(func(r *AcquireRequest) { r.Resource = "" }), "empty resource name"},
		{"resource of 129 bytes", with(func(r *AcquireRequest) { r.Resource = name129 }), "resource name of 129 bytes exceeds the limit of 128"},
		{"empty client", with(func(r *AcquireRequest) { r.Client = "" }), "empty client name"},
		{"client of 129 bytes", with(func(r *AcquireRequest) { r.Client = name129 }), "client name of 129 bytes exceeds the limit of 128"},
		{"ttl zero", with(func(r *AcquireRequest) { r.TTL = 0 }), "ttl 0s must be positive"},
		{"ttl negative", with(func(r *AcquireRequest) { r.TTL = -time.Second }), "ttl -1s must be positive"},
		{"ttl below minimum", with(func(r *AcquireRequest) { r.TTL = l.MinTTL - time.Nanosecond }), "below the minimum of 10ms"},
		{"ttl above maximum", with(func(r *AcquireRequest) { r.TTL = l.MaxTTL + time.Nanosecond }), "exceeds the maximum of 10m0s"},
		{"key of 128 bytes", with(func(r *AcquireRequest) { r.Key = name128 }), ""},
		{"key of 129 bytes", with(func(r *AcquireRequest) { r.Key = name129 }), "request key of 129 bytes exceeds the limit of 128"},
		{"wait at the maximum", with(func(r *AcquireRequest) { r.Wait = l.MaxWait }), ""},
		{"negative wait", with(func(r *AcquireRequest) { r.Wait = -1 }), "wait -1ns must not be negative"},
		{"wait above maximum", with(func(r *AcquireRequest) { r.Wait = l.MaxWait + time.Nanosecond }), "wait 1m0.000000001s exceeds the maximum of 1m0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkErr(t, l.CheckAcquire(c.req), c.want) })
	}
}

func TestLimitsCheckHeldRejectsBadRequestsWithNamedProblem(t *testing.T) {
	l := DefaultLimits()
	cases := []struct {
		name             string
		resource, client string
		token            uint64
		want             string
	}{
		{"valid", "r", "c", 1, ""},
		{"128-byte names", name128, name128, 7, ""},
		{"token 0", "r", "c", 0, "token 0 is never granted"},
		{"empty resource", "", "c", 1, "empty resource name"},
		{"resource of 129 bytes", name129, "c", 1, "resource name of 129 bytes"},
		{"empty client", "r", "", 1, "empty client name"},
		{"client of 129 bytes", "r", name129, 1, "client name of 129 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkErr(t, l.CheckHeld(c.resource, c.client, c.token), c.want) })
	}
}

func TestLimitsCheckWriteRejectsBadRequestsWithNamedProblem(t *testing.T) {
	l := DefaultLimits()
	cases := []struct {
		name string
		req  WriteRequest
		want string
	}{
		{"valid", WriteRequest{Resource: "r", Client: "c", Token: 1, Value: 5, Request: 1}, ""},
		{"128-byte names", WriteRequest{Resource: name128, Client: name128, Token: 3}, ""},
		{"token 0", WriteRequest{Resource: "r", Client: "c", Token: 0}, "token 0 is never granted"},
		{"empty resource", WriteRequest{Client: "c", Token: 1}, "empty resource name"},
		{"resource of 129 bytes", WriteRequest{Resource: name129, Client: "c", Token: 1}, "resource name of 129 bytes"},
		{"empty client", WriteRequest{Resource: "r", Token: 1}, "empty client name"},
		{"client of 129 bytes", WriteRequest{Resource: "r", Client: name129, Token: 1}, "client name of 129 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkErr(t, l.CheckWrite(c.req), c.want) })
	}
}
