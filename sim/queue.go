package sim

import "time"

// eventKind says what a queued event does when it fires.
type eventKind uint8

const (
	evStart   eventKind = iota + 1 // boot or restart: Process.Start
	evDeliver                      // a message arrives at its destination
	evTimer                        // a node's timer (fakeclock.AfterFunc) falls due
	evResume                       // a pause ends
	evAction                       // a harness callback (workload, scripted fault)
)

var eventKindNames = [...]string{
	evStart:   "start",
	evDeliver: "deliver",
	evTimer:   "timer",
	evResume:  "resume",
	evAction:  "action",
}

func (k eventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "event?"
}

// event is one entry of the queue. It is stored by value: pushing and popping
// allocate nothing once the heap's backing array has grown, and no closure is
// made per event (an action carries the callback the harness made; a timer's
// handler waits in the timer table under the event's id).
type event struct {
	at    time.Duration
	seq   uint64
	kind  eventKind
	epoch uint32 // incarnation of node when scheduled; stale after a crash
	node  NodeID // the node the event happens at
	from  NodeID // sender, for deliveries
	id    uint64 // timer id or action index
	msg   Message
	fn    func() // actions only
}

// before orders events by (time, sequence). The sequence number is assigned
// at push time, so ties break in scheduling order and never depend on maps.
func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// queue is a hand-written binary min-heap of events. container/heap costs
// 2–3× as much here, through its interface calls and boxing.
type queue struct {
	items []event
	seq   uint64
}

func (q *queue) len() int { return len(q.items) }

// push adds e, stamping it with the next sequence number. Sifting moves a
// hole rather than swapping, which halves the copies of these wide events.
func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.items = append(q.items, e)
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(&q.items[parent]) {
			break
		}
		q.items[i] = q.items[parent]
		i = parent
	}
	q.items[i] = e
}

// pop removes and returns the earliest event.
func (q *queue) pop() (event, bool) {
	n := len(q.items)
	if n == 0 {
		return event{}, false
	}
	top := q.items[0]
	last := n - 1
	moving := q.items[last]
	q.items[last] = event{} // drop references so the GC can reclaim them
	q.items = q.items[:last]
	if last == 0 {
		return top, true
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		small := l
		if r := l + 1; r < last && q.items[r].before(&q.items[l]) {
			small = r
		}
		if !q.items[small].before(&moving) {
			break
		}
		q.items[i] = q.items[small]
		i = small
	}
	q.items[i] = moving
	return top, true
}

// peekAt returns the time of the earliest event.
func (q *queue) peekAt() (time.Duration, bool) {
	if len(q.items) == 0 {
		return 0, false
	}
	return q.items[0].at, true
}

// BareLoop is the calibration of the event loop: it keeps pending events in
// the queue and pops and re-pushes them until fired events have gone by,
// doing nothing else — no process, no network, no trace. simrun bench times
// it to put the protocol's events per second in proportion. It returns a
// checksum of the popped times so the work cannot be optimised away.
func BareLoop(pending, fired int) uint64 {
	var q queue
	q.items = make([]event, 0, pending+1)
	x := uint64(0x9E3779B97F4A7C15)
	next := func() time.Duration {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return time.Duration(x % 1_000_000)
	}
	for range pending {
		q.push(event{at: next(), kind: evTimer})
	}
	var sum uint64
	for range fired {
		ev, _ := q.pop()
		sum += uint64(ev.at)
		q.push(event{at: ev.at + next(), kind: evTimer})
	}
	return sum
}
