// Package gopool runs functions on goroutines that stay for the next one.
//
// A goroutine that runs deep code (net/http's client) grows its stack a
// copy at a time, and a fresh goroutine starts small again; one kept for
// the next function has grown already. The goroutine idle the shortest
// time takes the next function, so after a burst the ones the load no
// longer needs stay idle and end after a while: a pool holds about as many
// goroutines as recently ran at once, and a quiet pool holds none.
package gopool

import (
	"slices"
	"sync"
	"time"
)

// Pool runs functions on kept goroutines; safe for concurrent use. Any
// number run at once: a function that finds no idle goroutine gets a new
// one.
type Pool struct {
	idleFor time.Duration

	mu   sync.Mutex
	idle []*worker // the most recently idle last
}

// worker is one kept goroutine; work hands it its next function (room
// for one: whoever takes the worker off idle is the only sender).
type worker struct{ work chan func() }

// New returns a pool whose goroutines end after idle without work.
func New(idle time.Duration) *Pool { return &Pool{idleFor: idle} }

// Go runs f on the most recently idle goroutine of the pool, or on a new
// one if none is idle.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.work <- f
		return
	}
	p.mu.Unlock()
	go p.run(&worker{work: make(chan func(), 1)}, f)
}

func (p *Pool) run(w *worker, f func()) {
	t := time.NewTimer(p.idleFor)
	for {
		f()
		f = nil // its captures are not kept while the goroutine waits
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		t.Reset(p.idleFor) // Go ≥ 1.23 timers: no stale tick after Reset
		select {
		case f = <-w.work:
			continue
		case <-t.C:
		}
		p.mu.Lock()
		if i := slices.Index(p.idle, w); i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		f = <-w.work // Go took this worker as its timer fired: run what it sends
	}
}
