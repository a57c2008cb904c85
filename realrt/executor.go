package realrt

import "sync"

// executor runs a node's events one at a time on a goroutine of its own, in
// the order they were posted: the process contract promises a process that
// Start, Receive and its timer callbacks never overlap, so process code
// needs no locks.
//
// Its queue is unbounded for timer callbacks and Do calls (their number is
// bounded by the process's timers and by the callers waiting on Do), and
// bounded for messages from the network (postMessage), which are dropped
// beyond inboxDepth: the network may lose a message, and a flood from peers
// must not grow a node's memory without end.
//
// Two lanes: the process's own events (timers, peers' messages: post,
// postMessage) run before work from outside (Do: postLow), and at most
// lowPerBatch of the latter run between two looks at the former, so that
// a flood of client requests never holds up a heartbeat or a vote — a
// replica that misses them costs the group an election. Each lane is FIFO;
// the order between them is not promised (it is the order of events from
// different sources, which the network does not promise either).
type executor struct {
	mu         sync.Mutex
	queue      []func() // posted, not yet taken
	low        []func() // postLow'ed, not yet taken
	messages   int      // network messages among queue
	inboxDepth int
	closed     bool          // no more posts accepted
	wake       chan struct{} // capacity 1: the loop has work or must stop
	done       chan struct{} // closed when the loop has returned
	dropped    uint64        // network messages dropped on a full inbox
	after      func()        // run after each batch (process.Batcher); nil: none
}

// newExecutor starts an executor; after, if not nil, runs on it after each
// batch of posted work.
func newExecutor(inboxDepth int, after func()) *executor {
	e := &executor{inboxDepth: inboxDepth, wake: make(chan struct{}, 1), done: make(chan struct{}), after: after}
	go e.loop()
	return e
}

// post queues f to run after everything posted before it, and reports
// whether it was accepted (false once the executor is closing). It never
// waits for f to run, so realclock's timers may call it.
func (e *executor) post(f func()) bool { return e.push(&e.queue, f) }

// push appends f to a lane, false once the executor is closing.
func (e *executor) push(lane *[]func(), f func()) bool {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	*lane = append(*lane, f)
	e.mu.Unlock()
	e.signal()
	return true
}

// lowPerBatch bounds the outside work run in one batch.
const lowPerBatch = 64

// postLow is post for work from outside the process (Do): it runs after
// the process's own events that are waiting.
func (e *executor) postLow(f func()) bool { return e.push(&e.low, f) }

// postMessage is post for a message from the network: it is dropped (and
// counted) when inboxDepth messages are already waiting.
func (e *executor) postMessage(f func()) bool {
	e.mu.Lock()
	if e.closed || e.messages >= e.inboxDepth {
		if !e.closed {
			e.dropped++
		}
		e.mu.Unlock()
		return false
	}
	e.messages++
	e.queue = append(e.queue, func() {
		e.mu.Lock()
		e.messages--
		e.mu.Unlock()
		f()
	})
	e.mu.Unlock()
	e.signal()
	return true
}

func (e *executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// loop runs batches of posted work until the executor is closed and its
// queue is empty.
func (e *executor) loop() {
	defer close(e.done)
	var batch, low []func()
	for {
		<-e.wake
		for {
			e.mu.Lock()
			batch, e.queue = e.queue, batch[:0]
			n := min(len(e.low), lowPerBatch)
			low = append(low[:0], e.low[:n]...)
			clear(e.low[:n])
			e.low = append(e.low[:0], e.low[n:]...)
			closed := e.closed
			e.mu.Unlock()
			if len(batch) == 0 && len(low) == 0 {
				if closed {
					return
				}
				break
			}
			for _, b := range [2][]func(){batch, low} {
				for i, f := range b {
					f()
					b[i] = nil // let the closure's captures go
				}
			}
			if e.after != nil {
				e.after()
			}
		}
	}
}

// close stops accepting work, lets the loop run what was posted before,
// and waits for it to return. Timer callbacks and messages that arrive
// afterwards are dropped, as a stopped machine's would be.
func (e *executor) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.signal()
	<-e.done
}

// droppedMessages reports how many network messages a full inbox dropped.
func (e *executor) droppedMessages() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}
