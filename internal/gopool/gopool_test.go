package gopool

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// goid is the running goroutine's number, from its stack trace's header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

// burst runs n functions that all wait for each other, so n goroutines.
func burst(p *Pool, n int) {
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		p.Go(func() { started.Done(); <-release; done.Done() })
	}
	started.Wait() // all n run at once: none waits for another
	close(release)
	done.Wait()
}

// one runs a function on the pool, waits for it and returns the number of
// the goroutine it ran on.
func one(p *Pool) string {
	ran := make(chan string)
	p.Go(func() { ran <- goid() })
	id := <-ran
	time.Sleep(time.Millisecond) // the goroutine is back waiting
	return id
}

// TestGoKeepsGoroutines: functions that block all run at once, and
// functions one after another run on one kept goroutine.
func TestGoKeepsGoroutines(t *testing.T) {
	p := New(time.Minute)
	burst(p, 20)
	ids := map[string]bool{}
	for range 100 {
		ids[one(p)] = true
	}
	if len(ids) != 1 {
		t.Errorf("100 functions one after another ran on %d goroutines, want 1", len(ids))
	}
}

// TestPoolShrinksToItsLoad: after a burst of 20, a function at a time
// keeps one goroutine busy and the other 19 end; a quiet pool ends all.
func TestPoolShrinksToItsLoad(t *testing.T) {
	const idle = 200 * time.Millisecond
	before := runtime.NumGoroutine()
	p := New(idle)
	burst(p, 20)
	if g := runtime.NumGoroutine() - before; g < 20 {
		t.Fatalf("%d goroutines kept after a burst of 20, want 20", g)
	}
	// A function at a time, until the idle ones have ended (a loaded
	// machine may fire their timers late) or 25 idle periods have passed.
	start := time.Now()
	for time.Since(start) < 3*idle || runtime.NumGoroutine()-before > 1 && time.Since(start) < 25*idle {
		one(p)
	}
	if g := runtime.NumGoroutine() - before; g > 1 {
		t.Errorf("a function at a time for %v after a burst: %d goroutines kept, want 1", time.Since(start).Round(time.Millisecond), g)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine() - before; g > 0 {
		t.Errorf("a quiet pool kept %d goroutines", g)
	}
}

// TestGoRacingTheIdleTimer: functions handed to goroutines whose timers
// are firing all run (run's "Go took this worker" path).
func TestGoRacingTheIdleTimer(t *testing.T) {
	p := New(time.Microsecond)
	var wg sync.WaitGroup
	for range 2000 {
		wg.Add(1)
		p.Go(wg.Done)
		time.Sleep(time.Microsecond) // some find an idle goroutine, some a timer firing
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("functions handed to goroutines at their timeout never ran")
	}
}
