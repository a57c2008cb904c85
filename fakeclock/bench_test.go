package fakeclock

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// ringSched is a scheduler for benchmarks whose timers all have the same
// period: events fall due in the order they are scheduled, so a FIFO ring
// is a correct queue. It allocates nothing once the ring has grown, so a
// benchmark's allocations are the clock's own.
type ringSched struct {
	now    time.Duration
	nextID uint64
	ring   []ringEvent
	head   int
}

type ringEvent struct {
	at time.Duration
	id uint64
	h  Handler
}

func (s *ringSched) TrueNow() time.Duration { return s.now }

func (s *ringSched) Schedule(at time.Duration, h Handler) uint64 {
	s.nextID++
	s.ring = append(s.ring, ringEvent{at: at, id: s.nextID, h: h})
	return s.nextID
}

// Cancel leaves the event in the ring: the timer recognises it as stale by
// its id when it is delivered anyway.
func (s *ringSched) Cancel(uint64) bool { return true }

// step delivers the earliest event.
func (s *ringSched) step() {
	ev := s.ring[s.head]
	s.ring[s.head] = ringEvent{}
	s.head++
	if s.head > len(s.ring)/2 { // compact, keeping the backing array
		n := copy(s.ring, s.ring[s.head:])
		clear(s.ring[n:])
		s.ring = s.ring[:n]
		s.head = 0
	}
	s.now = ev.at
	ev.h.Fire(ev.id)
}

var pendingSizes = []int{100, 10_000}

// BenchmarkTimerTick fires timers that re-arm themselves from their own
// callback with Reset, as a heartbeat does, with n of them pending: one op
// is one firing and one re-arm. It must not allocate.
func BenchmarkTimerTick(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := &ringSched{ring: make([]ringEvent, 0, 2*n+2)}
			c := New(s, Config{DriftPPM: 100})
			for range n {
				var t clockwork.Timer
				t = c.AfterFunc(time.Millisecond, func() { t.Reset(time.Millisecond) })
			}
			for range 2 * n { // warm-up
				s.step()
			}
			b.ReportAllocs()
			for b.Loop() {
				s.step()
			}
			if c.Pending() != n {
				b.Fatalf("%d timers pending, want %d", c.Pending(), n)
			}
		})
	}
}

// BenchmarkTimerResetPending re-arms pending timers (Reset replaces their
// scheduled event), round robin among n pending: one op is one Reset. It
// must not allocate.
func BenchmarkTimerResetPending(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := &ringSched{ring: make([]ringEvent, 0, n+1)}
			c := New(s, Config{DriftPPM: 100})
			timers := make([]clockwork.Timer, n)
			for i := range timers {
				timers[i] = c.AfterFunc(time.Second, func() {})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				timers[i].Reset(time.Second)
				if i++; i == n {
					i = 0
					s.ring = s.ring[:0] // the stub keeps what Cancel left
				}
			}
		})
	}
}

// BenchmarkAfterFuncStop creates a timer and stops it, with n others
// pending: the timer object is the one allocation.
func BenchmarkAfterFuncStop(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := &ringSched{ring: make([]ringEvent, 0, n+1)}
			c := New(s, Config{DriftPPM: 100})
			for range n {
				c.AfterFunc(time.Hour, func() {})
			}
			f := func() {}
			b.ReportAllocs()
			for b.Loop() {
				c.AfterFunc(time.Second, f).Stop()
				s.ring = s.ring[:n]
			}
		})
	}
}

// BenchmarkSetDriftPPM changes the drift with n timers pending, each of
// which is rescheduled, in creation order: one op is one call.
func BenchmarkSetDriftPPM(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := &ringSched{ring: make([]ringEvent, 0, n+1)}
			c := New(s, Config{})
			timers := make([]clockwork.Timer, n)
			for i := range timers {
				timers[i] = c.AfterFunc(time.Hour, func() {})
			}
			// Scramble the pending list the way stops and re-arms do.
			for i := 0; i < n; i += 3 {
				timers[i].Stop()
				timers[i].Reset(time.Hour)
			}
			b.ReportAllocs()
			ppm := int64(0)
			for b.Loop() {
				ppm = 100 - ppm
				if err := c.SetDriftPPM(ppm); err != nil {
					b.Fatal(err)
				}
				s.ring = s.ring[:0]
			}
		})
	}
}
