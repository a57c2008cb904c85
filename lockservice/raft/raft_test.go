package raft

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const et = testElectionTick

func TestElection(t *testing.T) {
	tests := []struct {
		size int
	}{{3}, {5}}
	for _, tt := range tests {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("nodes=%d/seed=%d", tt.size, seed), func(t *testing.T) {
				nw := newNetwork(t, defaultOptions(tt.size, seed))
				lead := nw.waitLeader(nw.ids, 20*et)
				leaders := 0
				for _, id := range nw.ids {
					n := nw.node(id)
					if n.Role() == Leader {
						leaders++
					}
					if n.Lead() != lead || n.Term() != nw.node(lead).Term() {
						t.Errorf("node %d: lead %d term %d, want lead %d term %d", id, n.Lead(), n.Term(), lead, nw.node(lead).Term())
					}
				}
				if leaders != 1 {
					t.Errorf("%d leaders, want exactly 1", leaders)
				}
				// The leader stays leader while nothing fails.
				term := nw.node(lead).Term()
				nw.tick(5 * et)
				if got := nw.agreedLeader(nw.ids); got != lead || nw.node(lead).Term() != term {
					t.Errorf("after 5 election timeouts of calm: leader %d term %d, want %d term %d", got, nw.node(lead).Term(), lead, term)
				}
			})
		}
	}
}

func TestSingleNodeCluster(t *testing.T) {
	nw := newNetwork(t, defaultOptions(1, 1))
	nw.waitLeader(nw.ids, 3*et)
	nw.propose(1, "solo")
	if got := nw.appliedData(1); !slices.Equal(got, []string{"solo"}) {
		t.Errorf("applied %q, want [solo]", got)
	}
}

// TestLeaderIsolated: a leader cut off from everyone steps down by
// CheckQuorum (without learning of any higher term), commits nothing while
// cut off, and the rest elect a new leader that commits.
func TestLeaderIsolated(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprintf("nodes=%d", size), func(t *testing.T) {
			nw := newNetwork(t, defaultOptions(size, 7))
			old := nw.waitLeader(nw.ids, 20*et)
			oldTerm := nw.node(old).Term()
			nw.propose(old, "before")
			commit := nw.node(old).Status().Commit

			nw.isolate(old)
			lostIndex, _ := nw.propose(old, "lost") // appended, never committed
			nw.tick(2*et + 1)
			if r := nw.node(old).Role(); r == Leader {
				t.Fatalf("isolated old leader %d is still %v after 2 election timeouts", old, r)
			}
			if got := nw.node(old).Term(); got != oldTerm {
				t.Errorf("isolated old leader's term is %d, want %d: it must step down by CheckQuorum, not by hearing a higher term", got, oldTerm)
			}
			rest := nw.others(old)
			lead := nw.waitLeader(rest, 20*et)
			if nw.node(lead).Term() <= oldTerm {
				t.Errorf("new leader %d has term %d, want > %d", lead, nw.node(lead).Term(), oldTerm)
			}
			nw.propose(lead, "after")
			nw.tick(et)
			if got := nw.node(old).Status().Commit; got != commit {
				t.Errorf("isolated old leader's commit moved from %d to %d", commit, got)
			}
			if got := nw.appliedData(old); !slices.Equal(got, []string{"before"}) {
				t.Errorf("isolated old leader applied %q, want [before]", got)
			}

			nw.heal()
			nw.tick(3 * et)
			if got := nw.agreedLeader(nw.ids); got != lead {
				t.Fatalf("after healing, agreed leader is %d, want %d", got, lead)
			}
			for _, id := range nw.ids {
				if got := nw.appliedData(id); !slices.Equal(got, []string{"before", "after"}) {
					t.Errorf("node %d applied %q, want [before after]", id, got)
				}
			}
			if e := nw.logOf(old)[lostIndex-1]; string(e.Data) == "lost" {
				t.Errorf("old leader still holds the uncommitted %s at index %d; it should have been replaced", fmtEntry(e), lostIndex)
			}
		})
	}
}

// TestPreVoteRejoin: a follower partitioned away times out over and over; with
// PreVote it never bumps its term, so when it rejoins the leader and term
// stay. Without PreVote (the control row) it bumps its term and disrupts the
// cluster when it rejoins, which shows the test can tell the two apart.
func TestPreVoteRejoin(t *testing.T) {
	tests := []struct {
		name        string
		preVote     bool
		wantDisrupt bool
	}{
		{"prevote", true, false},
		{"no-prevote", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := defaultOptions(3, 3)
			opts.preVote = tt.preVote
			nw := newNetwork(t, opts)
			lead := nw.waitLeader(nw.ids, 20*et)
			term := nw.node(lead).Term()
			f := nw.others(lead)[0]

			nw.isolate(f)
			nw.tick(10 * et)
			if tt.preVote {
				if got := nw.node(f).Term(); got != term {
					t.Errorf("partitioned follower's term is %d, want %d (pre-elections must not bump it)", got, term)
				}
			} else if got := nw.node(f).Term(); got <= term {
				t.Errorf("control: partitioned follower's term is %d, want > %d without PreVote", got, term)
			}
			if got := nw.agreedLeader(nw.others(f)); got != lead || nw.node(lead).Term() != term {
				t.Fatalf("majority side: leader %d term %d, want %d term %d", got, nw.node(lead).Term(), lead, term)
			}

			// Rejoin: only f's clock runs until it campaigns again, so its
			// (pre-)vote requests reach the others before a heartbeat
			// calms it down.
			nw.heal()
			sent := len(nw.trace)
			for i := 0; !campaigned(nw.trace[sent:], f); i++ {
				if i > 2*et {
					t.Fatalf("rejoined follower %d did not campaign within %d ticks", f, 2*et)
				}
				nw.tickNodes([]ID{f}, 1)
			}
			nw.tick(5 * et)
			newLead := nw.waitLeader(nw.ids, 20*et)
			disrupted := newLead != lead || nw.node(newLead).Term() != term
			if disrupted != tt.wantDisrupt {
				t.Errorf("after rejoin: leader %d term %d (was %d term %d); disrupted=%v, want %v",
					newLead, nw.node(newLead).Term(), lead, term, disrupted, tt.wantDisrupt)
			}
		})
	}
}

// campaigned reports whether trace holds a (pre-)vote request from id.
func campaigned(trace []string, id ID) bool {
	for _, s := range trace {
		if strings.HasPrefix(s, fmt.Sprintf("MsgPreVote %d->", id)) || strings.HasPrefix(s, fmt.Sprintf("MsgVote %d->", id)) {
			return true
		}
	}
	return false
}

// TestLeaderCountsItselfWhenPersisted: the leader counts its own copy of an
// entry towards a quorum only after the Advance of the Ready that carried
// the entry for persisting, so a commit never rests on an unpersisted copy.
func TestLeaderCountsItselfWhenPersisted(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 15))
	lead := nw.waitLeader(nw.ids, 20*et)
	n := nw.node(lead)
	f := nw.others(lead)[0]
	idx, _, err := n.Propose([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	commit := n.Status().Commit
	if err := n.Step(Message{Type: MsgAppResp, From: f, To: lead, Term: n.Term(), Index: idx}); err != nil {
		t.Fatal(err)
	}
	if got := n.Status().Commit; got != commit {
		t.Fatalf("leader committed %d on one follower's ack while its own copy was unpersisted; want commit %d", got, commit)
	}
	rd := n.Ready()
	if len(rd.Entries) != 1 || rd.Entries[0].Index != idx || !rd.MustSync {
		t.Fatalf("Ready entries %v (MustSync %v), want entry %d to persist", rd.Entries, rd.MustSync, idx)
	}
	n.Advance()
	if got := n.Status().Commit; got != idx {
		t.Errorf("after persisting its copy the leader's commit is %d, want %d", got, idx)
	}
}

// TestReplication: entries proposed on the leader are committed and applied
// by every node in proposal order, also by followers that were partitioned
// away while hundreds of entries (many MsgApps' worth) were committed.
func TestReplication(t *testing.T) {
	tests := []struct {
		size    int
		entries int
		lagging int // followers partitioned away during the proposals
	}{
		{3, 100, 0},
		{5, 100, 0},
		{3, 500, 1},
		{5, 500, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("nodes=%d/entries=%d/lagging=%d", tt.size, tt.entries, tt.lagging), func(t *testing.T) {
			nw := newNetwork(t, defaultOptions(tt.size, 11))
			lead := nw.waitLeader(nw.ids, 20*et)
			lagging := nw.others(lead)[:tt.lagging]
			for _, id := range lagging {
				nw.isolate(id)
			}
			var want []string
			for i := range tt.entries {
				d := fmt.Sprintf("cmd-%d", i)
				nw.propose(lead, d)
				want = append(want, d)
				if i%10 == 9 {
					nw.tick(1)
				}
			}
			nw.heal()
			nw.tick(3 * et)
			leaderLog := nw.logOf(lead)
			for _, id := range nw.ids {
				if got := nw.appliedData(id); !slices.Equal(got, want) {
					t.Errorf("node %d applied %d commands, want %d in proposal order (first diff at %d)", id, len(got), len(want), firstDiff(got, want))
				}
				st := nw.node(id).Status()
				if st.Commit != uint64(len(leaderLog)) || st.Applied != st.Commit {
					t.Errorf("node %d: commit %d applied %d, want both %d", id, st.Commit, st.Applied, len(leaderLog))
				}
				if !logsEqual(nw.logOf(id), leaderLog) || !logsEqual(nw.get(id).store.entries, leaderLog) {
					t.Errorf("node %d: log (in memory or persisted) differs from the leader's", id)
				}
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFigure8 plays the paper's Figure 8. S1 leads term 4 and replicates its
// entry (2, term 2) to S2 and S3, a majority, while its own term-4 entry is
// lost in transit. S1 must not commit index 2 by counting replicas: S5, which
// holds (2, term 3), can still be elected and overwrite index 2 on the
// majority. The network's safety check would flag the overwrite of a
// committed entry.
func TestFigure8(t *testing.T) {
	hs := HardState{Term: 3, Vote: 5, Commit: 1}
	opts := defaultOptions(5, 8)
	opts.state = map[ID]memStore{
		1: {hs: hs, entries: entriesOf(1, 2)},
		2: {hs: hs, entries: entriesOf(1)},
		3: {hs: hs, entries: entriesOf(1)},
		4: {hs: hs, entries: entriesOf(1)},
		5: {hs: hs, entries: entriesOf(1, 3)},
	}
	nw := newNetwork(t, opts)
	nw.drop = func(m Message) bool {
		return (m.From == 1 || m.To == 1) && (m.From >= 4 || m.To >= 4)
	}
	nw.mutate = func(m *Message) {
		if m.Type == MsgApp && m.From == 1 {
			// S1's entries of its own term are lost in transit.
			m.Entries = slices.DeleteFunc(slices.Clone(m.Entries), func(e Entry) bool { return e.Term == m.Term })
		}
	}
	// Only S1's clock runs, so S1 campaigns first and wins with S2 and S3.
	for i := 0; nw.node(1).Role() != Leader; i++ {
		if i > 10*et {
			t.Fatalf("S1 not elected: %+v", nw.node(1).Status())
		}
		nw.tickNodes([]ID{1}, 1)
	}
	if got := nw.node(1).Term(); got != 4 {
		t.Fatalf("S1 leads term %d, want 4", got)
	}
	nw.tickNodes([]ID{1}, et/2) // heartbeats: plenty of chances to (wrongly) commit
	for _, id := range []ID{2, 3} {
		if l := nw.logOf(id); len(l) != 2 || l[1].Term != 2 {
			t.Fatalf("S%d log %v, want (2, term 2) replicated", id, l)
		}
	}
	if got := nw.node(1).Status().Commit; got != 1 {
		t.Fatalf("S1 committed index %d, an entry of an earlier term counted on a majority; want commit 1", got)
	}
	if len(nw.committed) != 1 {
		t.Fatalf("some node applied index %d: %v", len(nw.committed), nw.committed)
	}

	// S1 crashes; S2–S4 restart (so they hold no lease for S1); S5 times
	// out first and wins term 5 with S2–S4, its (2, term 3) being more up
	// to date than S2's and S3's (2, term 2).
	nw.crash(1)
	nw.heal()
	for _, id := range []ID{2, 3, 4} {
		nw.restart(id)
	}
	for i := 0; nw.node(5).Role() != Leader; i++ {
		if i > 10*et {
			t.Fatalf("S5 not elected: %+v", nw.node(5).Status())
		}
		nw.tickNodes([]ID{5}, 1)
	}
	nw.tick(et / 2)
	if len(nw.committed) < 2 || nw.committed[1].Term != 3 {
		t.Fatalf("index 2 committed as %v, want the term-3 entry of S5", nw.committed)
	}

	// S1 comes back and its (2, term 2) and (3, term 4) are replaced.
	nw.restart(1)
	nw.tick(3 * et)
	want := nw.logOf(5)
	for _, id := range nw.ids {
		if got := nw.logOf(id); !logsEqual(got, want) {
			t.Errorf("S%d log %v, want S5's %v", id, got, want)
		}
		if got := nw.node(id).Status().Applied; got != uint64(len(want)) {
			t.Errorf("S%d applied %d, want %d", id, got, len(want))
		}
	}
}

// TestDivergentFollowerRepaired: a new leader repairs a follower whose log
// diverges (longer with entries of an old term, shorter, or conflicting in
// several terms) by rejections with hints, truncation and re-replication, in
// at most two rejected round trips per divergent term.
func TestDivergentFollowerRepaired(t *testing.T) {
	longOld := []uint64{1}
	for range 50 {
		longOld = append(longOld, 2)
	}
	tests := []struct {
		name          string
		leaderTerm    uint64 // persisted term of nodes 1 and 2
		leaderLog     []uint64
		followerTerm  uint64 // persisted term of node 3
		followerLog   []uint64
		commit        uint64
		maxRejections int
	}{
		{"longer-old-term", 3, []uint64{1, 3}, 2, longOld, 1, 1},
		{"shorter", 3, []uint64{1, 3, 3, 3, 3, 3, 3, 3}, 3, []uint64{1}, 1, 1},
		{"conflicting-terms", 5, []uint64{1, 1, 3, 3, 5}, 4, []uint64{1, 1, 2, 2, 2, 4, 4}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := defaultOptions(3, 5)
			lhs := HardState{Term: tt.leaderTerm, Commit: tt.commit}
			opts.state = map[ID]memStore{
				1: {hs: lhs, entries: entriesOf(tt.leaderLog...)},
				2: {hs: lhs, entries: entriesOf(tt.leaderLog...)},
				3: {hs: HardState{Term: tt.followerTerm, Commit: tt.commit}, entries: entriesOf(tt.followerLog...)},
			}
			nw := newNetwork(t, opts)
			for i := 0; nw.node(1).Role() != Leader; i++ {
				if i > 10*et {
					t.Fatalf("node 1 not elected: %+v", nw.node(1).Status())
				}
				nw.tickNodes([]ID{1}, 1)
			}
			nw.propose(1, "x")
			nw.tick(2 * et)
			want := nw.logOf(1)
			if got := nw.logOf(3); !logsEqual(got, want) {
				t.Errorf("follower log %v, want the leader's %v", got, want)
			}
			if got := nw.get(3).store.entries; !logsEqual(got, want) {
				t.Errorf("follower's persisted log %v, want the leader's %v (the Ready must truncate it)", got, want)
			}
			rejections := 0
			for _, s := range nw.trace {
				if strings.HasPrefix(s, "MsgAppResp 3->1") && strings.Contains(s, "reject") {
					rejections++
				}
			}
			if rejections > tt.maxRejections {
				t.Errorf("follower rejected %d appends, want <= %d (reject hints skip whole terms)", rejections, tt.maxRejections)
			}
			for _, id := range nw.ids {
				if got := nw.appliedData(id); len(got) == 0 || got[len(got)-1] != "x" {
					t.Errorf("node %d applied %q, want it to end with x", id, got)
				}
			}
		})
	}
}

// TestRestartAll restarts every node from what it persisted: committed
// entries survive and are redelivered from index 1 (up to the commit index
// the node persisted at once, the rest once a new leader commits), no node
// votes twice in the term it voted in, and the cluster elects a leader and
// commits again.
func TestRestartAll(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 21))
	lead := nw.waitLeader(nw.ids, 20*et)
	var want []string
	for i := range 20 {
		d := fmt.Sprintf("before-%d", i)
		nw.propose(lead, d)
		want = append(want, d)
	}
	nw.tick(2) // heartbeats carry the final commit index to followers
	term := nw.node(lead).Term()
	votes := map[ID]ID{}
	for _, id := range nw.ids {
		if hs := nw.get(id).store.hs; hs.Term != term || hs.Vote == None {
			t.Fatalf("node %d persisted %+v, want a vote in term %d", id, hs, term)
		} else {
			votes[id] = hs.Vote
		}
	}
	commits := map[ID]uint64{}
	for _, id := range nw.ids {
		commits[id] = nw.get(id).store.hs.Commit
		nw.restart(id)
	}
	nw.settle()
	for _, id := range nw.ids {
		st := nw.node(id).Status()
		if st.Term != term || st.Commit != commits[id] || st.Role != Follower {
			t.Errorf("node %d restarted as %+v, want term %d commit %d follower", id, st, term, commits[id])
		}
		if got := nw.appliedData(id); !slices.Equal(got, want[:commits[id]-1]) {
			t.Errorf("node %d redelivered %q, want %q", id, got, want[:commits[id]-1])
		}
	}

	// Ask each node for a vote in the term it already voted in, for a
	// candidate it did not vote for, with a log more up to date than any.
	for _, id := range nw.ids {
		other := None
		for _, c := range nw.others(id) {
			if c != votes[id] {
				other = c
				break
			}
		}
		n := nw.node(id)
		if err := n.Step(Message{Type: MsgVote, From: other, To: id, Term: term, Index: 1000, LogTerm: term}); err != nil {
			t.Fatal(err)
		}
		rd := n.Ready()
		if len(rd.Messages) != 1 || rd.Messages[0].Type != MsgVoteResp || !rd.Messages[0].Reject {
			t.Errorf("node %d (voted %d in term %d) answered a vote request from %d with %v, want a rejection",
				id, votes[id], term, other, rd.Messages)
		}
		if rd.HardState.Vote != votes[id] {
			t.Errorf("node %d vote became %d, want %d", id, rd.HardState.Vote, votes[id])
		}
		n.Advance()
	}

	lead2 := nw.waitLeader(nw.ids, 20*et)
	if got := nw.node(lead2).Term(); got <= term {
		t.Errorf("new leader's term %d, want > %d", got, term)
	}
	for i := range 5 {
		d := fmt.Sprintf("after-%d", i)
		nw.propose(lead2, d)
		want = append(want, d)
	}
	nw.tick(2)
	for _, id := range nw.ids {
		if got := nw.appliedData(id); !slices.Equal(got, want) {
			t.Errorf("node %d applied %q, want %q", id, got, want)
		}
	}
}

// TestVoteRules checks, on a restarted node, the vote it grants or refuses.
func TestVoteRules(t *testing.T) {
	log := entriesOf(1, 1, 2)
	tests := []struct {
		name      string
		hs        HardState
		msg       Message
		wantGrant bool
		wantVote  ID
		wantTerm  uint64
	}{
		{"same term, voted for another", HardState{Term: 5, Vote: 2}, Message{Type: MsgVote, From: 3, Term: 5, Index: 3, LogTerm: 2}, false, 2, 5},
		{"same term, same candidate again", HardState{Term: 5, Vote: 2}, Message{Type: MsgVote, From: 2, Term: 5, Index: 3, LogTerm: 2}, true, 2, 5},
		{"higher term", HardState{Term: 5, Vote: 2}, Message{Type: MsgVote, From: 3, Term: 6, Index: 3, LogTerm: 2}, true, 3, 6},
		{"higher term, log behind by term", HardState{Term: 5, Vote: 2}, Message{Type: MsgVote, From: 3, Term: 6, Index: 9, LogTerm: 1}, false, None, 6},
		{"higher term, log behind by index", HardState{Term: 5, Vote: 2}, Message{Type: MsgVote, From: 3, Term: 6, Index: 2, LogTerm: 2}, false, None, 6},

		{"pre-vote does not change term or vote", HardState{Term: 5, Vote: 2}, Message{Type: MsgPreVote, From: 3, Term: 6, Index: 3, LogTerm: 2}, true, 2, 5},
		{"pre-vote, log behind", HardState{Term: 5, Vote: 2}, Message{Type: MsgPreVote, From: 3, Term: 6, Index: 1, LogTerm: 1}, false, 2, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1,
				Rand: rand.New(rand.NewPCG(1, 1)), PreVote: true, CheckQuorum: true, HardState: tt.hs, Entries: log})
			m := tt.msg
			m.To = 1
			if err := n.Step(m); err != nil {
				t.Fatal(err)
			}
			rd := n.Ready()
			if len(rd.Messages) != 1 {
				t.Fatalf("got %v, want one response", rd.Messages)
			}
			if resp := rd.Messages[0]; resp.Reject == tt.wantGrant {
				t.Errorf("response %v, want grant=%v", resp, tt.wantGrant)
			}
			if rd.HardState.Vote != tt.wantVote || rd.HardState.Term != tt.wantTerm {
				t.Errorf("HardState %+v, want term %d vote %d", rd.HardState, tt.wantTerm, tt.wantVote)
			}
			if rd.HardState != tt.hs && !rd.MustSync {
				t.Errorf("HardState changed to %+v but MustSync is false", rd.HardState)
			}
		})
	}
}

// TestLeaseIgnoresVotes: with CheckQuorum, a follower that heard from its
// leader within the election timeout ignores a vote request for a higher
// term (no answer, no term change).
func TestLeaseIgnoresVotes(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 4))
	lead := nw.waitLeader(nw.ids, 20*et)
	f := nw.others(lead)[0]
	c := nw.others(lead)[1]
	n := nw.node(f)
	term := n.Term()
	for _, typ := range []MessageType{MsgVote, MsgPreVote} {
		if err := n.Step(Message{Type: typ, From: c, To: f, Term: term + 1, Index: 100, LogTerm: term}); err != nil {
			t.Fatal(err)
		}
		if n.HasReady() || n.Term() != term {
			t.Errorf("%v within the lease: HasReady %v, term %d; want ignored at term %d", typ, n.HasReady(), n.Term(), term)
		}
	}
}

func TestProposeNotLeader(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 2))
	// Before any election, nobody leads.
	for _, id := range nw.ids {
		if _, _, err := nw.node(id).Propose([]byte("x")); !errors.Is(err, ErrNotLeader) {
			t.Errorf("fresh node %d: Propose error %v, want ErrNotLeader", id, err)
		}
	}
	lead := nw.waitLeader(nw.ids, 20*et)
	for _, id := range nw.others(lead) {
		idx, term, err := nw.node(id).Propose([]byte("x"))
		if !errors.Is(err, ErrNotLeader) || idx != 0 || term != 0 {
			t.Errorf("follower %d: Propose = %d, %d, %v; want 0, 0, ErrNotLeader", id, idx, term, err)
		}
		if got := nw.node(id).Status().LastIndex; got != nw.node(lead).Status().LastIndex {
			t.Errorf("follower %d's log grew to %d on a refused proposal", id, got)
		}
	}
	idx, term, err := nw.node(lead).Propose([]byte("x"))
	if err != nil || idx == 0 || term != nw.node(lead).Term() {
		t.Errorf("leader: Propose = %d, %d, %v; want an index in term %d", idx, term, err, nw.node(lead).Term())
	}
}

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		return Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 2))}
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // substring of the error; "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"valid restart", func(c *Config) {
			c.HardState = HardState{Term: 3, Vote: 2, Commit: 2}
			c.Entries = entriesOf(1, 2, 3)
		}, ""},
		{"single node", func(c *Config) { c.Peers = []ID{1} }, ""},
		{"zero id", func(c *Config) { c.ID = 0 }, "Config.ID is 0"},
		{"no peers", func(c *Config) { c.Peers = nil }, "Config.Peers is empty"},
		{"zero peer", func(c *Config) { c.Peers = []ID{0, 1, 2} }, "contains ID 0"},
		{"duplicate peer", func(c *Config) { c.Peers = []ID{1, 2, 2} }, "lists 2 twice"},
		{"self not a peer", func(c *Config) { c.Peers = []ID{2, 3, 4} }, "does not contain Config.ID 1"},
		{"zero heartbeat", func(c *Config) { c.HeartbeatTick = 0 }, "HeartbeatTick is 0"},
		{"election not above heartbeat", func(c *Config) { c.ElectionTick = 1 }, "must be greater than"},
		{"nil rand", func(c *Config) { c.Rand = nil }, "Config.Rand is nil"},
		{"entries not from 1", func(c *Config) { c.Entries = []Entry{{Term: 1, Index: 2}} }, "has index 2, want 1"},
		{"entries gap", func(c *Config) { c.Entries = []Entry{{Term: 1, Index: 1}, {Term: 1, Index: 3}} }, "has index 3, want 2"},
		{"entry term 0", func(c *Config) { c.Entries = []Entry{{Term: 0, Index: 1}} }, "has term 0"},
		{"entry terms decrease", func(c *Config) {
			c.Entries = []Entry{{Term: 2, Index: 1}, {Term: 1, Index: 2}}
			c.HardState.Term = 2
		}, "terms in a log never decrease"},
		{"hardstate term below log", func(c *Config) { c.Entries = entriesOf(1, 4); c.HardState.Term = 3 }, "below the last entry's term 4"},
		{"commit beyond log", func(c *Config) { c.Entries = entriesOf(1); c.HardState = HardState{Term: 1, Commit: 2} }, "Commit 2 is beyond the last entry 1"},
		{"vote not a peer", func(c *Config) { c.HardState = HardState{Term: 1, Vote: 9} }, "Vote 9 is not in Config.Peers"},
		{"vote in term 0", func(c *Config) { c.HardState = HardState{Vote: 2} }, "in term 0"},
		{"valid restart from a snapshot", func(c *Config) {
			c.Snapshot = Snapshot{Index: 5, Term: 2, Data: []byte("s")}
			c.Entries = []Entry{{Term: 2, Index: 6}, {Term: 3, Index: 7}}
			c.HardState = HardState{Term: 3, Commit: 4} // a commit persisted before the snapshot
		}, ""},
		{"snapshot without a term", func(c *Config) { c.Snapshot = Snapshot{Index: 5} }, "index 5 and term 0"},
		{"entries not after the snapshot", func(c *Config) {
			c.Snapshot = Snapshot{Index: 5, Term: 1}
			c.Entries = []Entry{{Term: 1, Index: 5}}
			c.HardState.Term = 1
		}, "has index 5, want 6"},
		{"entry term below the snapshot's", func(c *Config) {
			c.Snapshot = Snapshot{Index: 5, Term: 2}
			c.Entries = []Entry{{Term: 1, Index: 6}}
			c.HardState.Term = 2
		}, "never decrease"},
		{"hardstate term below the snapshot's", func(c *Config) { c.Snapshot = Snapshot{Index: 5, Term: 2}; c.HardState.Term = 1 }, "below the last entry's term 2"},
		{"commit beyond snapshot and log", func(c *Config) {
			c.Snapshot = Snapshot{Index: 5, Term: 1}
			c.HardState = HardState{Term: 1, Commit: 7}
		}, "Commit 7 is beyond the last entry 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.modify(&c)
			err := c.Validate()
			_, newErr := New(c)
			if tt.want == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate() = %v, New error %v; want nil", err, newErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "raft: ") {
				t.Errorf("error %q does not start with \"raft: \"", err)
			}
			if newErr == nil || newErr.Error() != err.Error() {
				t.Errorf("New error %v, want %v", newErr, err)
			}
		})
	}
}

// TestStepRejectsBadMessages: a misaddressed or malformed message is an error
// and changes nothing; none panics.
func TestStepRejectsBadMessages(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 9))
	lead := nw.waitLeader(nw.ids, 20*et)
	nw.propose(lead, "a")
	nw.tick(2)
	f := nw.others(lead)[0]
	term := nw.node(lead).Term()
	last := nw.node(lead).Status().LastIndex
	commit := nw.node(f).Status().Commit
	tests := []struct {
		name string
		to   ID
		msg  Message
		want string
	}{
		{"for another node", f, Message{Type: MsgHeartbeat, From: lead, To: lead, Term: term}, "addressed to node"},
		{"from itself", f, Message{Type: MsgHeartbeat, From: f, To: f, Term: term}, "from this node itself"},
		{"from a stranger", f, Message{Type: MsgHeartbeat, From: 42, To: f, Term: term}, "not among the peers"},
		{"unknown type", f, Message{Type: 99, From: lead, To: f, Term: term}, "unknown type"},
		{"term 0", f, Message{Type: MsgHeartbeat, From: lead, To: f}, "term 0"},
		{"entries in a heartbeat", f, Message{Type: MsgHeartbeat, From: lead, To: f, Term: term, Entries: []Entry{{Term: term, Index: 9}}}, "only MsgApp"},
		{"entries not contiguous", f, Message{Type: MsgApp, From: lead, To: f, Term: term, Index: last, LogTerm: term,
			Entries: []Entry{{Term: term, Index: last + 2}}}, "contiguously"},
		{"entry term above message term", f, Message{Type: MsgApp, From: lead, To: f, Term: term, Index: last, LogTerm: term,
			Entries: []Entry{{Term: term + 1, Index: last + 1}}}, "not exceed"},
		{"entry term below previous", f, Message{Type: MsgApp, From: lead, To: f, Term: term, Index: last, LogTerm: term,
			Entries: []Entry{{Term: term - 1, Index: last + 1}}}, "never decrease"},
		{"conflicts with committed", f, Message{Type: MsgApp, From: lead, To: f, Term: term + 1, Index: commit - 1, LogTerm: nw.node(f).log.mustTerm(commit - 1),
			Entries: []Entry{{Term: term + 1, Index: commit}}}, "conflicts with committed"},
		{"ack beyond the leader's log", lead, Message{Type: MsgAppResp, From: f, To: lead, Term: term, Index: last + 10}, "beyond the leader's last index"},
		{"second leader in the term", lead, Message{Type: MsgHeartbeat, From: f, To: lead, Term: term}, "another leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := nw.node(tt.to)
			if n.HasReady() {
				t.Fatal("node has a Ready before the test")
			}
			before, hs, log := n.Status(), n.hardState(), nw.logOf(tt.to)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Step panicked: %v", r)
					}
				}()
				err = n.Step(tt.msg)
			}()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "raft: ") {
				t.Errorf("Step error %v, want one containing %q", err, tt.want)
			}
			if n.HasReady() || n.Status() != before || n.hardState() != hs || !logsEqual(nw.logOf(tt.to), log) {
				t.Errorf("a rejected message changed the node: %+v -> %+v", before, n.Status())
			}
		})
	}
}

// TestStaleMessagesIgnored: messages from older terms change nothing; a stale
// leader or pre-candidate is answered with the current term so it catches up,
// and other stale messages are not answered.
func TestStaleMessagesIgnored(t *testing.T) {
	const term = 5
	tests := []struct {
		typ      MessageType
		wantResp MessageType // 0: no answer
	}{
		{MsgApp, MsgAppResp},
		{MsgHeartbeat, MsgAppResp},
		{MsgPreVote, MsgPreVoteResp},
		{MsgVote, 0},
		{MsgAppResp, 0},
		{MsgVoteResp, 0},
		{MsgPreVoteResp, 0},
		{MsgHeartbeatResp, 0},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 1)),
				PreVote: true, CheckQuorum: true, HardState: HardState{Term: term, Vote: 2, Commit: 1}, Entries: entriesOf(1, 3)})
			before, hs := n.Status(), n.hardState()
			m := Message{Type: tt.typ, From: 3, To: 1, Term: term - 1, Index: 2, LogTerm: 3, Commit: 2}
			if err := n.Step(m); err != nil {
				t.Fatalf("Step(%v): %v", m, err)
			}
			if n.Status() != before || n.hardState() != hs {
				t.Errorf("stale %v changed the node: %+v -> %+v", m, before, n.Status())
			}
			msgs := n.Ready().Messages
			switch {
			case tt.wantResp == 0 && len(msgs) != 0:
				t.Errorf("stale %v answered with %v, want no answer", m, msgs)
			case tt.wantResp != 0 && (len(msgs) != 1 || msgs[0].Type != tt.wantResp || msgs[0].Term != term || msgs[0].To != 3):
				t.Errorf("stale %v answered with %v, want one %v to 3 at term %d", m, msgs, tt.wantResp, term)
			}
		})
	}
}

// TestQuorumHook: Config.Quorum decides what a majority is. Requiring all
// three of three, a cluster with one node cut off can neither commit nor
// keep a leader; healed, it works again.
func TestQuorumHook(t *testing.T) {
	opts := defaultOptions(3, 12)
	opts.quorum = func(n int) int { return n }
	nw := newNetwork(t, opts)
	lead := nw.waitLeader(nw.ids, 20*et)
	nw.propose(lead, "all-three")
	f := nw.others(lead)[0]
	nw.isolate(f)
	_, _, err := nw.node(lead).Propose([]byte("two-of-three"))
	if err != nil {
		t.Fatal(err)
	}
	nw.tick(5 * et)
	for _, id := range nw.ids {
		if got := nw.appliedData(id); slices.Contains(got, "two-of-three") {
			t.Errorf("node %d applied an entry acknowledged by 2 of 3 under a quorum of 3", id)
		}
		if nw.node(id).Role() == Leader {
			t.Errorf("node %d leads without a quorum of 3", id)
		}
	}
	nw.heal()
	lead = nw.waitLeader(nw.ids, 30*et)
	nw.propose(lead, "healed")
	nw.tick(2)
	for _, id := range nw.ids {
		if got := nw.appliedData(id); !slices.Contains(got, "healed") {
			t.Errorf("node %d applied %q after healing, want healed among them", id, got)
		}
	}
}

// recorder records the errors a network reports instead of failing the
// test, to show that the network's safety checks catch a broken cluster.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestPlantedQuorumBugIsCaught plants a bug through the Quorum hook (a
// "majority" of one) and partitions the cluster: both sides elect leaders
// and commit different entries at the same index, and the test network's
// safety checks must say so.
func TestPlantedQuorumBugIsCaught(t *testing.T) {
	rec := &recorder{TB: t}
	opts := defaultOptions(3, 13)
	opts.quorum = func(n int) int { return n / 2 }
	nw := newNetwork(rec, opts)
	nw.isolate(1)
	nw.tick(5 * et)
	for _, id := range nw.ids {
		if nw.node(id).Role() == Leader {
			if _, _, err := nw.node(id).Propose(fmt.Appendf(nil, "from-%d", id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	nw.tick(et)
	nw.heal()
	nw.tick(5 * et)
	found := false
	for _, e := range rec.errs {
		if strings.Contains(e, "safety violated") {
			found = true
		}
	}
	if !found {
		t.Errorf("a split brain went unnoticed; network errors: %q", rec.errs)
	}
}

// TestBounds: the outbox, the uncommitted tail and the entries per MsgApp
// are bounded.
func TestBounds(t *testing.T) {
	t.Run("outbox", func(t *testing.T) {
		n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 1))})
		extra := 10
		for range MaxPendingMsgs + extra {
			if err := n.Step(Message{Type: MsgHeartbeat, From: 2, To: 1, Term: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if got := n.Status().DroppedMessages; got != uint64(extra) {
			t.Errorf("DroppedMessages = %d, want %d", got, extra)
		}
		if got := len(n.Ready().Messages); got != MaxPendingMsgs {
			t.Errorf("Ready carries %d messages, want %d", got, MaxPendingMsgs)
		}
	})
	t.Run("uncommitted", func(t *testing.T) {
		nw := newNetwork(t, defaultOptions(3, 14))
		lead := nw.waitLeader(nw.ids, 20*et)
		for _, id := range nw.others(lead) {
			nw.isolate(id)
		}
		n := nw.node(lead)
		accepted := 0
		for {
			_, _, err := n.Propose([]byte("p"))
			if errors.Is(err, ErrProposalDropped) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			accepted++
			if accepted > MaxUncommittedEntries {
				t.Fatalf("leader accepted %d uncommitted proposals, more than %d", accepted, MaxUncommittedEntries)
			}
		}
		if st := n.Status(); st.LastIndex-st.Commit != MaxUncommittedEntries {
			t.Errorf("uncommitted tail %d, want %d", st.LastIndex-st.Commit, MaxUncommittedEntries)
		}
		nw.settle()
	})
	t.Run("unstable", func(t *testing.T) {
		n := mustNew(t, Config{ID: 2, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 2))})
		app := func() Message {
			last := n.log.lastIndex()
			m := Message{Type: MsgApp, From: 1, To: 2, Term: 1, Index: last, LogTerm: n.log.lastTerm()}
			for i := range uint64(MaxEntriesPerMsg) {
				m.Entries = append(m.Entries, Entry{Term: 1, Index: last + 1 + i, Data: []byte("u")})
			}
			return m
		}
		for n.log.lastIndex()+MaxEntriesPerMsg <= MaxUnstableEntries {
			if err := n.Step(app()); err != nil {
				t.Fatal(err)
			}
		}
		last, msgs := n.log.lastIndex(), len(n.msgs)
		if err := n.Step(app()); err != nil {
			t.Fatal(err)
		}
		if n.log.lastIndex() != last || len(n.msgs) != msgs {
			t.Fatalf("follower holding %d unpersisted entries accepted %d more (last index %d -> %d)",
				last, MaxEntriesPerMsg, last, n.log.lastIndex())
		}
		rd := n.Ready()
		if uint64(len(rd.Entries)) != last {
			t.Fatalf("Ready carries %d entries, want %d", len(rd.Entries), last)
		}
		n.Advance()
		if err := n.Step(app()); err != nil {
			t.Fatal(err)
		}
		if n.log.lastIndex() != last+MaxEntriesPerMsg {
			t.Errorf("after persisting, the append was not accepted: last index %d, want %d", n.log.lastIndex(), last+MaxEntriesPerMsg)
		}
	})
	t.Run("committed per ready", func(t *testing.T) {
		ents := entriesOf(slices.Repeat([]uint64{1}, MaxCommittedPerReady+5)...)
		n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 1)),
			HardState: HardState{Term: 1, Commit: uint64(len(ents))}, Entries: ents})
		var got []Entry
		for n.HasReady() {
			rd := n.Ready()
			if len(rd.CommittedEntries) > MaxCommittedPerReady {
				t.Errorf("Ready carries %d committed entries, want <= %d", len(rd.CommittedEntries), MaxCommittedPerReady)
			}
			got = append(got, rd.CommittedEntries...)
			n.Advance()
		}
		if !logsEqual(got, ents) {
			t.Errorf("redelivered %d entries, want all %d in order", len(got), len(ents))
		}
	})
}

// TestRandomizedSafety runs clusters through random partitions, crashes,
// restarts, message loss, delay, duplication and reordering while proposing,
// with the network checking Election Safety and State Machine Safety on
// every Ready. Healed at the end, every cluster must elect a leader and all
// nodes must apply the same entries. With snap, every node snapshots and
// compacts its log every few entries (keeping a short tail in memory for
// odd seeds), so that followers that lag or restart catch up by snapshot.
// One seed in three runs with small append and in-flight caps, so that
// lagging peers are caught up a few entries at a time behind a full window.
func TestRandomizedSafety(t *testing.T) {
	for _, size := range []int{3, 5} {
		for _, ext := range []bool{true, false} {
			for _, snap := range []bool{false, true} {
				for seed := uint64(1); seed <= 25; seed++ {
					t.Run(fmt.Sprintf("nodes=%d/prevote+checkquorum=%v/snap=%v/seed=%d", size, ext, snap, seed), func(t *testing.T) {
						randomizedRun(t, size, ext, snap, false, seed)
					})
					t.Run(fmt.Sprintf("nodes=%d/prevote+checkquorum=%v/snap=%v/async/seed=%d", size, ext, snap, seed), func(t *testing.T) {
						randomizedRun(t, size, ext, snap, true, seed)
					})
				}
			}
		}
	}
}

// randomizedRun is one run of TestRandomizedSafety: chaos, partitions,
// restarts and crashes with proposals throughout, then a healed network
// that must converge on the leader's log. With async, writes complete
// some rounds after their Ready (AsyncStorageWrites).
func randomizedRun(t *testing.T, size int, ext, snap, async bool, seed uint64) {
	opts := defaultOptions(size, seed)
	opts.preVote, opts.checkQuorum, opts.async = ext, ext, async
	if snap {
		opts.snapshotEvery, opts.snapshotKeep = 3+seed%5, seed%2*2
	}
	if seed%3 == 0 {
		opts.maxEntries, opts.maxInflight = 1+int(seed%4), 1+int(seed%2)
	}
	nw := newNetwork(t, opts)
	r := rand.New(rand.NewPCG(seed, 1000))
	nw.chaos = r
	proposed := 0
	for range 600 {
		switch p := r.Float64(); {
		case p < 0.03:
			nw.isolate(nw.ids[r.IntN(size)])
		case p < 0.05:
			nw.heal()
		case p < 0.08:
			nw.restart(nw.ids[r.IntN(size)])
		case p < 0.09:
			nw.crash(nw.ids[r.IntN(size)])
		}
		for _, id := range nw.ids {
			if n := nw.node(id); nw.get(id).up && n.Role() == Leader && r.IntN(3) == 0 {
				if _, _, err := n.Propose(fmt.Appendf(nil, "p%d", proposed)); err == nil {
					proposed++
				}
			}
		}
		nw.tick(1)
	}
	nw.heal()
	nw.chaos = nil
	for _, id := range nw.ids {
		if !nw.get(id).up {
			nw.restart(id)
		}
	}
	lead := nw.waitLeader(nw.ids, 30*et)
	nw.propose(lead, "final")
	nw.tick(3)
	want := nw.logOf(lead)
	if snap {
		// The logs are compacted: compare what was applied.
		want = nw.committed
		if last := nw.node(lead).Status().LastIndex; uint64(len(want)) != last {
			t.Fatalf("%d entries committed, the leader's last index is %d", len(want), last)
		}
	}
	for _, id := range nw.ids {
		st := nw.node(id).Status()
		if st.Commit != uint64(len(want)) || !snap && !logsEqual(nw.logOf(id), want) {
			t.Errorf("node %d: commit %d, log of %d entries; want the leader's %d", id, st.Commit, st.LastIndex, len(want))
		}
		if got := nw.get(id).applied; !logsEqual(got, want) {
			t.Errorf("node %d applied %d entries since its last start, want all %d of the leader's log", id, len(got), len(want))
		}
	}
	if len(nw.leaders) < 2 {
		t.Logf("only %d terms had a leader; the chaos was mild", len(nw.leaders))
	}
}

// TestDeterminism: two runs with the same seeds send identical message
// sequences; a run with another seed does not (so the seed matters).
func TestDeterminism(t *testing.T) {
	run := func(seed uint64) []string {
		nw := newNetwork(t, defaultOptions(5, seed))
		lead := nw.waitLeader(nw.ids, 20*et)
		for i := range 10 {
			nw.propose(lead, fmt.Sprintf("a%d", i))
		}
		nw.isolate(lead)
		nw.tick(4 * et)
		lead2 := nw.waitLeader(nw.others(lead), 20*et)
		nw.propose(lead2, "b")
		nw.restart(nw.others(lead2)[0])
		nw.heal()
		nw.tick(4 * et)
		nw.waitLeader(nw.ids, 20*et)
		return nw.trace
	}
	a, b := run(99), run(99)
	if len(a) == 0 {
		t.Fatal("empty trace")
	}
	if i := firstDiff(a, b); i < len(a) || len(a) != len(b) {
		t.Fatalf("same seed, different traces (lengths %d and %d), first difference at message %d:\n%s\n%s",
			len(a), len(b), i, at(a, i), at(b, i))
	}
	if c := run(100); slices.Equal(a, c) {
		t.Errorf("seeds 99 and 100 produced identical traces of %d messages; election jitter is not drawn from Config.Rand", len(a))
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<end>"
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{MsgVote.String(), "MsgVote"},
		{MsgPreVoteResp.String(), "MsgPreVoteResp"},
		{MsgHeartbeatResp.String(), "MsgHeartbeatResp"},
		{MessageType(0).String(), "MessageType(0)"},
		{MessageType(200).String(), "MessageType(200)"},
		{Follower.String(), "Follower"},
		{PreCandidate.String(), "PreCandidate"},
		{Candidate.String(), "Candidate"},
		{Leader.String(), "Leader"},
		{Role(9).String(), "Role(9)"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func mustNew(t testing.TB, c Config) *Node {
	t.Helper()
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHeartbeatsFillIdlePeriods: the leader heartbeats a peer only when it
// sent the peer no append since the last heartbeat, and followers still
// learn the commit index from whichever comes next.
func TestHeartbeatsFillIdlePeriods(t *testing.T) {
	nw := newNetwork(t, defaultOptions(5, 3))
	lead := nw.waitLeader(nw.ids, 20*et)
	heartbeats := func(do func()) int {
		from := len(nw.trace)
		do()
		n := 0
		for _, m := range nw.trace[from:] {
			if strings.HasPrefix(m, "MsgHeartbeat ") {
				n++
			}
		}
		return n
	}
	nw.tick(1)
	if got := heartbeats(func() { nw.tick(testHeartbeatTick) }); got != 4 {
		t.Fatalf("idle leader: %d heartbeats in one interval, want one to each of 4 peers", got)
	}
	if got := heartbeats(func() { nw.propose(lead, "x"); nw.tick(testHeartbeatTick) }); got != 0 {
		t.Fatalf("after appends to every peer: %d heartbeats in the next interval, want 0", got)
	}
	if got := heartbeats(func() { nw.tick(testHeartbeatTick) }); got != 4 {
		t.Fatalf("idle again: %d heartbeats, want 4", got)
	}
	for _, id := range nw.ids {
		if got, want := nw.node(id).Status().Commit, nw.node(lead).Status().Commit; got != want {
			t.Errorf("node %d knows commit %d, the leader %d", id, got, want)
		}
	}
}

// TestTicksToDeadline drives leaders with a heartbeat longer than a tick,
// through chaos, crashes and leadership transfers (some to crashed
// targets, which are abandoned), so that the network's tickChecked checks
// TicksToDeadline on leaders too: the network tests tick leaders with
// HeartbeatTick 1, where every tick is a deadline.
func TestTicksToDeadline(t *testing.T) {
	transfers := 0
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			opts := defaultOptions(5, seed)
			opts.heartbeatTick = 3
			nw := newNetwork(t, opts)
			r := rand.New(rand.NewPCG(seed, 2000))
			nw.chaos = r
			for range 400 {
				switch p := r.Float64(); {
				case p < 0.02:
					nw.isolate(nw.ids[r.IntN(5)])
				case p < 0.04:
					nw.heal()
				case p < 0.06:
					nw.restart(nw.ids[r.IntN(5)])
				case p < 0.07:
					nw.crash(nw.ids[r.IntN(5)])
				}
				for _, id := range nw.ids {
					n := nw.node(id)
					if !nw.get(id).up || n.Role() != Leader {
						continue
					}
					if r.IntN(4) == 0 {
						n.Propose([]byte("p")) //nolint:errcheck // refused while transferring: fine
					}
					if r.IntN(30) == 0 && n.TransferLeadership(nw.ids[r.IntN(5)]) == nil && n.LeadTransferee() != None {
						transfers++
					}
				}
				nw.tick(1)
			}
		})
	}
	if transfers < 10 {
		t.Fatalf("%d transfers started: too few for the test to check them", transfers)
	}
}

// TestSnapshotAndCompactRules: CreateSnapshot takes only an applied index
// above the current snapshot whose term is still known; Compact only up to
// the snapshot, and compacting at or below the first index does nothing.
func TestSnapshotAndCompactRules(t *testing.T) {
	nw := newNetwork(t, defaultOptions(1, 1))
	nw.waitLeader(nw.ids, 3*et)
	for _, d := range []string{"a", "b", "c", "d"} {
		nw.propose(1, d)
	}
	n := nw.node(1)
	applied := n.Status().Applied
	if applied < 5 {
		t.Fatalf("applied %d, want at least 5", applied)
	}
	if _, err := n.CreateSnapshot(applied+1, nil); err == nil || !strings.Contains(err.Error(), "beyond the applied index") {
		t.Errorf("snapshot past applied: %v", err)
	}
	if err := n.Compact(1); err == nil || !strings.Contains(err.Error(), "create a snapshot first") {
		t.Errorf("compact without a snapshot: %v", err)
	}
	s, err := n.CreateSnapshot(3, []byte("s3"))
	if err != nil || s.Index != 3 || s.Term != n.Term() || string(s.Data) != "s3" {
		t.Fatalf("CreateSnapshot(3) = %+v, %v", s, err)
	}
	if err := n.Compact(4); err == nil || !strings.Contains(err.Error(), "beyond the snapshot's index 3") {
		t.Errorf("compact past the snapshot: %v", err)
	}
	if err := n.Compact(3); err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); st.FirstIndex != 4 || st.Snapshot != 3 || st.LastIndex != 5 {
		t.Errorf("status %+v, want first index 4, snapshot 3, last 5", st)
	}
	if err := n.Compact(2); err != nil || n.Status().FirstIndex != 4 {
		t.Errorf("compact below the first index: %v, first index %d", err, n.Status().FirstIndex)
	}
	if _, err := n.CreateSnapshot(3, nil); err == nil || !strings.Contains(err.Error(), "not above the current snapshot") {
		t.Errorf("snapshot at the same index: %v", err)
	}
	if _, err := n.CreateSnapshot(5, []byte("s5")); err != nil {
		t.Fatal(err)
	}
	if err := n.Compact(5); err != nil || n.Status().FirstIndex != 6 {
		t.Fatalf("compact everything: %v, first index %d", err, n.Status().FirstIndex)
	}
	// The log goes on after a full compaction.
	nw.propose(1, "e")
	if got := nw.appliedData(1); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("applied %q", got)
	}
}

// TestAppendAndInflightCaps: with Config.MaxEntriesPerMsg 2 and
// MaxInflightMsgs 1, a leader with ten new entries sends each follower one
// append of two entries and waits for its answer before the next; the
// entries still all commit. Out-of-range caps are refused.
func TestAppendAndInflightCaps(t *testing.T) {
	opts := defaultOptions(3, 7)
	opts.maxEntries, opts.maxInflight = 2, 1
	nw := newNetwork(t, opts)
	lead := nw.waitLeader(nw.ids, 30*et)
	nw.propose(lead, "first") // the followers are in replicate state
	n := nw.node(lead)
	for i := range 10 {
		if _, _, err := n.Propose(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	nw.queue = nw.queue[:0]
	nw.handleReady(nw.get(lead))
	apps := map[ID]int{}
	for _, m := range nw.queue {
		if m.Type == MsgApp && len(m.Entries) > 0 {
			apps[m.To]++
			if len(m.Entries) > 2 {
				t.Errorf("an append of %d entries, cap 2", len(m.Entries))
			}
		}
	}
	if len(apps) != 2 || apps[nw.others(lead)[0]] != 1 || apps[nw.others(lead)[1]] != 1 {
		t.Errorf("appends with entries per follower %v, want one each (a window of 1)", apps)
	}
	nw.settle()
	nw.tick(3 * et)
	if got := nw.node(lead).Status().Commit; got < 12 {
		t.Errorf("commit %d after settling, want all 12 entries", got)
	}
	for _, bad := range []Config{{MaxEntriesPerMsg: -1}, {MaxEntriesPerMsg: MaxEntriesPerMsg + 1}, {MaxInflightMsgs: -1}, {MaxInflightMsgs: MaxInflightMsgs + 1}} {
		c := nw.config(nw.get(lead))
		c.MaxEntriesPerMsg, c.MaxInflightMsgs = bad.MaxEntriesPerMsg, bad.MaxInflightMsgs
		if err := c.Validate(); err == nil {
			t.Errorf("Validate accepted MaxEntriesPerMsg %d, MaxInflightMsgs %d", bad.MaxEntriesPerMsg, bad.MaxInflightMsgs)
		}
	}
}

// asyncNode is a fresh node of a three-node group with
// AsyncStorageWrites, made a follower of leader 2 in term 1.
func asyncNode(t *testing.T) *Node {
	t.Helper()
	n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: et, HeartbeatTick: 1,
		Rand: rand.New(rand.NewPCG(1, 1)), AsyncStorageWrites: true})
	if err := n.Step(Message{Type: MsgHeartbeat, From: 2, To: 1, Term: 1}); err != nil {
		t.Fatal(err)
	}
	for n.HasReady() {
		n.Ready()
		n.Advance()
	}
	return n
}

// TestAsyncAppliesOnlyPersistedEntries: with AsyncStorageWrites a
// follower hands out committed entries for applying only once Persisted
// says its own copies are durable; Advance alone says nothing of them, and
// the node then has nothing ready (no busy loop on an unappliable commit).
func TestAsyncAppliesOnlyPersistedEntries(t *testing.T) {
	n := asyncNode(t)
	ents := []Entry{{Term: 1, Index: 1, Data: []byte("a")}, {Term: 1, Index: 2, Data: []byte("b")}}
	if err := n.Step(Message{Type: MsgApp, From: 2, To: 1, Term: 1, Index: 0, LogTerm: 0, Entries: ents, Commit: 2}); err != nil {
		t.Fatal(err)
	}
	rd := n.Ready()
	if len(rd.Entries) != 2 || len(rd.CommittedEntries) != 0 {
		t.Fatalf("Ready: %d entries to persist, %d to apply; want 2 and none (none persisted yet)", len(rd.Entries), len(rd.CommittedEntries))
	}
	mark := rd.Mark
	n.Advance()
	if n.HasReady() {
		t.Fatalf("after Advance, with nothing persisted, the node has a Ready: %+v", n.Ready())
	}
	n.Persisted(LogMark{Index: 1, Epoch: mark.Epoch}) // part of the write, as a report may say
	rd = n.Ready()
	if len(rd.CommittedEntries) != 1 || rd.CommittedEntries[0].Index != 1 {
		t.Fatalf("after entry 1 persisted: %v to apply, want entry 1 only", rd.CommittedEntries)
	}
	n.Advance()
	n.Persisted(mark)
	if rd = n.Ready(); len(rd.CommittedEntries) != 1 || rd.CommittedEntries[0].Index != 2 {
		t.Fatalf("after the write persisted: %v to apply, want entry 2", rd.CommittedEntries)
	}
}

// TestAsyncPersistedIgnoresReplacedEntries: a write that completes for
// entries a new leader replaced meanwhile says nothing of their
// replacements, which must wait for their own write.
func TestAsyncPersistedIgnoresReplacedEntries(t *testing.T) {
	n := asyncNode(t)
	old := []Entry{{Term: 1, Index: 1, Data: []byte("a")}, {Term: 1, Index: 2, Data: []byte("old")}}
	if err := n.Step(Message{Type: MsgApp, From: 2, To: 1, Term: 1, Entries: old, Commit: 1}); err != nil {
		t.Fatal(err)
	}
	first := n.Ready().Mark
	n.Advance()
	// Leader 3 of term 2 replaces entry 2 before the first write completes.
	repl := []Entry{{Term: 2, Index: 2, Data: []byte("new")}}
	if err := n.Step(Message{Type: MsgApp, From: 3, To: 1, Term: 2, Index: 1, LogTerm: 1, Entries: repl, Commit: 2}); err != nil {
		t.Fatal(err)
	}
	second := n.Ready().Mark
	n.Advance()
	n.Persisted(first) // entry 1, and entry 2 of term 1, replaced
	rd := n.Ready()
	if len(rd.CommittedEntries) != 1 || rd.CommittedEntries[0].Index != 1 {
		t.Fatalf("a completed write of entries 1 and the replaced 2/1 let %v apply; want entry 1 only until 2/2 is durable", rd.CommittedEntries)
	}
	n.Advance()
	n.Persisted(second)
	rd = n.Ready()
	if len(rd.CommittedEntries) != 1 || string(rd.CommittedEntries[0].Data) != "new" {
		t.Fatalf("after the second write: %v to apply, want the new entry 2", rd.CommittedEntries)
	}
}

// TestAsyncPersistedIgnoresEntriesReplacedAndPutBack: a write's report
// does not cover entries a truncation replaced after it was handed out,
// even when a later leader put the same index and term back (the entries
// are alike, but their new write is still to come: the old one's data
// was cut from the disk).
func TestAsyncPersistedIgnoresEntriesReplacedAndPutBack(t *testing.T) {
	n := asyncNode(t)
	orig := []Entry{{Term: 1, Index: 1, Data: []byte("a")}, {Term: 1, Index: 2, Data: []byte("b")}, {Term: 1, Index: 3, Data: []byte("c")}}
	if err := n.Step(Message{Type: MsgApp, From: 2, To: 1, Term: 1, Entries: orig}); err != nil {
		t.Fatal(err)
	}
	w1 := n.Ready().Mark
	n.Advance()
	// A leader of term 2 cuts at 2; one of term 3, which holds 2..3 of
	// term 1, cuts again at 2 and puts them back, with 4 and commit 4.
	if err := n.Step(Message{Type: MsgApp, From: 3, To: 1, Term: 2, Index: 1, LogTerm: 1, Entries: []Entry{{Term: 2, Index: 2, Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	n.Ready()
	n.Advance()
	back := append(slices.Clone(orig[1:]), Entry{Term: 3, Index: 4, Data: []byte("d")})
	if err := n.Step(Message{Type: MsgApp, From: 2, To: 1, Term: 3, Index: 1, LogTerm: 1, Entries: back, Commit: 4}); err != nil {
		t.Fatal(err)
	}
	n.Ready()
	n.Advance()
	n.Persisted(w1)
	rd := n.Ready()
	if len(rd.CommittedEntries) != 1 || rd.CommittedEntries[0].Index != 1 {
		t.Fatalf("the first write's late report let %v apply; want entry 1 only (2 and 3 were cut and their new write is pending)", rd.CommittedEntries)
	}
}

// TestAsyncLeaderCountsItselfOnPersisted: with AsyncStorageWrites a
// leader counts its own copy towards a quorum when Persisted reports it,
// not at Advance; a follower's ack alone commits nothing in a group of
// three.
func TestAsyncLeaderCountsItselfOnPersisted(t *testing.T) {
	opts := defaultOptions(3, 15)
	opts.async = true
	nw := newNetwork(t, opts)
	lead := nw.waitLeader(nw.ids, 20*et)
	n := nw.node(lead)
	idx, term, err := n.Propose([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	commit := n.Status().Commit
	rd := n.Ready()
	if len(rd.Entries) != 1 || rd.Entries[0].Index != idx {
		t.Fatalf("Ready entries %v, want entry %d to persist", rd.Entries, idx)
	}
	mark := rd.Mark
	n.Advance()
	if got := n.Status().Commit; got != commit {
		t.Fatalf("Advance without Persisted moved the leader's commit to %d", got)
	}
	f := nw.others(lead)[0]
	if err := n.Step(Message{Type: MsgAppResp, From: f, To: lead, Term: n.Term(), Index: idx}); err != nil {
		t.Fatal(err)
	}
	if got := n.Status().Commit; got != commit {
		t.Fatalf("leader committed %d on one follower's ack while its own write was in flight; want %d", got, commit)
	}
	n.Persisted(mark)
	if got := n.Status().Commit; got != idx {
		t.Errorf("after its write of %d/%d persisted the leader's commit is %d, want %d", idx, term, got, idx)
	}
}

// TestPersistedNeedsAsyncStorageWrites: on a node that persists at
// Advance, Persisted is a caller's mistake and says so.
func TestPersistedNeedsAsyncStorageWrites(t *testing.T) {
	n := mustNew(t, Config{ID: 1, Peers: []ID{1, 2, 3}, ElectionTick: et, HeartbeatTick: 1, Rand: rand.New(rand.NewPCG(1, 1))})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "AsyncStorageWrites") {
			t.Errorf("Persisted on a synchronous node: recovered %v, want a panic naming AsyncStorageWrites", r)
		}
	}()
	n.Persisted(LogMark{Index: 1})
}
