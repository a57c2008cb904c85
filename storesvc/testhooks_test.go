package storesvc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/testhooks"
	"github.com/fencesim/fencesim/process"
)

// TestTestHooksAbsentByDefault: without Config.TestHooks no /test/ route
// exists, and an unfenced store cannot be asked for.
func TestTestHooksAbsentByDefault(t *testing.T) {
	s := start(t, t.TempDir(), Config{})
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/test/clock", `{"drift_ppm":1000}`}, {"POST", "/test/disk", `{"sync_delay_ms":1}`}, {"GET", "/test/applies", ""},
	} {
		if a := do(t, r.method, s.url+r.path, nil, r.body); a.status != http.StatusNotFound {
			t.Errorf("%s %s without test hooks = %d %s, want 404", r.method, r.path, a.status, a.raw)
		}
	}
	if _, err := Open(Config{DataDir: t.TempDir(), Unfenced: true}); err == nil || !strings.Contains(err.Error(), "TestHooks") {
		t.Errorf("Open(Unfenced without TestHooks) = %v, want a refusal naming TestHooks", err)
	}
}

func applies(t *testing.T, base, query string) testhooks.AppliesPage {
	t.Helper()
	a := do(t, "GET", base+"/test/applies"+query, nil, "")
	var p testhooks.AppliesPage
	if err := json.Unmarshal([]byte(a.raw), &p); a.status != 200 || err != nil {
		t.Fatalf("GET /test/applies%s = %d %s (%v)", query, a.status, a.raw, err)
	}
	return p
}

// TestApplyLog: with test hooks, every decided write is in the apply log
// in order, with its token and verdict and a CLOCK_MONOTONIC stamp inside
// the request's interval as another process would read it; a fenced store
// records a refused write as not accepted, an unfenced one accepts it.
func TestApplyLog(t *testing.T) {
	for _, unfenced := range []bool{false, true} {
		s := start(t, t.TempDir(), Config{TestHooks: true, Unfenced: unfenced})
		before := testhooks.MonoNow()
		put(t, s.url, "k", 7, "70").expect(t, 200, nil)
		stale := put(t, s.url, "k", 5, "50")
		after := testhooks.MonoNow()
		put(t, s.url, "other", 1, "1").expect(t, 200, nil)
		if unfenced {
			stale.expect(t, 200, map[string]string{"token": "5", "t_max": "7"})
			get(t, s.url, "k").expect(t, 200, map[string]string{"value": "50", "token": "5"})
		} else {
			stale.expect(t, 409, nil)
		}
		p := applies(t, s.url, "")
		want := []testhooks.Apply{
			{Seq: 1, Key: "k", Value: 70, Token: 7, Accepted: true},
			{Seq: 2, Key: "k", Value: 50, Token: 5, Accepted: unfenced},
			{Seq: 3, Key: "other", Value: 1, Token: 1, Accepted: true},
		}
		if len(p.Applies) != len(want) || p.More || p.LastSeq != 3 {
			t.Fatalf("unfenced=%v: apply log %+v, want %+v", unfenced, p, want)
		}
		for i, a := range p.Applies {
			mono := a.MonoNs
			a.MonoNs = 0
			if a != want[i] {
				t.Errorf("unfenced=%v: apply %d = %+v, want %+v", unfenced, i, a, want[i])
			}
			if i < 2 && (mono < before || mono > after) {
				t.Errorf("apply %d stamped %d, outside its requests' interval [%d, %d] on CLOCK_MONOTONIC", i, mono, before, after)
			}
		}
		if q := applies(t, s.url, "?after=2&limit=1"); len(q.Applies) != 1 || q.Applies[0].Seq != 3 {
			t.Errorf("page after 2: %+v", q)
		}
	}
}

// TestDiskHookDelaysWrites: after POST /test/disk, a write (whose answer
// follows its fsync) takes at least the delay; set back to 0 it is off.
func TestDiskHookDelaysWrites(t *testing.T) {
	s := start(t, t.TempDir(), Config{TestHooks: true})
	const delay = 150 * time.Millisecond
	do(t, "POST", s.url+"/test/disk", nil, `{"sync_delay_ms":150}`).expect(t, 200, nil)
	begin := time.Now()
	put(t, s.url, "k", 1, "1").expect(t, 200, nil)
	if took := time.Since(begin); took < delay {
		t.Errorf("a write on a disk slowed by %v answered after %v", delay, took)
	}
	if a := do(t, "POST", s.url+"/test/disk", nil, `{"sync_delay_ms":-5}`); a.status != 400 || a.body["field"] != "sync_delay_ms" {
		t.Errorf("a negative delay got %d %s", a.status, a.raw)
	}
}

// TestClockHookReachesTheStoresClock: /test/clock skews the clock the
// store's node runs on (the store's logic reads none today; the lock
// service's does, see nodesvc).
func TestClockHookReachesTheStoresClock(t *testing.T) {
	s := start(t, t.TempDir(), Config{TestHooks: true})
	do(t, "POST", s.url+"/test/clock", nil, `{"offset_ms":3600000,"drift_ppm":5000}`).expect(t, 200, nil)
	var off time.Duration
	if err := s.svc.node.Do(t.Context(), func(env process.Env) { off = env.Clock().Now().Sub(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if off < 59*time.Minute || off > 61*time.Minute {
		t.Errorf("the store's clock reads %v from the machine's after offset_ms=3600000", off)
	}
}
