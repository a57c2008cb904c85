package testhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil && rec.Code != http.StatusNotFound {
		t.Fatalf("%s %s: %d with a body that is not JSON: %q", method, path, rec.Code, rec.Body)
	}
	return rec.Code, m
}

// TestClockHook: the request is validated (400 naming the field), a field
// left out keeps its value, and the service's setter gets the whole state.
func TestClockHook(t *testing.T) {
	type call struct {
		off time.Duration
		ppm int64
	}
	var calls []call
	h := Handler(Hooks{Clock: func(_ context.Context, off time.Duration, ppm int64) error {
		calls = append(calls, call{off, ppm})
		return nil
	}})
	bad := []struct{ body, field string }{
		{`{}`, "offset_ms"},
		{`{"offset_ms":86400001}`, "offset_ms"},
		{`{"drift_ppm":1000000}`, "drift_ppm"},
		{`{"drift_ppm":-1000000}`, "drift_ppm"},
		{`{"drift_ppm":1.5}`, "body"},
		{`{"skew":1}`, "body"},
		{`{"drift_ppm":1}{}`, "body"},
		{`not json`, "body"},
	}
	for _, c := range bad {
		code, m := do(t, h, "POST", "/test/clock", c.body)
		if code != http.StatusBadRequest || m["field"] != c.field || !strings.HasPrefix(m["message"].(string), c.field+": ") {
			t.Errorf("POST /test/clock %s = %d %v, want 400 naming %s", c.body, code, m, c.field)
		}
	}
	if len(calls) != 0 {
		t.Fatalf("rejected requests reached the clock: %v", calls)
	}
	for _, step := range []struct {
		body string
		want call
	}{
		{`{"offset_ms":-1500}`, call{-1500 * time.Millisecond, 0}},
		{`{"drift_ppm":200000}`, call{-1500 * time.Millisecond, 200000}},
		{`{"offset_ms":0,"drift_ppm":0}`, call{0, 0}},
	} {
		code, m := do(t, h, "POST", "/test/clock", step.body)
		got := calls[len(calls)-1]
		if code != http.StatusOK || got != step.want || m["offset_ms"] != float64(step.want.off.Milliseconds()) || m["drift_ppm"] != float64(step.want.ppm) {
			t.Errorf("POST /test/clock %s = %d %v, clock set to %v; want 200 and %v", step.body, code, m, got, step.want)
		}
	}
}

// TestDiskHook: sync_delay_ms is required and bounded.
func TestDiskHook(t *testing.T) {
	var got []time.Duration
	h := Handler(Hooks{Disk: func(d time.Duration) { got = append(got, d) }})
	for _, body := range []string{`{}`, `{"sync_delay_ms":-1}`, `{"sync_delay_ms":60001}`} {
		if code, m := do(t, h, "POST", "/test/disk", body); code != http.StatusBadRequest || m["field"] != "sync_delay_ms" {
			t.Errorf("POST /test/disk %s = %d %v, want 400 naming sync_delay_ms", body, code, m)
		}
	}
	if code, m := do(t, h, "POST", "/test/disk", `{"sync_delay_ms":250}`); code != http.StatusOK || m["sync_delay_ms"] != float64(250) {
		t.Errorf("POST /test/disk 250 = %d %v", code, m)
	}
	if len(got) != 1 || got[0] != 250*time.Millisecond {
		t.Errorf("disk delays set: %v, want [250ms]", got)
	}
}

// TestOnlyGivenHooksAreRouted: a hook the service does not offer is a 404.
func TestOnlyGivenHooksAreRouted(t *testing.T) {
	h := Handler(Hooks{Disk: func(time.Duration) {}})
	for _, p := range []string{"/test/clock", "/test/applies"} {
		method := "POST"
		if p == "/test/applies" {
			method = "GET"
		}
		if code, _ := do(t, h, method, p, `{"drift_ppm":1}`); code != http.StatusNotFound {
			t.Errorf("%s %s on a service without it = %d, want 404", method, p, code)
		}
	}
}

// TestApplyLogPages: entries come back in order after the given seq,
// pages bounded by limit, stamped on CLOCK_MONOTONIC; bad parameters name
// themselves; the oldest are dropped past MaxApplies.
func TestApplyLogPages(t *testing.T) {
	l := NewApplyLog()
	before := MonoNow()
	for i := range 5 {
		l.Record("k", int64(i), uint64(10-i), i%2 == 0)
	}
	h := Handler(Hooks{Applies: l})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/test/applies?after=1&limit=3", nil))
	var p AppliesPage
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 200 {
		t.Fatalf("GET /test/applies = %d %s (%v)", rec.Code, rec.Body, err)
	}
	if len(p.Applies) != 3 || !p.More || p.LastSeq != 5 || p.FirstSeq != 1 || p.BootMonoNs > before {
		t.Fatalf("page = %+v, want seqs 2..4 of 5 with more", p)
	}
	for i, a := range p.Applies {
		if a.Seq != uint64(i+2) || a.Value != int64(i+1) || a.Token != uint64(9-i) || a.Accepted != (i%2 == 1) || a.MonoNs < before || since(a.MonoNs) < 0 {
			t.Errorf("entry %d = %+v", i, a)
		}
	}
	if q := l.Page(5, MaxPage); len(q.Applies) != 0 || q.More {
		t.Errorf("page after the last = %+v, want empty", q)
	}
	for _, c := range []struct{ q, field string }{{"after=-1", "after"}, {"after=x", "after"}, {"limit=0", "limit"}, {"limit=1001", "limit"}} {
		if code, m := do(t, h, "GET", "/test/applies?"+c.q, ""); code != 400 || m["field"] != c.field {
			t.Errorf("GET /test/applies?%s = %d %v, want 400 naming %s", c.q, code, m, c.field)
		}
	}
	for range MaxApplies {
		l.Record("k", 0, 1, true)
	}
	q := l.Page(0, 2)
	if q.FirstSeq <= 1 || q.Applies[0].Seq != q.FirstSeq || q.LastSeq != 5+MaxApplies {
		t.Errorf("after overflowing: first %d, page from %d, last %d", q.FirstSeq, q.Applies[0].Seq, q.LastSeq)
	}
}

func TestParseEnabled(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		if got, err := ParseEnabled(v); got != want || err != nil {
			t.Errorf("ParseEnabled(%q) = %v, %v", v, got, err)
		}
	}
	if _, err := ParseEnabled("true"); err == nil {
		t.Error("ParseEnabled(true) accepted")
	}
}
