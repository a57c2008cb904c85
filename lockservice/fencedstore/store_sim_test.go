package fencedstore

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

func addStore(t *testing.T, w *sim.World, obs lockservice.Observer) sim.NodeID {
	return simtest.AddNode(t, w, "store", func() sim.Process {
		return NewFencedStore(StoreConfig{Limits: lockservice.DefaultLimits(), Observer: obs})
	}, fakeclock.Config{})
}

// The store rejects a token below the highest it accepted, accepts an equal
// one, and keeps its highest token and its dedup state across a crash right
// after a decision (it synced before replying).
func TestFencedStoreFencesByTokenAndSurvivesCrash(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	st := addStore(t, w, rec)
	p, _ := simtest.AddProbe(t, w, "p")
	const restartAt = 60 * time.Millisecond
	rec.OnApplied = func(_, _ string, _ uint64, value int64, _ bool) {
		if value == 55 { // crash at the very instant the equal-token write is decided
			w.At(w.Now(), "crash store", func() { w.Crash(st) })
			w.At(restartAt, "restart store", func() { w.Restart(st) })
		}
	}
	equal := lockservice.WriteRequest{Resource: "r", Client: "p", Token: 5, Value: 55, Request: 3}
	p.SendAt(1*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 5, Value: 50, Request: 1})
	p.SendAt(20*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 3, Value: 30, Request: 2})
	p.SendAt(40*time.Millisecond, st, equal)
	p.SendAt(70*time.Millisecond, st, equal) // a late duplicate of the equal-token write, after the restart
	p.SendAt(80*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 4, Value: 40, Request: 4})
	p.SendAt(100*time.Millisecond, st, lockservice.ReadRequest{Resource: "r", Client: "p", Request: 5})
	p.SendAt(120*time.Millisecond, st, equal) // now older than the latest request: stale, no reply
	simtest.RunToQuiescence(t, w)

	if w.Stats().Crashes != 1 {
		t.Fatalf("store crashed %d times, want 1", w.Stats().Crashes)
	}
	want := map[uint64]lockservice.WriteReply{
		1: {Request: 1, Accepted: true, Highest: 5},
		2: {Request: 2, Accepted: false, Highest: 5},
		4: {Request: 4, Accepted: false, Highest: 5}, // after the restart
	}
	for req, wr := range want {
		if got := p.OnlyWriteReply(t, req); got != wr {
			t.Errorf("write %d: %+v, want %+v", req, got, wr)
		}
	}
	var eq []lockservice.WriteReply
	for _, r := range p.Writes {
		if r.Msg.Request == 3 {
			eq = append(eq, r.Msg)
		}
	}
	wantEq := lockservice.WriteReply{Request: 3, Accepted: true, Highest: 5}
	if len(eq) != 2 || eq[0] != wantEq || eq[1] != wantEq {
		t.Errorf("equal-token write and its duplicate after the restart: %+v, want twice %+v", eq, wantEq)
	}
	if len(p.Reads) != 1 || p.Reads[0].Msg != (lockservice.ReadReply{Request: 5, Value: 55, Token: 5}) {
		t.Errorf("read after the restart: %+v, want value 55 with token 5", p.Reads)
	}
	if n := len(rec.Of("applied")); n != 4 {
		t.Errorf("store applied %d writes, want 4 (the duplicate is replayed, not applied)", n)
	}
}

// Writes and reads outside the Limits get an Err reply, never a panic, and
// change nothing.
func TestFencedStoreAnswersInvalidRequestsWithErr(t *testing.T) {
	w := simtest.NewTestWorld(t, nil)
	rec := simtest.NewRecorder(w)
	st := addStore(t, w, rec)
	p, _ := simtest.AddProbe(t, w, "p")
	long := strings.Repeat("n", 129)
	writes := []struct {
		req  lockservice.WriteRequest
		want string
	}{
		{lockservice.WriteRequest{Resource: "", Client: "p", Token: 1, Value: 1, Request: 1}, "empty resource name"},
		{lockservice.WriteRequest{Resource: long, Client: "p", Token: 1, Value: 1, Request: 2}, "resource name of 129 bytes"},
		{lockservice.WriteRequest{Resource: "r", Client: "", Token: 1, Value: 1, Request: 3}, "empty client name"},
		{lockservice.WriteRequest{Resource: "r", Client: long, Token: 1, Value: 1, Request: 4}, "client name of 129 bytes"},
		{lockservice.WriteRequest{Resource: "r", Client: "p", Token: 0, Value: 1, Request: 5}, "token 0 is never granted"},
	}
	for i, c := range writes {
		p.SendAt(time.Duration(i+1)*10*time.Millisecond, st, c.req)
	}
	p.SendAt(100*time.Millisecond, st, lockservice.ReadRequest{Resource: "", Client: "p", Request: 6})
	p.SendAt(110*time.Millisecond, st, lockservice.ReadRequest{Resource: "r", Client: long, Request: 7})
	simtest.RunToQuiescence(t, w)

	for _, c := range writes {
		got := p.OnlyWriteReply(t, c.req.Request)
		if got.Accepted || !strings.HasPrefix(got.Err, "lockservice: ") || !strings.Contains(got.Err, c.want) {
			t.Errorf("%+v: reply %+v, want not accepted with an error naming %q", c.req, got, c.want)
		}
	}
	wantReads := map[uint64]string{6: "empty resource name", 7: "client name of 129 bytes"}
	if len(p.Reads) != len(wantReads) {
		t.Fatalf("read replies %+v, want %d", p.Reads, len(wantReads))
	}
	for _, r := range p.Reads {
		if want := wantReads[r.Msg.Request]; !strings.HasPrefix(r.Msg.Err, "lockservice: ") || !strings.Contains(r.Msg.Err, want) {
			t.Errorf("read %d: reply %+v, want an error naming %q", r.Msg.Request, r.Msg, want)
		}
	}
	s := w.Process(st).(*FencedStore)
	if len(s.Table().Resources()) != 0 || len(rec.Calls) != 0 {
		t.Errorf("invalid requests changed the store: resources %v, observer %+v", s.Table().Resources(), rec.Calls)
	}
}
