package raft

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// This file is a small deterministic in-memory network for testing Nodes the
// way a caller drives them: each round takes every node's Ready, "persists"
// it to the node's memStore, queues its messages on a FIFO, applies its
// committed entries and calls Advance; then the FIFO is delivered. It checks
// the safety properties on every Ready, so every test that runs a network
// also checks them:
//
//   - Election Safety: at most one leader per term;
//   - a node never changes its persisted vote within a term, and its
//     persisted term never goes back;
//   - State Machine Safety: every node applies, at each index, the same
//     entry, contiguously from index 1 (again from 1 after a restart), and
//     only entries it has persisted;
//   - MustSync is set whenever HardState or Entries changed;
//   - no MsgApp carries more than MaxEntriesPerMsg entries (or the
//     nodes' Config.MaxEntriesPerMsg).
//
// With netOptions.async the nodes run with AsyncStorageWrites: a Ready's
// writes reach the node's written log at once but its durable memStore
// only when the network completes the write (in order, some rounds later
// under chaos); its votes and acknowledgements wait until then, and a
// restart loses what was written and not completed.

// memStore is a node's "disk": what it persisted from its Readys.
type memStore struct {
	hs      HardState
	snap    Snapshot
	entries []Entry // after snap.Index
}

// appendEntries persists ents, which continue the persisted log or replace
// a suffix of it after the snapshot.
func (st *memStore) appendEntries(ents []Entry) {
	first := ents[0].Index
	st.entries = append(st.entries[:first-st.snap.Index-1], ents...)
}

// persistSnapshot persists a snapshot the node made and drops the entries
// it covers.
func (st *memStore) persistSnapshot(s Snapshot) {
	if n := s.Index - st.snap.Index; n <= uint64(len(st.entries)) {
		st.entries = slices.Clone(st.entries[n:])
	} else {
		st.entries = nil
	}
	st.snap = s
}

// lastIndex is the last persisted index.
func (st *memStore) lastIndex() uint64 { return st.snap.Index + uint64(len(st.entries)) }

// entry returns the persisted entry at i, if the log after the snapshot
// holds it.
func (st *memStore) entry(i uint64) (Entry, bool) {
	if i <= st.snap.Index || i > st.lastIndex() {
		return Entry{}, false
	}
	return st.entries[i-st.snap.Index-1], true
}

type netNode struct {
	id    ID
	node  *Node
	store memStore
	// written is what the node wrote, durable or not (async only: else
	// it is store), and pending the writes not yet durable, oldest first.
	written  memStore
	pending  []pendingWrite
	applied  []Entry // applied since the last (re)start
	ever     []Entry // applied at each index, over every start
	up       bool
	restarts uint64
}

// pendingWrite is a Ready's writes on their way to the durable store
// (netOptions.async), with the messages that wait for them.
type pendingWrite struct {
	hs      HardState
	entries []Entry
	mark    LogMark
	msgs    []Message
}

type netOptions struct {
	// async runs the nodes with AsyncStorageWrites (see the top of the
	// file).
	async       bool
	size        int
	seed        uint64
	preVote     bool
	checkQuorum bool
	quorum      func(int) int
	// heartbeatTick, when set, replaces testHeartbeatTick.
	heartbeatTick int
	// maxEntries and maxInflight, when set, are the nodes'
	// Config.MaxEntriesPerMsg and MaxInflightMsgs.
	maxEntries, maxInflight int
	// state, when set, gives a node's persisted state at creation (as if
	// it restarted from it).
	state map[ID]memStore
	// snapshotEvery, when set, makes every node snapshot and compact its
	// log each time it has applied that many entries past its snapshot,
	// keeping snapshotKeep entries before the snapshot in memory.
	snapshotEvery, snapshotKeep uint64
	// hostile: forged messages are injected, so Step errors are expected
	// and the properties across nodes (one leader per term, the same
	// entry applied at an index everywhere) cannot hold against a forger
	// that speaks for a member; each node's own are checked instead: it
	// applies, at each index, the same entry across its restarts.
	hostile bool
}

func defaultOptions(size int, seed uint64) netOptions {
	return netOptions{size: size, seed: seed, preVote: true, checkQuorum: true}
}

type network struct {
	t     testing.TB
	opts  netOptions
	ids   []ID
	nodes []*netNode

	queue    []Message
	isolated map[ID]bool
	// drop, when set, drops the messages it returns true for.
	drop func(Message) bool
	// mutate, when set, may rewrite a message before delivery.
	mutate func(*Message)
	// chaos, when set, reorders each round's deliveries and drops, delays
	// (to a later round or the next tick) and duplicates messages at random.
	chaos *rand.Rand
	later []Message // delayed by chaos until the next tick

	trace     []string // every message sent, in order
	committed []Entry  // committed[i-1]: the entry applied at index i
	leaders   map[uint64]ID
	delivered int
}

const (
	testElectionTick  = 10
	testHeartbeatTick = 1
)

func newNetwork(t testing.TB, opts netOptions) *network {
	t.Helper()
	nw := &network{t: t, opts: opts, isolated: map[ID]bool{}, leaders: map[uint64]ID{}}
	for i := 1; i <= opts.size; i++ {
		nw.ids = append(nw.ids, ID(i))
	}
	for _, id := range nw.ids {
		nn := &netNode{id: id, store: opts.state[id]}
		nw.nodes = append(nw.nodes, nn)
		nw.start(nn)
	}
	return nw
}

func (nw *network) config(nn *netNode) Config {
	return Config{
		ID:            nn.id,
		Peers:         nw.ids,
		ElectionTick:  testElectionTick,
		HeartbeatTick: cmp.Or(nw.opts.heartbeatTick, testHeartbeatTick),
		Rand:          rand.New(rand.NewPCG(nw.opts.seed, uint64(nn.id)<<32|nn.restarts)),
		PreVote:       nw.opts.preVote,
		CheckQuorum:   nw.opts.checkQuorum,
		HardState:     nn.store.hs,
		Snapshot:      nn.store.snap,
		Entries:       slices.Clone(nn.store.entries),
		Quorum:        nw.opts.quorum,

		MaxEntriesPerMsg: nw.opts.maxEntries,
		MaxInflightMsgs:  nw.opts.maxInflight,

		AsyncStorageWrites: nw.opts.async,
	}
}

// start (re)creates a node from its persisted state, as a process restart
// would: whatever it had not handed out in a Ready is lost.
func (nw *network) start(nn *netNode) {
	nw.t.Helper()
	n, err := New(nw.config(nn))
	if err != nil {
		nw.t.Fatalf("New(node %d): %v", nn.id, err)
	}
	nn.node = n
	nn.written = memStore{hs: nn.store.hs, snap: nn.store.snap, entries: slices.Clone(nn.store.entries)}
	nn.pending = nil
	// The state machine restarts from the snapshot (the entries it
	// stands for), or empty.
	nn.applied = slices.Clone(nw.committed[:nn.store.snap.Index])
	nn.up = true
}

func (nw *network) get(id ID) *netNode { return nw.nodes[id-1] }

func (nw *network) node(id ID) *Node { return nw.get(id).node }

// restart crashes node id and starts it again from its store.
func (nw *network) restart(id ID) {
	nn := nw.get(id)
	nn.restarts++
	nw.start(nn)
}

func (nw *network) crash(id ID) { nw.get(id).up = false }

func (nw *network) isolate(id ID) { nw.isolated[id] = true }

func (nw *network) heal() {
	nw.isolated = map[ID]bool{}
	nw.drop = nil
	nw.mutate = nil
}

// handleReady does what a caller does with one Ready, checking it on the way.
func (nw *network) handleReady(nn *netNode) {
	t := nw.t
	t.Helper()
	rd := nn.node.Ready()
	st := &nn.store
	if nw.opts.async {
		st = &nn.written
	}

	// Persist, as the lock service does: only when MustSync, so that a
	// restart may recall an older commit index than the node had.
	hs := rd.HardState
	if (hs.Term != st.hs.Term || hs.Vote != st.hs.Vote || len(rd.Entries) > 0) && !rd.MustSync {
		t.Errorf("node %d: Ready changed term or vote %+v -> %+v or has %d entries, but MustSync is false", nn.id, st.hs, hs, len(rd.Entries))
	}
	if !rd.MustSync {
		hs = st.hs
	}
	if hs.Term < st.hs.Term {
		t.Errorf("node %d: persisted term went back from %d to %d", nn.id, st.hs.Term, hs.Term)
	}
	if hs.Term == st.hs.Term && st.hs.Vote != None && hs.Vote != st.hs.Vote {
		t.Errorf("node %d: changed its vote in term %d from %d to %d", nn.id, hs.Term, st.hs.Vote, hs.Vote)
	}
	if hs.Commit < st.hs.Commit {
		t.Errorf("node %d: persisted commit went back from %d to %d", nn.id, st.hs.Commit, hs.Commit)
	}
	prevCommit := st.hs.Commit
	st.hs = hs
	if snap := rd.Snapshot; !snap.IsEmpty() {
		if !rd.MustSync {
			t.Errorf("node %d: Ready has a snapshot at %d but MustSync is false", nn.id, snap.Index)
		}
		if snap.Index > uint64(len(nw.committed)) || nw.committed[snap.Index-1].Term != snap.Term {
			t.Fatalf("node %d: installs a snapshot at %d/%d that no node applied", nn.id, snap.Index, snap.Term)
		}
		if string(snap.Data) != snapshotData(snap.Index) {
			t.Fatalf("node %d: installs a snapshot at %d with data %q", nn.id, snap.Index, snap.Data)
		}
		if snap.Index <= uint64(len(nn.applied)) {
			t.Errorf("node %d: installs a snapshot at %d, at or below what it applied (%d)", nn.id, snap.Index, len(nn.applied))
		}
		st.snap, st.entries = snap, nil
		if nw.opts.async { // a snapshot is persisted in line, as the lock service does
			nn.store.snap, nn.store.entries = snap, nil
		}
		nn.applied = slices.Clone(nw.committed[:snap.Index])
	}
	if len(rd.Entries) > 0 {
		first := rd.Entries[0].Index
		if first <= st.snap.Index || first > st.lastIndex()+1 {
			t.Fatalf("node %d: Ready.Entries start at %d, outside the persisted log (%d, %d+1]", nn.id, first, st.snap.Index, st.lastIndex())
		}
		for i, e := range rd.Entries {
			if e.Index != first+uint64(i) {
				t.Fatalf("node %d: Ready.Entries not contiguous at %d: %+v", nn.id, i, rd.Entries)
			}
		}
		if first <= prevCommit {
			t.Errorf("node %d: Ready rewrites persisted index %d at or below the persisted commit %d", nn.id, first, prevCommit)
		}
		st.appendEntries(rd.Entries)
	}

	// Send, only after persisting: with async writes, a leader's messages
	// (which promise nothing of the Ready's writes) at once, the others
	// once the writes complete — this Ready's, or, with nothing to write,
	// those in flight.
	var held *pendingWrite
	if nw.opts.async && (rd.MustSync || len(nn.pending) > 0) {
		if rd.MustSync {
			nn.pending = append(nn.pending, pendingWrite{hs: st.hs, entries: slices.Clone(rd.Entries), mark: rd.Mark})
		}
		held = &nn.pending[len(nn.pending)-1]
	}
	for _, m := range rd.Messages {
		if m.From != nn.id {
			t.Errorf("node %d sent a message from %d: %v", nn.id, m.From, m)
		}
		if limit := cmp.Or(nw.opts.maxEntries, MaxEntriesPerMsg); len(m.Entries) > limit {
			t.Errorf("node %d sent %d entries in one message (max %d)", nn.id, len(m.Entries), limit)
		}
		if held != nil && m.Type != MsgApp && m.Type != MsgHeartbeat && m.Type != MsgSnap {
			held.msgs = append(held.msgs, m)
			continue
		}
		nw.trace = append(nw.trace, fmt.Sprintf("%v %+v", m, m.Entries))
		nw.queue = append(nw.queue, m)
	}

	// Apply.
	for _, e := range rd.CommittedEntries {
		if want := uint64(len(nn.applied)) + 1; e.Index != want {
			t.Fatalf("node %d applied index %d, want %d (applies must be contiguous)", nn.id, e.Index, want)
		}
		if p, ok := nn.store.entry(e.Index); !ok || !sameEntry(p, e) {
			t.Errorf("node %d applied %v, which it has not persisted", nn.id, e)
		}
		if nw.opts.hostile {
			if e.Index <= uint64(len(nn.ever)) {
				if c := nn.ever[e.Index-1]; !sameEntry(c, e) {
					t.Errorf("node %d applied %s at index %d, where it applied %s before", nn.id, fmtEntry(e), e.Index, fmtEntry(c))
				}
			} else {
				nn.ever = append(nn.ever, e)
			}
		} else if e.Index <= uint64(len(nw.committed)) {
			if c := nw.committed[e.Index-1]; !sameEntry(c, e) {
				t.Errorf("state machine safety violated: node %d applied %s at index %d, another node applied %s",
					nn.id, fmtEntry(e), e.Index, fmtEntry(c))
			}
		} else {
			nw.committed = append(nw.committed, e)
		}
		nn.applied = append(nn.applied, e)
	}

	if rd.SoftState.Role == Leader && !nw.opts.hostile {
		if l, ok := nw.leaders[rd.SoftState.Term]; ok && l != nn.id {
			t.Errorf("election safety violated: nodes %d and %d both led term %d", l, nn.id, rd.SoftState.Term)
		}
		nw.leaders[rd.SoftState.Term] = nn.id
	}
	nn.node.Advance()

	if every := nw.opts.snapshotEvery; every > 0 {
		if applied := uint64(len(nn.applied)); applied >= nn.node.Status().Snapshot+every {
			snap, err := nn.node.CreateSnapshot(applied, []byte(snapshotData(applied)))
			if err != nil {
				t.Fatalf("node %d: CreateSnapshot(%d): %v", nn.id, applied, err)
			}
			nn.store.persistSnapshot(snap)
			if nw.opts.async {
				nn.written.persistSnapshot(snap)
			}
			if err := nn.node.Compact(applied - min(applied, nw.opts.snapshotKeep)); err != nil {
				t.Fatalf("node %d: Compact: %v", nn.id, err)
			}
		}
	}
}

// completeWrites makes the oldest n of nn's pending writes durable, in
// order: the store takes them, their messages leave, and the node hears
// they are persisted.
func (nw *network) completeWrites(nn *netNode, n int) {
	for _, p := range nn.pending[:n] {
		nn.store.hs = p.hs
		ents := p.entries
		for len(ents) > 0 && ents[0].Index <= nn.store.snap.Index {
			ents = ents[1:] // a snapshot installed since covers them
		}
		if len(ents) > 0 {
			nn.store.appendEntries(ents)
		}
		for _, m := range p.msgs {
			nw.trace = append(nw.trace, fmt.Sprintf("%v %+v", m, m.Entries))
			nw.queue = append(nw.queue, m)
		}
		if len(p.entries) > 0 {
			nn.node.Persisted(p.mark)
		}
	}
	nn.pending = append(nn.pending[:0], nn.pending[n:]...)
}

// snapshotData is the state machine's snapshot at index: the entries are
// in nw.committed, so the index stands for them.
func snapshotData(index uint64) string { return fmt.Sprintf("state@%d", index) }

func sameEntry(a, b Entry) bool {
	return a.Term == b.Term && a.Index == b.Index && (a.Data == nil) == (b.Data == nil) && bytes.Equal(a.Data, b.Data)
}

func fmtEntry(e Entry) string {
	if e.Data == nil {
		return fmt.Sprintf("{t%d i%d empty}", e.Term, e.Index)
	}
	return fmt.Sprintf("{t%d i%d %q}", e.Term, e.Index, e.Data)
}

func (nw *network) dropped(m Message) bool {
	return nw.isolated[m.From] || nw.isolated[m.To] || (nw.drop != nil && nw.drop(m))
}

// settle runs rounds (all Readys, then deliver the FIFO) until no node has
// anything to do. It runs no ticks, so it always ends.
func (nw *network) settle() {
	nw.t.Helper()
	for round := 0; ; round++ {
		if round > 10000 {
			nw.t.Fatalf("network did not quiesce after %d rounds", round)
		}
		busy := false
		for _, nn := range nw.nodes {
			if nn.up && nn.node.HasReady() {
				nw.handleReady(nn)
				busy = true
			}
		}
		for _, nn := range nw.nodes {
			if !nn.up || len(nn.pending) == 0 {
				continue
			}
			n := len(nn.pending)
			if nw.chaos != nil && busy {
				n = nw.chaos.IntN(n + 1) // some complete later
			}
			if n > 0 {
				nw.completeWrites(nn, n)
				busy = true
			}
		}
		q := nw.queue
		nw.queue = nil
		if nw.chaos != nil {
			nw.chaos.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
		}
		for _, m := range q {
			busy = true
			if nw.dropped(m) {
				continue
			}
			if nw.chaos != nil {
				switch p := nw.chaos.Float64(); {
				case p < 0.05:
					continue // lost
				case p < 0.10:
					nw.queue = append(nw.queue, m) // delayed to a later round
					continue
				case p < 0.15:
					nw.later = append(nw.later, m) // delayed to the next tick
					continue
				case p < 0.20:
					nw.queue = append(nw.queue, m) // duplicated: delivered now and later
				}
			}
			to := nw.get(m.To)
			if !to.up {
				continue
			}
			if nw.mutate != nil {
				nw.mutate(&m)
			}
			nw.delivered++
			if err := to.node.Step(m); err != nil && !nw.opts.hostile {
				nw.t.Errorf("node %d: Step(%v): %v", m.To, m, err)
			}
		}
		if !busy {
			return
		}
	}
}

// tick advances every up node's clock k times, settling after each tick.
func (nw *network) tick(k int) { nw.tickNodes(nw.ids, k) }

// tickNodes advances only the clocks of ids, k times, settling after each.
func (nw *network) tickNodes(ids []ID, k int) {
	nw.t.Helper()
	for range k {
		nw.queue = append(nw.queue, nw.later...)
		nw.later = nil
		for _, id := range ids {
			if nn := nw.get(id); nn.up {
				nw.tickChecked(nn)
			}
		}
		nw.settle()
	}
}

// tickChecked ticks nn once and checks TicksToDeadline's promise, so
// that every test driving a network checks it: a tick before the deadline
// only counts, leaving role, term, log, outbox and transfer alone, and brings the
// deadline one tick closer.
func (nw *network) tickChecked(nn *netNode) {
	nw.t.Helper()
	n := nn.node
	k, quiet := n.TicksToDeadline(), !n.HasReady()
	role, term, last, to := n.Role(), n.Term(), n.log.lastIndex(), n.LeadTransferee()
	n.Tick()
	if k == 1 || !quiet {
		return
	}
	if n.HasReady() || n.Role() != role || n.Term() != term || n.log.lastIndex() != last || n.LeadTransferee() != to {
		nw.t.Fatalf("node %d: a tick %d before its deadline acted (role %v -> %v, term %d -> %d, ready %v)",
			nn.id, k, role, n.Role(), term, n.Term(), n.HasReady())
	}
	if got := n.TicksToDeadline(); got != k-1 {
		nw.t.Fatalf("node %d: TicksToDeadline %d after a quiet tick, want %d", nn.id, got, k-1)
	}
}

// agreedLeader returns the leader that every node of among knows as leader,
// or None if they do not all agree on one leader in one term.
func (nw *network) agreedLeader(among []ID) ID {
	var lead ID
	var term uint64
	leaders := 0
	for i, id := range among {
		n := nw.node(id)
		if i == 0 {
			lead, term = n.Lead(), n.Term()
		}
		if n.Lead() != lead || n.Term() != term {
			return None
		}
		if n.Role() == Leader {
			leaders++
		}
	}
	if lead == None || leaders != 1 || nw.node(lead).Role() != Leader {
		return None
	}
	return lead
}

// waitLeader ticks until every node of among agrees on one leader, which is
// among them and the only leader among them, and returns it.
func (nw *network) waitLeader(among []ID, maxTicks int) ID {
	nw.t.Helper()
	for range maxTicks {
		if l := nw.agreedLeader(among); l != None && slices.Contains(among, l) {
			return l
		}
		nw.tick(1)
	}
	for _, id := range among {
		nw.t.Logf("node %d: %+v", id, nw.node(id).Status())
	}
	nw.t.Fatalf("no agreed leader among %v after %d ticks", among, maxTicks)
	return None
}

// propose proposes data on id, which must be the leader, and settles.
func (nw *network) propose(id ID, data string) (index, term uint64) {
	nw.t.Helper()
	index, term, err := nw.node(id).Propose([]byte(data))
	if err != nil {
		nw.t.Fatalf("Propose(%q) on node %d: %v", data, id, err)
	}
	nw.settle()
	return index, term
}

// appliedData returns the data of the non-empty entries node id applied
// since its last start, in order.
func (nw *network) appliedData(id ID) []string {
	var out []string
	for _, e := range nw.get(id).applied {
		if e.Data != nil {
			out = append(out, string(e.Data))
		}
	}
	return out
}

func (nw *network) others(id ID) []ID {
	var out []ID
	for _, x := range nw.ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// logOf returns a copy of node id's in-memory log.
func (nw *network) logOf(id ID) []Entry { return slices.Clone(nw.node(id).log.entries) }

func logsEqual(a, b []Entry) bool {
	return slices.EqualFunc(a, b, sameEntry)
}

func entriesOf(terms ...uint64) []Entry {
	out := make([]Entry, len(terms))
	for i, t := range terms {
		out[i] = Entry{Term: t, Index: uint64(i + 1), Data: fmt.Appendf(nil, "e%d-t%d", i+1, t)}
	}
	return out
}
