package lockclient

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencesim/fencesim/internal/gopool"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realclock"
)

// serial runs one lock's events one at a time, in the order they were
// posted, as the process contract requires of the state machine's Start,
// replies and timer callbacks. It has no goroutine of its own: whoever
// posts while nothing runs drains the queue (a timer's goroutine, an HTTP
// call's, the caller's), and a post made while something runs, even from
// inside it, only queues. Every event is short: the HTTP calls run on
// the attempts' goroutines (attempts).
type serial struct {
	mu      sync.Mutex
	queue   []func()
	running bool
}

func (s *serial) post(f func()) {
	s.mu.Lock()
	s.queue = append(s.queue, f)
	if s.running {
		s.mu.Unlock()
		return
	}
	s.running = true
	for len(s.queue) > 0 {
		f := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		f()
		s.mu.Lock()
	}
	s.running = false
	s.mu.Unlock()
}

// call runs f on the executor and waits for it. Not from inside an event.
func (s *serial) call(f func()) {
	done := make(chan struct{})
	s.post(func() { f(); close(done) })
	<-done
}

// env is the lock's process.Env: the machine's clock with callbacks on the
// lock's executor, a memory disk (the state machine's incarnation: request
// ids are made unique across locks by the lock's prefix instead), and Send
// as an HTTP call.
type env struct {
	l     *Lock
	clock *realclock.Clock
	disk  memDisk
	rng   *rand.Rand
}

var discard = slog.New(slog.DiscardHandler)

func (e *env) ID() process.NodeID                        { return 0 }
func (e *env) Name() string                              { return e.l.c.cfg.Name }
func (e *env) Clock() process.Clock                      { return e.clock }
func (e *env) Disk() process.Disk                        { return &e.disk }
func (e *env) Rand() *rand.Rand                          { return e.rng }
func (e *env) Log() *slog.Logger                         { return discard }
func (e *env) Send(to process.NodeID, m process.Message) { e.l.send(to, m) }

// memDisk is a process.Disk in memory, used on the executor only.
type memDisk struct{ m map[string][]byte }

func (d *memDisk) Write(key string, value []byte) {
	if d.m == nil {
		d.m = map[string][]byte{}
	}
	d.m[key] = append([]byte(nil), value...)
}
func (d *memDisk) Append(key string, data []byte) { d.Write(key, append(d.m[key], data...)) }
func (d *memDisk) Delete(key string)              { delete(d.m, key) }
func (d *memDisk) Truncate(key string, size int) {
	if v, ok := d.m[key]; ok && size >= 0 && size < len(v) {
		d.m[key] = v[:size:size]
	}
}
func (d *memDisk) Read(key string) ([]byte, bool) {
	v, ok := d.m[key]
	return v, ok
}
func (d *memDisk) Keys(prefix string) []string {
	var ks []string
	for k := range d.m {
		if strings.HasPrefix(k, prefix) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}
func (d *memDisk) Sync() {}

// attempts runs the HTTP attempts of every lock of the process, each on a
// goroutine kept for the next: one started for an attempt grows its stack
// through net/http's client, copying it several times (6 % of a cycle's
// CPU in BenchmarkCycleMem), and a fresh one starts small again.
var attempts = gopool.New(10 * time.Second)
