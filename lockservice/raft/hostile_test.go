package raft

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Wire input is untrusted. These tests feed nodes forged messages that are
// well formed on the wire (any type, sender, term, index, commit, entries)
// and check that no node panics, that none takes a term above MaxTerm, and
// that each applies, at every index, the same entry across its restarts —
// every restart from what it persisted succeeding, with every entry it had
// committed. (Against a forger that speaks for a member, the properties
// across nodes cannot hold: a forged vote grant elects a second leader.
// Authenticated peers — mutual TLS in fencesim-node — are what keep
// forgers out; this is what the core itself guarantees.)

// TestForgedTermFrames replays the attack that once destroyed a cluster:
// an append response "from a member" at term 1000 (the leader steps down:
// a higher term is a higher term), then one at term 2^64−1, which made the
// next election wrap the term to 0, a replica panic ("appending term 2
// after term 1001") and then fail every restart ("HardState.Commit 8 is
// beyond the last entry 5"). The second is refused now; the group elects a
// leader, commits, and every node restarts with every committed entry.
func TestForgedTermFrames(t *testing.T) {
	o := defaultOptions(3, 22)
	o.hostile = true
	nw := newNetwork(t, o)
	lead := nw.waitLeader(nw.ids, 20*testElectionTick)
	for i := range 5 {
		nw.propose(lead, "a"+string(rune('0'+i)))
	}
	nw.tick(2)
	f := nw.others(lead)[0]
	if err := nw.node(lead).Step(Message{Type: MsgAppResp, From: f, To: lead, Term: 1000, Index: 1}); err != nil {
		t.Fatalf("a higher term is news, not an error: %v", err)
	}
	nw.settle()
	if nw.node(lead).Role() == Leader {
		t.Fatal("the leader did not step down at a higher term")
	}
	for _, to := range nw.ids {
		for _, from := range nw.others(to) {
			err := nw.node(to).Step(Message{Type: MsgAppResp, From: from, To: to, Term: math.MaxUint64, Index: 1})
			if err == nil || !strings.Contains(err.Error(), "MaxTerm") {
				t.Fatalf("term 2^64-1 to node %d: %v, want refused above MaxTerm", to, err)
			}
		}
	}
	lead = nw.waitLeader(nw.ids, 40*testElectionTick)
	nw.propose(lead, "after")
	nw.tick(2)
	if term := nw.node(lead).Term(); term < 1000 || term > 1010 {
		t.Fatalf("term %d after the attack, want just above 1000", term)
	}
	committed := nw.node(lead).Status().Commit
	for _, id := range nw.ids {
		nw.restart(id)
	}
	lead = nw.waitLeader(nw.ids, 40*testElectionTick)
	nw.tick(2)
	for _, id := range nw.ids {
		if got := nw.node(id).Status().Applied; got < committed {
			t.Errorf("node %d applied %d entries after the restart, want every one of the %d committed", id, got, committed)
		}
	}
}

// TestLeaderTrafficFromAnotherNodeRefused: once a follower follows a
// leader in a term, appends, heartbeats and MsgTimeoutNow of that term
// from any other node are refused (one leader per term), so a forger cannot
// commit a follower's uncommitted tail or make it campaign.
func TestLeaderTrafficFromAnotherNodeRefused(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 5))
	lead := nw.waitLeader(nw.ids, 20*testElectionTick)
	nw.propose(lead, "x")
	f, other := nw.others(lead)[0], nw.others(lead)[1]
	n := nw.node(f)
	term, last := n.Term(), n.Status().LastIndex
	for _, m := range []Message{
		{Type: MsgHeartbeat, From: other, To: f, Term: term, Commit: last},
		{Type: MsgApp, From: other, To: f, Term: term, Index: last, LogTerm: term, Commit: last},
		{Type: MsgTimeoutNow, From: other, To: f, Term: term},
	} {
		before := n.Status()
		if err := n.Step(m); err == nil || !strings.Contains(err.Error(), "leads this node's term") {
			t.Errorf("%v: %v, want refused", m, err)
		}
		if n.Status() != before || n.HasReady() {
			t.Errorf("%v changed the follower: %+v -> %+v", m, before, n.Status())
		}
	}
}

// FuzzHostileMessages drives a three-node group with a script: ticks,
// proposals, restarts and forged messages built from the script's bytes
// (terms around the current one, at MaxTerm and near 2^64; indexes and
// commits around the log's end and far past it; entries in and out of
// order). The network checks every Ready (no rewrite at or below the
// persisted commit, applies only of persisted entries, terms never back)
// and each node's applies across restarts; a panic fails the target.
// Plain `go test` runs the seeds below; `-fuzz FuzzHostileMessages`
// searches.
func FuzzHostileMessages(f *testing.F) {
	f.Add(uint64(1), []byte{0, 4, 9, 1, 2, 3, 4, 5, 6, 7, 0, 0, 4, 5})
	f.Add(uint64(2), []byte("\x09\x05\x06\x07\x08\x09\x0a\x0b\x0c\x00\x04\x09\x06\x03\x02\x01\x00\x00\x00\x05\x01"))
	f.Add(uint64(3), []byte(strings.Repeat("\x09\x05\x02\x03\x06\x04\x00\x01", 20)))
	rnd := rand.New(rand.NewPCG(22, 22))
	for s := range 8 {
		b := make([]byte, 200)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		f.Add(uint64(100+s), b)
	}
	f.Fuzz(func(t *testing.T, seed uint64, script []byte) {
		if len(script) > 2000 {
			script = script[:2000]
		}
		o := defaultOptions(3, seed)
		o.hostile = true
		nw := newNetwork(t, o)
		next := func() byte {
			if len(script) == 0 {
				return 0
			}
			b := script[0]
			script = script[1:]
			return b
		}
		proposals := 0
		for len(script) > 0 {
			switch op := next() % 12; {
			case op < 4:
				nw.tick(int(op) + 1)
			case op == 4:
				for _, id := range nw.ids {
					if n := nw.node(id); n.Role() == Leader && n.LeadTransferee() == None {
						proposals++
						if _, _, err := n.Propose([]byte{byte(proposals), byte(proposals >> 8)}); err == nil {
							nw.settle()
						}
						break
					}
				}
			case op == 5:
				nw.restart(nw.ids[next()%3])
			default:
				m := forge(nw, next)
				to := nw.get(m.To)
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("Step(%v %+v) panicked: %v", m, m.Entries, r)
						}
					}()
					to.node.Step(m)
				}()
				nw.settle()
			}
			for _, id := range nw.ids {
				if term := nw.node(id).Term(); term > MaxTerm {
					t.Fatalf("node %d took term %d above MaxTerm", id, term)
				}
			}
		}
		// Every node restarts from what it persisted, with every entry
		// it committed (New refuses a commit beyond the log), and then
		// reapplies the same entries (the network checks each apply).
		for _, id := range nw.ids {
			nw.restart(id)
		}
		nw.tick(3 * testElectionTick)
	})
}

// forge builds a well-formed message to a member from the script's bytes.
func forge(nw *network, next func() byte) Message {
	maxTerm := uint64(MaxTerm)
	to := nw.ids[next()%3]
	n := nw.node(to)
	st := n.Status()
	froms := []ID{nw.ids[0], nw.ids[1], nw.ids[2], 4, 0}
	terms := []uint64{st.Term, st.Term + 1, st.Term - 1, st.Term + 1000, maxTerm, st.Term + MaxTermJump + 1, math.MaxUint64, 0}
	idxs := []uint64{0, st.Commit, st.LastIndex, st.LastIndex + 1, st.LastIndex + 100, math.MaxUint64, st.Commit - 1, 1}
	m := Message{
		Type:     MessageType(next() % 11),
		From:     froms[next()%5],
		To:       to,
		Term:     terms[next()%8],
		Index:    idxs[next()%8],
		Commit:   idxs[next()%8],
		Reject:   next()%2 == 0,
		Transfer: next()%4 == 0,
	}
	m.LogTerm = terms[next()%8]
	m.RejectHint = idxs[next()%8]
	for i := range int(next() % 4) {
		et := m.LogTerm
		if next()%3 == 0 {
			et = terms[next()%8]
		}
		m.Entries = append(m.Entries, Entry{Term: et, Index: m.Index + uint64(i) + 1, Data: []byte{next()}})
	}
	return m
}
