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

// queue is a hand-written binary min-heap of events. container/heap costs
// 2–3× as much here, through its interface calls and boxing.
//
// The heap orders small pointer-free keys; the events themselves wait in a
// slab, each in a slot of its own until it is popped. Sifting then moves 24
// bytes without write barriers instead of a wide event holding a message
// and a callback: with the collector running (as it does, at the rate a
// run allocates) every pointer moved through the heap cost a barrier.
type queue struct {
	keys []queueKey
	slab []event  // events by slot; a free slot holds the zero event
	free []uint32 // slots of slab free for reuse
	seq  uint64
}

// queueKey is an event's place in the heap: its order and its slot.
type queueKey struct {
	at   time.Duration
	seq  uint64
	slot uint32
}

// before orders events by (time, sequence). The sequence number is assigned
// at push time, so ties break in scheduling order and never depend on maps.
func (k *queueKey) before(o *queueKey) bool {
	if k.at != o.at {
		return k.at < o.at
	}
	return k.seq < o.seq
}

func (q *queue) len() int { return len(q.keys) }

// push adds e, stamping it with the next sequence number. Sifting moves a
// hole rather than swapping.
func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	var slot uint32
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[slot] = e
	} else {
		slot = uint32(len(q.slab))
		q.slab = append(q.slab, e)
	}
	k := queueKey{at: e.at, seq: e.seq, slot: slot}
	q.keys = append(q.keys, k)
	i := len(q.keys) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !k.before(&q.keys[parent]) {
			break
		}
		q.keys[i] = q.keys[parent]
		i = parent
	}
	q.keys[i] = k
}

// pop removes and returns the earliest event.
func (q *queue) pop() (event, bool) {
	n := len(q.keys)
	if n == 0 {
		return event{}, false
	}
	top := q.keys[0]
	ev := q.slab[top.slot]
	q.slab[top.slot] = event{} // drop references so the GC can reclaim them
	q.free = append(q.free, top.slot)
	last := n - 1
	moving := q.keys[last]
	q.keys = q.keys[:last]
	if last == 0 {
		return ev, true
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		small := l
		if r := l + 1; r < last && q.keys[r].before(&q.keys[l]) {
			small = r
		}
		if !q.keys[small].before(&moving) {
			break
		}
		q.keys[i] = q.keys[small]
		i = small
	}
	q.keys[i] = moving
	return ev, true
}

// peek returns the earliest event without removing it.
func (q *queue) peek() (*event, bool) {
	if len(q.keys) == 0 {
		return nil, false
	}
	return &q.slab[q.keys[0].slot], true
}

// peekAt returns the time of the earliest event.
func (q *queue) peekAt() (time.Duration, bool) {
	if len(q.keys) == 0 {
		return 0, false
	}
	return q.keys[0].at, true
}

// BareLoop is the calibration of the event loop: it keeps pending events in
// the queue and pops and re-pushes them until fired events have gone by,
// doing nothing else — no process, no network, no trace. simrun bench times
// it to put the protocol's events per second in proportion. It returns a
// checksum of the popped times so the work cannot be optimised away.
func BareLoop(pending, fired int) uint64 {
	var q queue
	q.keys = make([]queueKey, 0, pending+1)
	q.slab = make([]event, 0, pending+1)
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
