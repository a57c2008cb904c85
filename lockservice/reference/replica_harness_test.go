package reference

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/sim"
)

// Helpers for tests of the replicated lock service: a Raft group of
// Replicas in a sim.World (replicas first, so their NodeIDs are 0..n-1),
// probes, clients and a store added after them, and readers for what the
// replicas persisted.

// fixedLatency is a network on which every message takes exactly d, so
// that the tests can compute commit and reply instants exactly: a proposal
// commits 2d after it is made (one append and one acknowledgement).
func fixedLatency(d time.Duration) sim.NetworkConfig {
	return sim.NetworkConfig{Latency: sim.Latency{Shape: sim.Uniform, Min: d, Max: d}}
}

// replicaGroup is n replicas in a world, with the recorder every replica
// (and every client added through it) reports to.
type replicaGroup struct {
	w     *sim.World
	rec   *replicaRecorder
	trace *bytes.Buffer // nil unless asked for
	ids   []sim.NodeID  // the replicas: 0..n-1
	// leaders remembers, per term, the first replica seen leading it, so
	// that every sample checks Election Safety (one leader per term).
	leaders map[uint64]sim.NodeID
}

type groupOpts struct {
	seed  uint64
	net   sim.NetworkConfig
	trace bool
	clock fakeclock.Config
	edit  func(*ReplicaConfig) // changes DefaultReplicaConfig
}

func newReplicaGroup(t *testing.T, n int, o groupOpts) *replicaGroup {
	t.Helper()
	g := &replicaGroup{leaders: map[uint64]sim.NodeID{}}
	cfg := sim.Config{Seed: o.seed, Network: o.net}
	if o.trace {
		g.trace = &bytes.Buffer{}
		cfg.Trace = g.trace
	}
	w, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.w = w
	g.rec = &replicaRecorder{Recorder: simtest.NewRecorder(w)}
	for i := range n {
		g.ids = append(g.ids, sim.NodeID(i))
	}
	rc := DefaultReplicaConfig(g.ids)
	rc.Observer = g.rec
	if o.edit != nil {
		o.edit(&rc)
	}
	for i := range n {
		id := simtest.AddNode(t, w, fmt.Sprintf("r%d", i), func() sim.Process { return NewReplica(rc) }, o.clock)
		if id != sim.NodeID(i) {
			t.Fatalf("replica %d got node id %d; replicas must be added first", i, id)
		}
	}
	return g
}

// replica returns the replica process on id, or nil while it is crashed.
func (g *replicaGroup) replica(id sim.NodeID) *Replica {
	r, _ := g.w.Process(id).(*Replica)
	return r
}

// believers returns the replicas that believe they lead, with their terms.
func (g *replicaGroup) believers() map[sim.NodeID]uint64 {
	out := map[sim.NodeID]uint64{}
	for _, id := range g.ids {
		if r := g.replica(id); r != nil {
			if lead, term := r.IsLeader(); lead {
				out[id] = term
			}
		}
	}
	return out
}

// sample checks Election Safety now: no two replicas lead the same term.
func (g *replicaGroup) sample(t *testing.T) {
	t.Helper()
	for _, id := range g.ids { // in id order, so a failure reads the same every run
		r := g.replica(id)
		if r == nil {
			continue
		}
		lead, term := r.IsLeader()
		if !lead {
			continue
		}
		if prev, ok := g.leaders[term]; ok && prev != id {
			t.Fatalf("%v: replicas %d and %d both lead term %d", g.w.Now(), prev, id, term)
		}
		g.leaders[term] = id
	}
}

// runTo runs the world until true time until, sampling Election Safety
// every millisecond.
func (g *replicaGroup) runTo(t *testing.T, until time.Duration) {
	t.Helper()
	for g.w.Now() < until {
		next := min(until, g.w.Now()+time.Millisecond)
		switch out := g.w.Run(next, 5_000_000); out {
		case sim.StepLimit:
			t.Fatalf("step limit at %v", g.w.Now())
		case sim.Exhausted: // a runaway: it would never get past now
			t.Fatalf("%v", g.w.Cut())
		case sim.Quiescent:
			return // nothing left to happen (every node crashed)
		}
		g.sample(t)
	}
}

// awaitLeader runs until exactly one replica of among leads, in a term of
// at least minTerm, and no other replica believes it leads a term as high;
// it fails the test if that takes beyond deadline.
func (g *replicaGroup) awaitLeader(t *testing.T, among []sim.NodeID, minTerm uint64, deadline time.Duration) (sim.NodeID, uint64) {
	t.Helper()
	for {
		if id, term, ok := g.soleLeader(among, minTerm); ok {
			return id, term
		}
		if g.w.Now() >= deadline {
			t.Fatalf("no single leader among %v (term ≥ %d) by %v; believers %v", among, minTerm, deadline, g.believers())
		}
		g.runTo(t, g.w.Now()+time.Millisecond)
	}
}

func (g *replicaGroup) soleLeader(among []sim.NodeID, minTerm uint64) (sim.NodeID, uint64, bool) {
	var found []sim.NodeID
	var term uint64
	for id, tm := range g.believers() { //detlint:sorted (test: at most one is accepted)
		if tm >= minTerm {
			found = append(found, id)
			term = tm
		}
	}
	if len(found) != 1 {
		return 0, 0, false
	}
	for _, id := range among {
		if id == found[0] {
			return id, term, true
		}
	}
	return 0, 0, false
}

// others returns the replicas other than ids.
func (g *replicaGroup) others(ids ...sim.NodeID) []sim.NodeID {
	var out []sim.NodeID
outer:
	for _, r := range g.ids {
		for _, x := range ids {
			if r == x {
				continue outer
			}
		}
		out = append(out, r)
	}
	return out
}

// isolate blocks every link between node and every other node of the
// world, both ways, except those to keep.
func (g *replicaGroup) isolate(node sim.NodeID, keep ...sim.NodeID) {
outer:
	for i := range g.w.Nodes() {
		other := sim.NodeID(i)
		if other == node {
			continue
		}
		for _, k := range keep {
			if k == other {
				continue outer
			}
		}
		g.w.Block(node, other)
		g.w.Block(other, node)
	}
}

// --- what the replicas persisted ---

// diskEntries decodes the Raft log a node persisted (including what it has
// written but not yet synced: Disk.Read sees the page cache).
func diskEntries(t *testing.T, d *sim.Disk) []raft.Entry {
	t.Helper()
	entries, _ := diskRecords(t, d)
	return entries
}

// diskRecords walks every segment of a persisted log and returns its
// entries with their sealed bytes, failing on anything torn, corrupt or
// out of place.
func diskRecords(t *testing.T, d *sim.Disk) ([]raft.Entry, [][]byte) {
	t.Helper()
	var entries []raft.Entry
	var raws [][]byte
	for _, k := range d.Keys(logKeyPrefix) {
		raw, _ := d.Read(k)
		for len(raw) > 0 {
			v, rest, ok := nextRecord(raw)
			if !ok {
				t.Fatalf("torn or corrupt log record in %s after %d entries", k, len(entries))
			}
			e, err := decodeEntry(v)
			if err != nil {
				t.Fatalf("corrupt log entry in %s: %v", k, err)
			}
			if want := uint64(len(entries)) + 1; e.Index != want || k != logKey(segmentFirst(e.Index, segmentEntries)) {
				t.Fatalf("log entry %+v stored in segment %s, want index %d", e, k, want)
			}
			entries = append(entries, e)
			raws = append(raws, raw[:len(raw)-len(rest)])
			raw = rest
		}
	}
	return entries, raws
}

// diskLogBytes returns the persisted log as index=sealed-bytes lines, for
// exact comparison between replicas.
func diskLogBytes(d *sim.Disk) []string {
	var out []string
	for _, k := range d.Keys(logKeyPrefix) {
		raw, _ := d.Read(k)
		for len(raw) > 0 {
			_, rest, ok := nextRecord(raw)
			if !ok {
				out = append(out, "torn="+string(raw))
				break
			}
			out = append(out, fmt.Sprintf("%d=%s", len(out)+1, raw[:len(raw)-len(rest)]))
			raw = rest
		}
	}
	return out
}

func diskHardState(t *testing.T, d *sim.Disk) raft.HardState {
	t.Helper()
	var hs raft.HardState
	slots := record.Slotted{Key: hardStateKey}
	if b, ok := slots.Load(d); ok {
		var err error
		if hs, err = decodeHardState(b); err != nil {
			t.Fatalf("corrupt hard state: %v", err)
		}
	}
	return hs
}

// loggedCommand is one command of a persisted log, with its place.
type loggedCommand struct {
	Command
	index, term uint64
}

// diskCommands returns the commands (not the leaders' empty entries) of a
// persisted log.
func diskCommands(t *testing.T, d *sim.Disk) []loggedCommand {
	t.Helper()
	var out []loggedCommand
	for _, e := range diskEntries(t, d) {
		if e.Data == nil {
			continue
		}
		c, err := decodeCommand(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, loggedCommand{c, e.Index, e.Term})
	}
	return out
}

// commandAt returns the command at index of a persisted log.
func commandAt(t *testing.T, d *sim.Disk, index uint64) (Command, bool) {
	t.Helper()
	for _, c := range diskCommands(t, d) {
		if c.index == index {
			return c.Command, true
		}
	}
	return Command{}, false
}

// --- observations ---

// replicaRecorder is the test recorder plus what it leaves out: the lock
// calls' returns at the clients and the replicas' renewals.
type replicaRecorder struct {
	*simtest.Recorder
	returns []lockReturn
	renewed []simtest.ObsCall
}

type lockReturn struct {
	at      time.Duration
	op      lockservice.Op
	client  string
	request uint64
	status  lockservice.Status
	token   uint64
}

func (r *replicaRecorder) Observe(e lockservice.Event) {
	r.Recorder.Observe(e)
	switch {
	case e.Kind == lockservice.EvReturn && (e.Op == lockservice.OpAcquire || e.Op == lockservice.OpRenew || e.Op == lockservice.OpRelease):
		r.returns = append(r.returns, lockReturn{at: r.W.Now(), op: e.Op, client: e.Client, request: e.Request, status: e.Status, token: e.Token})
	case e.Kind == lockservice.EvRenewed:
		r.renewed = append(r.renewed, simtest.ObsCall{At: r.W.Now(), Kind: "renewed", Resource: e.Resource, Client: e.Client, Token: e.Token, Id: int(e.Request)})
	}
}

// service returns the service's decisions as the checker sees them: every
// replica reports a grant or an end when it applies the entry (and again
// when it replays its log after a restart), so only the first report of
// each token counts — the instant the service decided. Store decisions are
// kept as they are.
func (r *replicaRecorder) service() []simtest.ObsCall {
	granted, ended := map[uint64]bool{}, map[uint64]bool{}
	var out []simtest.ObsCall
	for _, c := range r.Calls {
		switch c.Kind {
		case "granted":
			if granted[c.Token] {
				continue
			}
			granted[c.Token] = true
		case "ended":
			if ended[c.Token] {
				continue
			}
			ended[c.Token] = true
		case "applied":
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// grants returns the first report of every grant, in order.
func (r *replicaRecorder) grants() []simtest.ObsCall {
	var out []simtest.ObsCall
	for _, c := range r.service() {
		if c.Kind == "granted" {
			out = append(out, c)
		}
	}
	return out
}

// ended returns the first report of the end of token, if any.
func (r *replicaRecorder) ended(token uint64) (simtest.ObsCall, bool) {
	for _, c := range r.service() {
		if c.Kind == "ended" && c.Token == token {
			return c, true
		}
	}
	return simtest.ObsCall{}, false
}

// checkGrantOrder is simtest.CheckGrantOrder for the replicated service:
// unlike the workload's check it allows grants still open at the end of
// the run.
func checkGrantOrder(t *testing.T, calls []simtest.ObsCall) (grants int) {
	t.Helper()
	grants, _, _ = simtest.CheckGrantOrder(t, calls)
	return grants
}

// granting returns the acquire an entry's command applies: its own, or
// the one a release hands the lock to (Command.Next).
func granting(c Command) (Command, bool) {
	if c.Kind == CmdAcquire {
		return c, true
	}
	return c.next()
}

// checkGrantsFromDistinctRequests maps every granted token to the entry
// that granted it — the token is its log index — and checks that the entry
// is an acquire by the grantee of that resource, or an end handing the
// resource to it, and that no (client, request) was granted twice.
func checkGrantsFromDistinctRequests(t *testing.T, grants []simtest.ObsCall, d *sim.Disk) {
	t.Helper()
	by := map[simtest.OpKey]uint64{}
	for _, g := range grants {
		c, ok := commandAt(t, d, g.Token)
		if ok {
			c, ok = granting(c)
		}
		if !ok || c.Client != g.Client || c.Resource != g.Resource {
			t.Errorf("token %d granted %s to %s, but the log holds %+v (found %v) at index %d", g.Token, g.Resource, g.Client, c, ok, g.Token)
			continue
		}
		k := simtest.OpKey{Client: c.Client, Request: c.Request}
		if prev, dup := by[k]; dup {
			t.Errorf("request %d of %s was granted twice: tokens %d and %d", c.Request, c.Client, prev, g.Token)
		}
		by[k] = g.Token
	}
}

// checkTablesAgree checks that every live replica applied the same table
// (leases, last token and dedup replies) and returns the first's.
func (g *replicaGroup) checkTablesAgree(t *testing.T) Snapshot {
	t.Helper()
	var first Snapshot
	var from sim.NodeID = -1
	for _, id := range g.ids {
		r := g.replica(id)
		if r == nil {
			continue
		}
		s := r.Table().Snapshot()
		if from < 0 {
			first, from = s, id
			continue
		}
		if !reflect.DeepEqual(s, first) {
			t.Errorf("replica %d's table differs from replica %d's:\n%+v\nvs\n%+v", id, from, s.Leases, first.Leases)
		}
	}
	return first
}

// logsSince returns the trace's slog records named msg from node at or
// after from.
func (g *replicaGroup) logsSince(t *testing.T, node, msg string, from time.Duration) []simtest.LogLine {
	t.Helper()
	var out []simtest.LogLine
	for _, l := range simtest.ParseLogs(t, g.trace.String()) {
		if l.Node == node && l.Msg == msg && l.At >= from {
			out = append(out, l)
		}
	}
	return out
}

func hasWarnings(trace *bytes.Buffer) bool {
	return trace != nil && strings.Contains(trace.String(), "level=WARN")
}
