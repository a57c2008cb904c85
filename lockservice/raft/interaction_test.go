package raft

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// This file is an interaction environment in the style of etcd's rafttest:
// each testdata/*.txt script drives a few Nodes one step at a time (tick,
// campaign, propose, handle a Ready, deliver, drop, hold back or replay a
// message, crash, restart) and the expected output records what happened.
// Scripts pin down corner cases that a random network reaches only by luck
// (competing candidates, log truncation, Figure 8, votes across restarts,
// stale and reordered appends), and their expectations are reviewed by hand
// against what Raft's safety requires. Run with -rewrite to regenerate the
// expectations after an intended change, then read the diff.
//
// The environment checks safety on every Ready as it goes and prints a
// "SAFETY VIOLATION" line into the output when it fails, so that a broken
// invariant changes the expected output even where a script does not look:
// at most one leader per term, a persisted vote never changes within a term,
// every node applies the same entry at each index.
//
// Commands (IDs are positional; k=v options follow):
//
//	add-nodes <n> [prevote=bool] [checkquorum=bool]
//	campaign <id>                   handle its pending Ready, then tick it until it campaigns
//	tick <id> [n=<k>]               tick <id> k times (default 1)
//	propose <id> <data> [n=<k>]     propose data on <id> (k times)
//	process-ready [<id>...]         handle each node's Ready (persist, send, apply, Advance)
//	deliver-msgs [from=] [to=] [type=] [n=] [drop] [keep]
//	                                deliver (or drop) the matching messages in flight, oldest
//	                                first; keep delivers a copy and leaves the original in
//	                                flight, so that it can be replayed later as a stale message
//	hold [from=] [to=] [type=] [n=] take the (first n) matching messages out of flight
//	release                         put the held messages back in flight, after the others
//	stabilize [<id>...]             handle Readys and deliver until nothing is left, among
//	                                the named nodes only (a connected group); messages from
//	                                or to the others stay in flight
//	crash <id>                      lose everything not persisted; messages to it are dropped
//	restart <id>                    start it again from what it persisted
//	msgs                            list the messages in flight and held
//	status                          one line per node
//	raft-log <id>                   the node's in-memory log and what it persisted
//	snapshot <id> [index=<i>] [keep=<k>]
//	                                snapshot the node's state machine at i (default: its
//	                                applied index), persist it, drop the persisted log up to
//	                                i and the in-memory log up to i-k (etcd's CreateSnapshot
//	                                and Compact)
//	log-level none|info|debug       how much process-ready, deliver-msgs and stabilize print
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := &interactionEnv{level: levelInfo, leaders: map[uint64]ID{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			env.out.Reset()
			env.handle(t, d)
			if env.out.Len() == 0 {
				return "ok\n"
			}
			return env.out.String()
		})
	})
}

type logLevel int

const (
	levelNone logLevel = iota
	levelInfo
	levelDebug
)

// ixNode is one node of the environment with its "disk".
type ixNode struct {
	id       ID
	node     *Node // nil while crashed
	store    memStore
	restarts uint64
	// soft is the last SoftState a Ready reported, so that role changes
	// print once.
	soft SoftState
}

type interactionEnv struct {
	level    logLevel
	prevote  bool
	checkQ   bool
	nodes    []*ixNode
	inflight []Message
	held     []Message
	// committed[i-1] is the entry applied at index i by the first node
	// that applied it; leaders records the leader of each term. Both feed
	// the safety checks.
	committed []Entry
	leaders   map[uint64]ID
	out       strings.Builder
}

func (env *interactionEnv) printf(lvl logLevel, format string, args ...any) {
	if env.level >= lvl {
		fmt.Fprintf(&env.out, format, args...)
	}
}

func (env *interactionEnv) handle(t *testing.T, d *datadriven.TestData) {
	switch d.Cmd {
	case "add-nodes":
		n := env.posInt(t, d, 0)
		env.prevote, env.checkQ = false, false
		d.MaybeScanArgs(t, "prevote", &env.prevote)
		d.MaybeScanArgs(t, "checkquorum", &env.checkQ)
		// A new cluster: forget everything about the previous one.
		env.nodes, env.inflight, env.held, env.committed = nil, nil, nil, nil
		env.leaders = map[uint64]ID{}
		for i := 1; i <= n; i++ {
			env.nodes = append(env.nodes, &ixNode{id: ID(i)})
		}
		for _, nn := range env.nodes {
			env.start(t, nn)
		}
		env.printStatus()
	case "campaign":
		nn := env.get(t, env.posInt(t, d, 0))
		if nn.node == nil {
			t.Fatalf("%s: node %d is down", d.Pos, nn.id)
		}
		if nn.node.Role() == Leader {
			t.Fatalf("%s: node %d is the leader; a leader does not campaign", d.Pos, nn.id)
		}
		// A pending Ready (a restart's replay, say) is handled first, so
		// that the ticks below are what makes the node campaign.
		env.processReady(nn)
		// An idle follower or candidate changes nothing a Ready shows
		// until its election timeout fires, so tick until it does.
		ticks := 0
		for !nn.node.HasReady() {
			if ticks > 2*testElectionTick {
				t.Fatalf("%s: node %d did not campaign within %d ticks (a leader does not campaign)", d.Pos, nn.id, ticks)
			}
			nn.node.Tick()
			ticks++
		}
		env.printf(levelInfo, "%d campaigns after %d ticks: %v at term %d\n", nn.id, ticks, nn.node.Role(), nn.node.Term())
	case "tick":
		nn := env.get(t, env.posInt(t, d, 0))
		k := 1
		d.MaybeScanArgs(t, "n", &k)
		if nn.node == nil {
			t.Fatalf("%s: node %d is down", d.Pos, nn.id)
		}
		for range k {
			nn.node.Tick()
		}
	case "propose":
		nn := env.get(t, env.posInt(t, d, 0))
		if len(d.CmdArgs) < 2 {
			t.Fatalf("%s: propose <id> <data>", d.Pos)
		}
		if nn.node == nil {
			t.Fatalf("%s: node %d is down", d.Pos, nn.id)
		}
		k := 1
		d.MaybeScanArgs(t, "n", &k)
		for range k {
			idx, term, err := nn.node.Propose([]byte(d.CmdArgs[1].Key))
			if err != nil {
				fmt.Fprintf(&env.out, "error: %v\n", err)
				break
			}
			if k == 1 {
				fmt.Fprintf(&env.out, "proposed %q at %d/%d\n", d.CmdArgs[1].Key, idx, term)
			} else {
				env.printf(levelDebug, "proposed %q at %d/%d\n", d.CmdArgs[1].Key, idx, term)
			}
		}
		if k > 1 {
			fmt.Fprintf(&env.out, "proposed %q %d times; last index %d\n", d.CmdArgs[1].Key, k, nn.node.Status().LastIndex)
		}
	case "process-ready":
		for _, nn := range env.selected(t, d) {
			env.processReady(nn)
		}
	case "deliver-msgs":
		env.deliver(t, d)
	case "hold":
		match := env.matcher(t, d)
		limit := -1
		d.MaybeScanArgs(t, "n", &limit)
		var keep []Message
		for _, m := range env.inflight {
			if match(m) && limit != 0 {
				limit--
				env.held = append(env.held, m)
				fmt.Fprintf(&env.out, "held %s\n", fmtMsg(m))
			} else {
				keep = append(keep, m)
			}
		}
		env.inflight = keep
	case "release":
		env.inflight = append(env.inflight, env.held...)
		fmt.Fprintf(&env.out, "released %d\n", len(env.held))
		env.held = nil
	case "stabilize":
		nodes := env.selected(t, d)
		for round := 0; ; round++ {
			if round > 1000 {
				t.Fatalf("%s: no quiescence after %d rounds", d.Pos, round)
			}
			busy := false
			for _, nn := range nodes {
				if nn.node != nil && nn.node.HasReady() {
					env.processReady(nn)
					busy = true
				}
			}
			var todo, rest []Message
			for _, m := range env.inflight {
				if in(nodes, m.From) && in(nodes, m.To) {
					todo = append(todo, m)
				} else {
					rest = append(rest, m)
				}
			}
			env.inflight = rest
			for _, m := range todo {
				env.deliverOne(m)
				busy = true
			}
			if !busy {
				break
			}
		}
	case "crash":
		nn := env.get(t, env.posInt(t, d, 0))
		// Whatever the node did not hand out in a Ready (and we did not
		// persist) is gone with the process.
		nn.node = nil
		fmt.Fprintf(&env.out, "%d crashed; persisted %s\n", nn.id, fmtStore(nn.store))
	case "restart":
		nn := env.get(t, env.posInt(t, d, 0))
		if nn.node != nil {
			t.Fatalf("%s: node %d is up; crash it first", d.Pos, nn.id)
		}
		nn.restarts++
		env.start(t, nn)
		fmt.Fprintf(&env.out, "%d restarted from %s\n", nn.id, fmtStore(nn.store))
	case "msgs":
		for _, m := range env.inflight {
			fmt.Fprintf(&env.out, "%s\n", fmtMsg(m))
		}
		for _, m := range env.held {
			fmt.Fprintf(&env.out, "held: %s\n", fmtMsg(m))
		}
	case "status":
		env.printStatus()
	case "raft-log":
		nn := env.get(t, env.posInt(t, d, 0))
		if nn.node != nil {
			fmt.Fprintf(&env.out, "log: %s\n", ixEntries(nn.node.testLog()))
		} else {
			fmt.Fprintf(&env.out, "log: (down)\n")
		}
		fmt.Fprintf(&env.out, "disk: %s\n", fmtStore(nn.store))
	case "snapshot":
		nn := env.get(t, env.posInt(t, d, 0))
		if nn.node == nil {
			t.Fatalf("%s: node %d is down", d.Pos, nn.id)
		}
		index, keep := nn.node.Status().Applied, uint64(0)
		d.MaybeScanArgs(t, "index", &index)
		d.MaybeScanArgs(t, "keep", &keep)
		snap, err := nn.node.CreateSnapshot(index, []byte(fmt.Sprintf("state@%d", index)))
		if err != nil {
			fmt.Fprintf(&env.out, "error: %v\n", err)
			break
		}
		nn.store.persistSnapshot(snap)
		if err := nn.node.Compact(index - min(keep, index)); err != nil {
			fmt.Fprintf(&env.out, "error: %v\n", err)
			break
		}
		fmt.Fprintf(&env.out, "%d snapshot at %d/%d; in-memory log from %d\n", nn.id, snap.Index, snap.Term, nn.node.Status().FirstIndex)
	case "log-level":
		switch v := d.CmdArgs[0].Key; v {
		case "none":
			env.level = levelNone
		case "info":
			env.level = levelInfo
		case "debug":
			env.level = levelDebug
		default:
			t.Fatalf("%s: unknown log level %q", d.Pos, v)
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
}

func (env *interactionEnv) start(t *testing.T, nn *ixNode) {
	ids := make([]ID, len(env.nodes))
	for i, o := range env.nodes {
		ids[i] = o.id
	}
	n, err := New(Config{
		ID:            nn.id,
		Peers:         ids,
		ElectionTick:  testElectionTick,
		HeartbeatTick: testHeartbeatTick,
		Rand:          rand.New(rand.NewPCG(uint64(nn.id), nn.restarts)),
		PreVote:       env.prevote,
		CheckQuorum:   env.checkQ,
		HardState:     nn.store.hs,
		Snapshot:      nn.store.snap,
		Entries:       slices.Clone(nn.store.entries),
	})
	if err != nil {
		t.Fatalf("New(node %d): %v", nn.id, err)
	}
	nn.node = n
	nn.soft = SoftState{Role: Follower, Term: nn.store.hs.Term}
}

// processReady does with one Ready what a careful caller does: persist
// (HardState only when MustSync, so a restart may recall an older commit
// index), send, apply, Advance, checking safety on the way.
func (env *interactionEnv) processReady(nn *ixNode) {
	if nn.node == nil || !nn.node.HasReady() {
		return
	}
	rd := nn.node.Ready()
	if rd.SoftState != nn.soft {
		env.printf(levelInfo, "%d is %v at term %d (lead %d)\n", nn.id, rd.SoftState.Role, rd.SoftState.Term, rd.SoftState.Lead)
		nn.soft = rd.SoftState
		if rd.SoftState.Role == Leader {
			if prev, ok := env.leaders[rd.SoftState.Term]; ok && prev != nn.id {
				fmt.Fprintf(&env.out, "SAFETY VIOLATION: %d and %d both lead term %d\n", prev, nn.id, rd.SoftState.Term)
			}
			env.leaders[rd.SoftState.Term] = nn.id
		}
	}
	env.printf(levelDebug, "%d Ready:", nn.id)
	if rd.MustSync {
		hs := rd.HardState
		env.printf(levelDebug, " persist term=%d vote=%d commit=%d", hs.Term, hs.Vote, hs.Commit)
		old := nn.store.hs
		if hs.Term == old.Term && old.Vote != None && hs.Vote != old.Vote {
			fmt.Fprintf(&env.out, "SAFETY VIOLATION: %d changed its vote in term %d from %d to %d\n", nn.id, hs.Term, old.Vote, hs.Vote)
		}
		nn.store.hs = hs
	}
	if s := rd.Snapshot; !s.IsEmpty() {
		if env.level >= levelDebug {
			env.printf(levelDebug, " snapshot %d/%d (%s)", s.Index, s.Term, s.Data)
		} else {
			env.printf(levelInfo, "%d installs snapshot %d/%d (%s)\n", nn.id, s.Index, s.Term, s.Data)
		}
		if s.Index > uint64(len(env.committed)) || env.committed[s.Index-1].Term != s.Term {
			fmt.Fprintf(&env.out, "SAFETY VIOLATION: %d installs a snapshot at %d/%d that no node applied\n", nn.id, s.Index, s.Term)
		}
		nn.store.snap, nn.store.entries = s, nil // the snapshot replaces the log
	}
	if len(rd.Entries) > 0 {
		env.printf(levelDebug, " entries %s", ixEntries(rd.Entries))
		nn.store.appendEntries(rd.Entries)
	}
	if len(rd.CommittedEntries) > 0 {
		env.printf(levelDebug, " apply %s", ixEntries(rd.CommittedEntries))
	}
	env.printf(levelDebug, "\n")
	for _, m := range rd.Messages {
		env.printf(levelDebug, "  send %s\n", fmtMsg(m))
		m.Entries = slices.Clone(m.Entries)
		env.inflight = append(env.inflight, m)
	}
	var fresh []Entry
	for _, e := range rd.CommittedEntries {
		if e.Index <= uint64(len(env.committed)) {
			if want := env.committed[e.Index-1]; want.Term != e.Term || string(want.Data) != string(e.Data) {
				fmt.Fprintf(&env.out, "SAFETY VIOLATION: %d applies %s at index %d, others applied %s\n",
					nn.id, ixEntry(e), e.Index, ixEntry(want))
			}
			continue
		}
		env.committed = append(env.committed, e)
		fresh = append(fresh, e)
	}
	if len(fresh) > 0 {
		// Printed once, by the first node to apply them.
		env.printf(levelInfo, "%d commits %s\n", nn.id, ixEntries(fresh))
	}
	nn.node.Advance()
}

func (env *interactionEnv) deliverOne(m Message) {
	nn := env.nodes[m.To-1]
	if nn.node == nil {
		env.printf(levelDebug, "  lost (%d is down) %s\n", m.To, fmtMsg(m))
		return
	}
	env.printf(levelDebug, "  deliver %s\n", fmtMsg(m))
	if err := nn.node.Step(m); err != nil {
		fmt.Fprintf(&env.out, "%d rejects %s: %v\n", m.To, fmtMsg(m), err)
	}
}

func (env *interactionEnv) deliver(t *testing.T, d *datadriven.TestData) {
	match := env.matcher(t, d)
	limit := -1
	d.MaybeScanArgs(t, "n", &limit)
	drop, keepCopy := d.HasArg("drop"), d.HasArg("keep")
	var rest, todo []Message
	for _, m := range env.inflight {
		if match(m) && limit != 0 {
			todo = append(todo, m)
			limit--
			if !keepCopy {
				continue
			}
		}
		rest = append(rest, m)
	}
	env.inflight = rest
	if drop {
		// A long burst (a leader's stream of appends) prints its ends.
		for i, m := range todo {
			if len(todo) <= 8 || i < 2 || i == len(todo)-1 {
				fmt.Fprintf(&env.out, "dropped %s\n", fmtMsg(m))
			} else if i == 2 {
				fmt.Fprintf(&env.out, "dropped ... (%d more)\n", len(todo)-3)
			}
		}
		return
	}
	for _, m := range todo {
		// Print deliveries whatever the level: the script chose them.
		lvl := env.level
		env.level = levelDebug
		env.deliverOne(m)
		env.level = lvl
	}
}

func (env *interactionEnv) matcher(t *testing.T, d *datadriven.TestData) func(Message) bool {
	var from, to ID
	var typ string
	if d.HasArg("from") {
		var v uint64
		d.ScanArgs(t, "from", &v)
		from = ID(v)
	}
	if d.HasArg("to") {
		var v uint64
		d.ScanArgs(t, "to", &v)
		to = ID(v)
	}
	d.MaybeScanArgs(t, "type", &typ)
	return func(m Message) bool {
		return (from == None || m.From == from) && (to == None || m.To == to) && (typ == "" || m.Type.String() == typ)
	}
}

func (env *interactionEnv) posInt(t *testing.T, d *datadriven.TestData, i int) int {
	if len(d.CmdArgs) <= i {
		t.Fatalf("%s: %s needs a number as argument %d", d.Pos, d.Cmd, i+1)
	}
	v, err := strconv.Atoi(d.CmdArgs[i].Key)
	if err != nil {
		t.Fatalf("%s: %s: argument %d: %v", d.Pos, d.Cmd, i+1, err)
	}
	return v
}

func (env *interactionEnv) get(t *testing.T, id int) *ixNode {
	if id < 1 || id > len(env.nodes) {
		t.Fatalf("no node %d", id)
	}
	return env.nodes[id-1]
}

// selected returns the nodes named positionally, or all of them.
func (env *interactionEnv) selected(t *testing.T, d *datadriven.TestData) []*ixNode {
	var out []*ixNode
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 {
			continue
		}
		id, err := strconv.Atoi(a.Key)
		if err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
		}
		out = append(out, env.get(t, id))
	}
	if len(out) == 0 {
		return env.nodes
	}
	return out
}

func in(nodes []*ixNode, id ID) bool {
	return slices.ContainsFunc(nodes, func(nn *ixNode) bool { return nn.id == id })
}

func (env *interactionEnv) printStatus() {
	for _, nn := range env.nodes {
		if nn.node == nil {
			fmt.Fprintf(&env.out, "%d: down\n", nn.id)
			continue
		}
		s := nn.node.Status()
		fmt.Fprintf(&env.out, "%d: %v term=%d lead=%d vote=%d commit=%d last=%d\n",
			nn.id, s.Role, s.Term, s.Lead, nn.node.testVote(), s.Commit, s.LastIndex)
	}
}

func ixEntry(e Entry) string {
	if e.Data == nil {
		return fmt.Sprintf("%d/%d", e.Index, e.Term)
	}
	return fmt.Sprintf("%d/%d:%s", e.Index, e.Term, e.Data)
}

func ixEntries(es []Entry) string {
	if len(es) == 0 {
		return "[]"
	}
	if len(es) > 4 {
		// Long runs (a leader catching a peer up) print their ends.
		return fmt.Sprintf("[%s %s .. %s] (%d entries)", ixEntry(es[0]), ixEntry(es[1]), ixEntry(es[len(es)-1]), len(es))
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = ixEntry(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtStore(s memStore) string {
	snap := ""
	if !s.snap.IsEmpty() {
		snap = fmt.Sprintf(" snap=%d/%d", s.snap.Index, s.snap.Term)
	}
	return fmt.Sprintf("term=%d vote=%d commit=%d%s log=%s", s.hs.Term, s.hs.Vote, s.hs.Commit, snap, ixEntries(s.entries))
}

// fmtMsg renders a message with every field a script may care about; it
// does not use Message.String so that the expectations do not change with
// that trace format.
func fmtMsg(m Message) string {
	s := fmt.Sprintf("%d->%d %v term=%d", m.From, m.To, m.Type, m.Term)
	switch m.Type {
	case MsgVote, MsgPreVote:
		s += fmt.Sprintf(" last=%d/%d", m.Index, m.LogTerm)
	case MsgApp:
		s += fmt.Sprintf(" prev=%d/%d commit=%d ents=%s", m.Index, m.LogTerm, m.Commit, ixEntries(m.Entries))
	case MsgAppResp:
		s += fmt.Sprintf(" index=%d", m.Index)
		if m.Reject {
			s += fmt.Sprintf(" hint=%d/%d", m.RejectHint, m.LogTerm)
		}
	case MsgHeartbeat:
		s += fmt.Sprintf(" commit=%d", m.Commit)
	case MsgSnap:
		s += fmt.Sprintf(" snap=%d/%d commit=%d", m.Snapshot.Index, m.Snapshot.Term, m.Commit)
	}
	if m.Reject {
		s += " REJECT"
	}
	return s
}

// testLog and testVote are test-only views of state that Status does not
// report: the whole in-memory log and the vote cast in the current term.
func (n *Node) testLog() []Entry { return n.log.entries }

func (n *Node) testVote() ID { return n.vote }
