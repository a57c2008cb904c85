// Package gopool runs functions on goroutines that stay for the next one.
//
// A goroutine that runs deep code (net/http's client) grows its stack a
// copy at a time, and a fresh goroutine starts small again; one kept for
// the next function has grown already. Idle goroutines end after a while,
// so a pool that goes quiet holds none.
package gopool

import "time"

// Pool runs functions on kept goroutines; safe for concurrent use. Any
// number run at once: a function that finds no idle goroutine gets a new
// one.
type Pool struct {
	work chan func()
	idle time.Duration
}

// New returns a pool whose goroutines end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{work: make(chan func()), idle: idle}
}

// Go runs f on an idle goroutine of the pool if one waits, else on a new
// one.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.loop(f)
	}
}

func (p *Pool) loop(f func()) {
	t := time.NewTimer(p.idle)
	for {
		f()
		t.Reset(p.idle) // Go ≥ 1.23 timers: no stale tick after Reset
		select {
		case f = <-p.work:
		case <-t.C:
			return
		}
	}
}
