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

// TestGoRunsEveryFunctionAndKeepsGoroutines: functions that block all run
// at once; functions one after another run on one kept goroutine; idle
// goroutines end.
func TestGoRunsEveryFunctionAndKeepsGoroutines(t *testing.T) {
	p := New(300 * time.Millisecond)
	release := make(chan struct{})
	var started, done sync.WaitGroup
	const n = 20
	started.Add(n)
	done.Add(n)
	for range n {
		p.Go(func() { started.Done(); <-release; done.Done() })
	}
	started.Wait() // all 20 run at once: none waits for another
	close(release)
	done.Wait()

	ids := map[string]bool{}
	var mu sync.Mutex
	for range 100 {
		ran := make(chan struct{})
		p.Go(func() {
			mu.Lock()
			ids[goid()] = true
			mu.Unlock()
			close(ran)
		})
		<-ran
		time.Sleep(time.Millisecond) // the goroutine is back waiting
	}
	if len(ids) > n+1 {
		t.Errorf("100 functions one after another ran on %d goroutines, want the %d kept", len(ids), n)
	}

	base := runtime.NumGoroutine()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base-n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base-n {
		t.Errorf("idle goroutines stayed: %d goroutines, %d before they were idle long enough", g, base)
	}
}
