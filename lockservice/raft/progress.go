package raft

// progressState is how the leader replicates to one peer.
type progressState uint8

const (
	// stateProbe: the leader does not know where the peer's log matches
	// its own, so it sends one MsgApp at a time and waits for the answer.
	stateProbe progressState = iota
	// stateReplicate: the peer's log matches up to match, so the leader
	// streams entries optimistically, up to MaxInflightMsgs appends in
	// flight.
	stateReplicate
)

// progress is the leader's view of one peer (etcd's tracker.Progress).
type progress struct {
	// match is the highest index known to be replicated on the peer; next
	// is the index of the next entry to send.
	match, next uint64
	state       progressState
	// probeSent pauses a probing peer after one MsgApp with entries, until
	// it answers or a heartbeat response shows it is alive.
	probeSent bool
	inflights inflights
	// recentActive records whether the peer was heard from since the last
	// CheckQuorum check.
	recentActive bool
	// appended records whether a MsgApp went to the peer since the last
	// heartbeat: it asserted leadership just as well, so the next
	// heartbeat to the peer is skipped.
	appended bool
}

func (p *progress) becomeProbe() {
	p.state = stateProbe
	p.next = p.match + 1
	p.probeSent = false
	p.inflights.reset()
}

func (p *progress) becomeReplicate() {
	p.state = stateReplicate
	p.next = p.match + 1
	p.probeSent = false
	p.inflights.reset()
}

// isPaused reports whether the leader must not send another MsgApp with
// entries to the peer now: one probe is outstanding, or the window of
// in-flight appends is full.
func (p *progress) isPaused() bool {
	switch p.state {
	case stateProbe:
		return p.probeSent
	case stateReplicate:
		return p.inflights.full()
	}
	return false
}

// maybeUpdate records an acknowledgement of index n; it reports whether
// match moved.
func (p *progress) maybeUpdate(n uint64) bool {
	updated := false
	if p.match < n {
		p.match = n
		updated = true
		p.probeSent = false
	}
	p.next = max(p.next, n+1)
	return updated
}

// maybeDecrTo handles a rejection of the MsgApp whose previous index was
// rejected, with the follower's hint matchHint (already mapped through the
// leader's log). It reports whether next moved back (false: the rejection is
// stale).
func (p *progress) maybeDecrTo(rejected, matchHint uint64) bool {
	if p.state == stateReplicate {
		// A rejection at or below match is stale: that prefix matched.
		if rejected <= p.match {
			return false
		}
		p.next = p.match + 1
		return true
	}
	// In probe state only the answer to the outstanding probe counts.
	if p.next-1 != rejected {
		return false
	}
	p.next = max(min(rejected, matchHint+1), p.match+1)
	p.probeSent = false
	return true
}

// inflights is a fixed-size ring of the last indexes of the MsgApps in
// flight to one peer, oldest first, bounding what the leader streams ahead
// of acknowledgements.
type inflights struct {
	start, count int
	limit        int // the window: Config.MaxInflightMsgs, at most len(buf)
	buf          [MaxInflightMsgs]uint64
}

func (in *inflights) full() bool { return in.count >= in.limit }

func (in *inflights) reset() { in.start, in.count = 0, 0 }

func (in *inflights) add(last uint64) {
	if in.full() {
		panic("raft: internal error: append sent to a peer whose in-flight window is full")
	}
	in.buf[(in.start+in.count)%len(in.buf)] = last
	in.count++
}

// freeLE frees every in-flight append whose last index is <= to: the peer
// has acknowledged them.
func (in *inflights) freeLE(to uint64) {
	for in.count > 0 && in.buf[in.start] <= to {
		in.start = (in.start + 1) % len(in.buf)
		in.count--
	}
}

// freeFirst frees the oldest in-flight append; a heartbeat response from a
// peer with a full window uses it to keep replication from stalling when an
// append was lost.
func (in *inflights) freeFirst() {
	if in.count > 0 {
		in.start = (in.start + 1) % len(in.buf)
		in.count--
	}
}
