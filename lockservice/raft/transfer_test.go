package raft

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestLeaderTransfer: a leader hands over to an up-to-date follower, which
// leads the next term without any tick (no election timeout waited for),
// though CheckQuorum's lease makes every voter hear from the old leader.
// Everything committed before stays, and the new leader commits.
func TestLeaderTransfer(t *testing.T) {
	for _, size := range []int{3, 5} {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("nodes=%d/seed=%d", size, seed), func(t *testing.T) {
				nw := newNetwork(t, defaultOptions(size, seed))
				old := nw.waitLeader(nw.ids, 20*et)
				term := nw.node(old).Term()
				nw.propose(old, "before")
				to := nw.node(old).TransferTarget()
				if to == None || to == old {
					t.Fatalf("TransferTarget = %d on leader %d", to, old)
				}
				if err := nw.node(old).TransferLeadership(to); err != nil {
					t.Fatal(err)
				}
				nw.settle() // no tick: only the transfer can elect
				if got := nw.agreedLeader(nw.ids); got != to {
					t.Fatalf("after the transfer, agreed leader is %d, want %d", got, to)
				}
				if got := nw.node(to).Term(); got != term+1 {
					t.Errorf("new leader's term %d, want %d (one election)", got, term+1)
				}
				if got := nw.node(old).LeadTransferee(); got != None {
					t.Errorf("old leader still transferring to %d after stepping down", got)
				}
				nw.propose(to, "after")
				nw.tick(2)
				for _, id := range nw.ids {
					if got := nw.appliedData(id); !slices.Equal(got, []string{"before", "after"}) {
						t.Errorf("node %d applied %q, want [before after]", id, got)
					}
				}
			})
		}
	}
}

// TestLeaderTransferWaitsForCatchUp is the canary for the catch-up: the
// target misses appends, so its log is behind the leader's; a target that
// campaigned at once would lose (the others have more) and cost an
// election. The leader refuses proposals meanwhile, sends MsgTimeoutNow
// only once the target's log matches its own, and the target then leads
// the very next term with every entry.
func TestLeaderTransferWaitsForCatchUp(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 5))
	old := nw.waitLeader(nw.ids, 20*et)
	term := nw.node(old).Term()
	to := nw.others(old)[0]
	nw.drop = func(m Message) bool { return m.To == to && m.Type == MsgApp }
	for i := range 5 {
		nw.propose(old, fmt.Sprintf("e%d", i))
	}
	if got, want := nw.node(to).Status().LastIndex, nw.node(old).Status().LastIndex; got >= want {
		t.Fatalf("target's last index %d, want behind the leader's %d", got, want)
	}
	if err := nw.node(old).TransferLeadership(to); err != nil {
		t.Fatal(err)
	}
	nw.tick(2)
	if got := nw.node(old).Role(); got != Leader || nw.node(old).Term() != term {
		t.Fatalf("while the target lags, the old leader is %v in term %d, want Leader in %d", got, nw.node(old).Term(), term)
	}
	if _, _, err := nw.node(old).Propose([]byte("refused")); !errors.Is(err, ErrTransferring) {
		t.Fatalf("Propose during the transfer: %v, want ErrTransferring", err)
	}
	for _, m := range nw.trace {
		if len(m) >= len("MsgTimeoutNow") && m[:len("MsgTimeoutNow")] == "MsgTimeoutNow" {
			t.Fatalf("MsgTimeoutNow sent to a lagging target: %s", m)
		}
	}
	nw.drop = nil
	// The next heartbeat's answer starts the catch-up, well within an
	// election timeout.
	for range 3 {
		nw.tick(1)
		if nw.agreedLeader(nw.ids) == to {
			break
		}
	}
	if got := nw.agreedLeader(nw.ids); got != to || nw.node(to).Term() != term+1 {
		t.Fatalf("after catch-up: leader %d term %d, want %d in term %d", got, nw.node(to).Term(), to, term+1)
	}
	nw.propose(to, "after")
	nw.tick(2)
	want := []string{"e0", "e1", "e2", "e3", "e4", "after"}
	for _, id := range nw.ids {
		if got := nw.appliedData(id); !slices.Equal(got, want) {
			t.Errorf("node %d applied %q, want %q", id, got, want)
		}
	}
}

// TestLeaderTransferAborts: a target that is down never takes over; after
// an election timeout the leader abandons the transfer and accepts
// proposals again, in the same term.
func TestLeaderTransferAborts(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 6))
	lead := nw.waitLeader(nw.ids, 20*et)
	term := nw.node(lead).Term()
	to := nw.others(lead)[0]
	nw.crash(to)
	if err := nw.node(lead).TransferLeadership(to); err != nil {
		t.Fatal(err)
	}
	nw.tick(et - 1)
	if _, _, err := nw.node(lead).Propose([]byte("x")); !errors.Is(err, ErrTransferring) {
		t.Fatalf("Propose %d ticks into the transfer: %v, want ErrTransferring", et-1, err)
	}
	nw.tick(1)
	if got := nw.node(lead).LeadTransferee(); got != None {
		t.Fatalf("after an election timeout, still transferring to %d", got)
	}
	if nw.node(lead).Role() != Leader || nw.node(lead).Term() != term {
		t.Fatalf("leader %d is %v in term %d, want Leader in %d", lead, nw.node(lead).Role(), nw.node(lead).Term(), term)
	}
	nw.propose(lead, "after")
	if got := nw.appliedData(lead); !slices.Equal(got, []string{"after"}) {
		t.Errorf("leader applied %q, want [after]", got)
	}
}

// TestTransferArguments: only a leader transfers, only to a peer; to itself
// it does nothing. A vote request not marked Transfer is still ignored
// within the lease (TestLeaseIgnoresVotes), one marked Transfer is not.
func TestTransferArguments(t *testing.T) {
	nw := newNetwork(t, defaultOptions(3, 8))
	lead := nw.waitLeader(nw.ids, 20*et)
	f := nw.others(lead)[0]
	if err := nw.node(f).TransferLeadership(lead); !errors.Is(err, ErrNotLeader) {
		t.Errorf("follower's TransferLeadership: %v, want ErrNotLeader", err)
	}
	if nw.node(f).TransferTarget() != None {
		t.Errorf("follower's TransferTarget is %d, want None", nw.node(f).TransferTarget())
	}
	if err := nw.node(lead).TransferLeadership(42); err == nil {
		t.Error("transfer to a stranger: no error")
	}
	if err := nw.node(lead).TransferLeadership(lead); err != nil || nw.node(lead).LeadTransferee() != None {
		t.Errorf("transfer to itself: %v, transferee %d; want nil, none", err, nw.node(lead).LeadTransferee())
	}
	c := nw.others(lead)[1]
	n := nw.node(f)
	term := n.Term()
	last := n.Status().LastIndex
	if err := n.Step(Message{Type: MsgVote, From: c, To: f, Term: term + 1, Index: last, LogTerm: term, Transfer: true}); err != nil {
		t.Fatal(err)
	}
	if n.Term() != term+1 {
		t.Errorf("a Transfer vote within the lease left the term at %d, want %d", n.Term(), term+1)
	}
}
