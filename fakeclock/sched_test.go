package fakeclock

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeSched is a minimal deterministic Scheduler: a slice of events sorted by
// (at, seq), run one by one on the calling goroutine.
type fakeSched struct {
	now     time.Duration
	seq     uint64
	nextID  uint64
	events  []event
	cancels int // number of Cancel calls, to check DropTimers makes none
}

type event struct {
	at  time.Duration
	seq uint64
	id  uint64
	h   Handler
}

func (s *fakeSched) TrueNow() time.Duration { return s.now }

func (s *fakeSched) Schedule(at time.Duration, h Handler) uint64 {
	if at < s.now {
		panic("fakeSched: Schedule in the past")
	}
	s.nextID++
	s.seq++
	ev := event{at: at, seq: s.seq, id: s.nextID, h: h}
	i, _ := slices.BinarySearchFunc(s.events, ev, func(a, b event) int {
		switch {
		case a.at != b.at:
			if a.at < b.at {
				return -1
			}
			return 1
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	s.events = slices.Insert(s.events, i, ev)
	return ev.id
}

func (s *fakeSched) Cancel(id uint64) bool {
	s.cancels++
	for i, ev := range s.events {
		if ev.id == id {
			s.events = slices.Delete(s.events, i, i+1)
			return true
		}
	}
	return false
}

// next returns the true time of the earliest event.
func (s *fakeSched) next() (time.Duration, bool) {
	if len(s.events) == 0 {
		return 0, false
	}
	return s.events[0].at, true
}

// step runs the earliest event, advancing true time to it.
func (s *fakeSched) step() bool {
	if len(s.events) == 0 {
		return false
	}
	ev := s.events[0]
	s.events = s.events[1:]
	s.now = ev.at
	ev.h.Fire(ev.id)
	return true
}

// runUntil runs every event due at or before t, then sets true time to t.
func (s *fakeSched) runUntil(t time.Duration) {
	for len(s.events) > 0 && s.events[0].at <= t {
		s.step()
	}
	if t > s.now {
		s.now = t
	}
}

// discardAll drops every event, as the simulator does on a crash.
func (s *fakeSched) discardAll() { s.events = nil }

func newClock(t *testing.T, cfg Config) (*fakeSched, *Clock) {
	t.Helper()
	s := &fakeSched{}
	return s, New(s, cfg)
}

// mustPanic runs f and checks that it panics with a value whose string form
// contains every one of subs.
func mustPanic(t *testing.T, f func(), subs ...string) {
	t.Helper()
	var got any
	func() {
		defer func() { got = recover() }()
		f()
	}()
	if got == nil {
		t.Fatalf("expected a panic containing %q, got none", subs)
	}
	var msg string
	switch v := got.(type) {
	case string:
		msg = v
	case error:
		msg = v.Error()
	default:
		t.Fatalf("panic value %#v is neither string nor error", got)
	}
	for _, sub := range subs {
		if !strings.Contains(msg, sub) {
			t.Fatalf("panic %q does not contain %q", msg, sub)
		}
	}
}
