package scenarios

import (
	"slices"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/history"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// recorder turns the processes' observations into the checker's history,
// stamping each with the true time and step only the simulator knows: the
// clients' calls and answers through the recorder both worlds share
// (package history), the service's decisions (which only the simulator
// sees) here.
type recorder struct {
	w       *sim.World
	h       checker.History // all but the clients' side
	clients *history.Recorder
	open    map[holdKey]int      // (resource, holder, token) → index in h.Grants while not ended
	decided map[decisionKey]bool // the log entries whose grant or end is recorded
	ops     map[opKey]int        // (client, request) → its store operation's ID
	lockOps map[opKey]int        // (client, request) → its lock operation's ID, until answered
	renewed map[opKey]bool       // (client, request) of every renewal recorded
	ended   map[endKey]bool      // every lease end without a log index recorded
	starts  map[string]int       // node name → how many times it started
	// entryAt maps a log index to 1 + the position of its first record in
	// h.EntryApplies (0: none yet); moreEntries, to the positions of the
	// other entries applied at it (only when replicas disagree).
	entryAt     []int32
	sparseAt    map[uint64]int32 // entryAt for indexes far past its end
	moreEntries map[uint64][]int

	// ids resolves node names (filled by the runner as it adds nodes).
	ids map[string]sim.NodeID
	// syncedDecisions: the design's service nodes sync each decision
	// before reporting it (lockservice.DesignInfo.SyncedDecisions), so a
	// decision, like the store's writes, is a fact only once the reporting
	// node's sync completes. Its events carry that node in Event.Node.
	syncedDecisions bool
	// tentative are records whose decision's slow sync was still in flight
	// when reported; a crash before it completed takes them back.
	tentative []tentative
}

// tentative is a record a crash may still take back.
type tentative struct {
	node string
	done time.Duration // when the sync that makes it durable completes
	undo func()
}

// opKey pairs a client's call with its return.
type opKey struct {
	client  string
	request uint64
}

// holdKey is who holds what by which token: how a lease end finds its
// grant.
type holdKey struct {
	resource, client string
	token            uint64
}

// decisionKey identifies a replicated service's grant or lease end by the
// log entry that decided it, which every replica reports once it applies
// it: its reports are one decision, while one token issued by two entries
// makes two grants, which S1 judges.
type decisionKey struct {
	index uint64
	kind  lockservice.EventKind
}

// endKey identifies a lease end of a service without a log.
type endKey struct {
	holdKey
	reason string
}

func newRecorder(w *sim.World, ids map[string]sim.NodeID, syncedDecisions bool) *recorder {
	return &recorder{w: w, clients: history.New(), ids: ids, syncedDecisions: syncedDecisions, open: map[holdKey]int{}, decided: map[decisionKey]bool{}, ops: map[opKey]int{},
		lockOps: map[opKey]int{}, renewed: map[opKey]bool{}, ended: map[endKey]bool{},
		starts: map[string]int{}}
}

// NodeStarted records that the process of node name is starting: its boot,
// or a restart after a crash. The runner calls it from the process
// constructor it hands to sim.World.AddNode, which the world calls at the
// node's boot and at every restart, at the instant of the (re)start. A
// restart of the store is recorded for S5; a restarted client no longer
// believes it holds anything (its belief ended at the crash, which the
// recorder cannot see, so the restart instant bounds it from above).
func (r *recorder) NodeStarted(name string) {
	r.starts[name]++
	if r.starts[name] == 1 {
		return // the boot
	}
	r.takeBack(name)
	if name == storeNode {
		r.h.StoreRestarts = append(r.h.StoreRestarts, checker.StoreRestart{At: r.w.Now(), Step: r.w.Step()})
	}
	r.clients.EndBeliefs(name, "restarted", r.w.Now())
}

// Observe records one event. Service-side events are reported by every
// replica that applies the entry; the first report is the instant the
// service decided, later ones are ignored (an event's log index tells them
// from another decision with the same token).
func (r *recorder) Observe(e lockservice.Event) {
	switch e.Kind {
	case lockservice.EvGranted:
		r.granted(e)
	case lockservice.EvRenewed:
		k := opKey{e.Client, e.Request}
		if r.renewed[k] {
			return
		}
		r.renewed[k] = true
		history.Push(&r.h.Renewals, checker.Renewal{Resource: e.Resource, Client: e.Client, Token: e.Token,
			Request: e.Request, At: r.w.Now(), Step: r.w.Step()})
	case lockservice.EvEnded:
		hold := holdKey{e.Resource, e.Client, e.Token}
		if !r.decide(e) {
			return // another replica's report: the first closed the grant
		}
		if k := (endKey{hold, e.Reason}); e.Index != 0 || !r.ended[k] {
			if e.Index == 0 {
				r.ended[k] = true
			}
			j := history.Push(&r.h.Ends, checker.GrantEnd{Resource: e.Resource, Client: e.Client, Token: e.Token,
				Reason: e.Reason, At: r.w.Now(), Step: r.w.Step()})
			if done, ok := r.lockSyncing(e); ok {
				r.pending(e.Node, done, func() { r.h.Ends[j].Lost = true; delete(r.ended, k) })
			}
		}
		i, ok := r.open[hold]
		if !ok {
			return
		}
		delete(r.open, hold)
		r.h.Grants[i].Open = false
		r.h.Grants[i].End = r.w.Now()
		r.h.Grants[i].Reason = e.Reason
		if done, ok := r.lockSyncing(e); ok {
			r.pending(e.Node, done, func() { // the restarted server still holds the lease
				if !r.h.Grants[i].Lost {
					r.h.Grants[i].Open, r.h.Grants[i].End, r.h.Grants[i].Reason = true, 0, ""
					r.open[hold] = i
				}
			})
		}
	case lockservice.EvApplied:
		i := history.Push(&r.h.Applies, checker.StoreApply{Resource: e.Resource, Client: e.Client, Token: e.Token,
			Value: e.Value, Accepted: e.Accepted, At: r.w.Now(), Step: r.w.Step()})
		if done, ok := r.syncing(storeNode); ok {
			r.pending(storeNode, done, func() { r.h.Applies[i].Lost = true })
		}
	case lockservice.EvCall:
		switch e.Op {
		case lockservice.OpWrite:
			r.storeCall(e, checker.StoreOp{Kind: checker.OpWrite, Token: e.Token, Value: e.Value})
		case lockservice.OpRead:
			r.storeCall(e, checker.StoreOp{Kind: checker.OpRead})
		case lockservice.OpAcquire:
			r.lockCall(e, checker.LockAcquire)
		case lockservice.OpRenew:
			r.lockCall(e, checker.LockRenew)
		case lockservice.OpRelease:
			r.lockCall(e, checker.LockRelease)
		}
	case lockservice.EvReturn:
		switch e.Op {
		case lockservice.OpWrite, lockservice.OpRead:
			r.storeReturn(e)
		case lockservice.OpAcquire, lockservice.OpRenew, lockservice.OpRelease:
			r.lockReturn(e)
		}
	case lockservice.EvEntryApplied:
		r.entryApplied(e)
	case lockservice.EvElected:
		// Every report: a replica reports each term it wins once, so a
		// second report of a term is a restart that led it again (S9).
		history.Push(&r.h.Elections, checker.Election{Node: e.Node, Term: e.Term, At: r.w.Now(), Step: r.w.Step()})
	case lockservice.EvBeliefEnd:
		r.clients.EndBelief(e.Client, e.Token, e.Reason, r.w.Now())
	}
}

// decide reports whether e is the first report of its decision: always for
// a service without a log (its nodes report each decision once), else the
// first report of its entry's grant or end.
func (r *recorder) decide(e lockservice.Event) bool {
	if e.Index == 0 {
		return true
	}
	k := decisionKey{e.Index, e.Kind}
	if r.decided[k] {
		return false
	}
	r.decided[k] = true
	return true
}

// granted records a grant unless it is one already recorded: the same
// entry reported by another replica, or — for a service without a log — a
// report of a grant still open with the same resource, holder and token.
func (r *recorder) granted(e lockservice.Event) {
	hold := holdKey{e.Resource, e.Client, e.Token}
	if _, open := r.open[hold]; open && e.Index == 0 || !r.decide(e) {
		return
	}
	i := history.Push(&r.h.Grants, checker.Grant{Resource: e.Resource, Client: e.Client, Token: e.Token,
		Request: e.Request, Key: e.RequestID, Start: r.w.Now(), Open: true, Step: r.w.Step()})
	r.open[hold] = i
	// A new grant with an old token: its ends are new too.
	delete(r.ended, endKey{hold, checker.EndReleased})
	delete(r.ended, endKey{hold, checker.EndExpired})
	if done, ok := r.lockSyncing(e); ok {
		r.pending(e.Node, done, func() {
			r.h.Grants[i].Lost = true // the restarted server may issue its token again
			if r.open[hold] == i {
				delete(r.open, hold)
			}
		})
	}
}

// entryApplied records an entry a replica applied, unless one of the
// entries recorded at its index is the same: another replica's apply of
// it, or a restarted replica's replay of its log (which starts again from
// the first index). A different entry at the index is recorded for S10 to
// judge.
func (r *recorder) entryApplied(e lockservice.Event) {
	same := func(i int) bool { a := &r.h.EntryApplies[i]; return a.Term == e.Term && a.Command == e.Digest }
	if first := r.firstEntry(e.Index); first != 0 {
		if same(int(first) - 1) {
			return
		}
		if slices.ContainsFunc(r.moreEntries[e.Index], same) {
			return
		}
	}
	i := history.Push(&r.h.EntryApplies, checker.EntryApply{Node: e.Node, Index: e.Index, Term: e.Term, Command: e.Digest,
		At: r.w.Now(), Step: r.w.Step()})
	if r.firstEntry(e.Index) == 0 {
		r.setFirstEntry(e.Index, int32(i+1))
		return
	}
	if r.moreEntries == nil {
		r.moreEntries = map[uint64][]int{}
	}
	r.moreEntries[e.Index] = append(r.moreEntries[e.Index], i)
}

// denseSlack is how far past the dense table's end an index may land and
// still grow it: a log's indexes come one after another, but a design may
// start its log (and so its tokens) anywhere, up to 2^64−1, and a table
// sized by the index itself would then take the machine's memory.
const denseSlack = 1 << 16

// firstEntry is 1 + the position of the first record at index (0: none).
func (r *recorder) firstEntry(index uint64) int32 {
	if index < uint64(len(r.entryAt)) {
		return r.entryAt[index]
	}
	return r.sparseAt[index]
}

// setFirstEntry records the first record at index: in the dense table when
// the index is near its end, else in a map.
func (r *recorder) setFirstEntry(index uint64, pos int32) {
	if index < uint64(len(r.entryAt))+denseSlack {
		for index >= uint64(len(r.entryAt)) {
			history.Push(&r.entryAt, 0)
		}
		r.entryAt[index] = pos
		return
	}
	if r.sparseAt == nil {
		r.sparseAt = map[uint64]int32{}
	}
	r.sparseAt[index] = pos
}

// syncing returns when node's slow sync in flight completes, if one is in
// flight: the processes report a decision right after syncing it, so a
// record made now is a fact only then (see pending).
func (r *recorder) syncing(node string) (done time.Duration, ok bool) {
	id, known := r.ids[node]
	if !known {
		return 0, false
	}
	return r.w.Disk(id).SyncDone()
}

// lockSyncing is syncing(e.Node) for a design with synced decisions, whose
// node's decisions are facts only once synced; a replicated service's are
// facts once committed.
func (r *recorder) lockSyncing(e lockservice.Event) (done time.Duration, ok bool) {
	if !r.syncedDecisions || e.Node == "" {
		return 0, false
	}
	return r.syncing(e.Node)
}

// pending notes that the record just made on node's behalf is a fact only
// once node's slow sync in flight completes, at done (from syncing, which
// the caller asks first, so that it builds undo only when one is in
// flight).
func (r *recorder) pending(node string, done time.Duration, undo func()) {
	r.tentative = append(r.tentative, tentative{node: node, done: done, undo: undo})
}

// takeBack undoes, at node's restart, the records whose sync its crash
// interrupted, latest first.
func (r *recorder) takeBack(node string) {
	id, known := r.ids[node]
	if !known {
		return
	}
	crashedAt, _ := r.w.CrashedAt(id)
	keep := r.tentative[:0]
	var undo []func()
	for _, t := range r.tentative {
		switch {
		case t.node != node:
			keep = append(keep, t)
		case t.done > crashedAt:
			undo = append(undo, t.undo)
		}
	}
	r.tentative = keep
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}

// storeCall records a store operation as unknown until its answer.
func (r *recorder) storeCall(e lockservice.Event, op checker.StoreOp) {
	r.ops[opKey{e.Client, e.Request}] = r.clients.StoreCall(e.Client, e.Resource, op, r.w.Now())
}

func (r *recorder) storeReturn(e lockservice.Event) {
	if i, ok := r.ops[opKey{e.Client, e.Request}]; ok {
		r.clients.StoreReturn(i, e.Accepted, e.Value, e.Token, r.w.Now())
	}
}

// lockCall records a lock operation as unknown until its answer arrives. A
// renew or release carries the token it sends.
func (r *recorder) lockCall(e lockservice.Event, kind checker.LockKind) {
	r.lockOps[opKey{e.Client, e.Request}] = r.clients.LockCall(e.Client, e.Resource, kind, e.Request, e.Token, r.w.Now())
}

// lockReturn records the first answer to a lock operation; a granted acquire
// starts the client's belief that it holds the lock.
func (r *recorder) lockReturn(e lockservice.Event) {
	k := opKey{e.Client, e.Request}
	i, ok := r.lockOps[k]
	if !ok {
		return
	}
	// Answered for good: a later copy of the answer changes nothing, so
	// the key can go (the map stays as small as the calls in flight).
	delete(r.lockOps, k)
	r.clients.LockReturn(i, checker.LockStatus(e.Status.String()), e.Token, r.w.Now())
}

// history returns the history as of the end of the run: operations still
// without a reply stay unknown, grants still held and beliefs still held
// stay open.
func (r *recorder) history() checker.History {
	h := r.h
	r.clients.Fill(&h)
	h.End = r.w.Now()
	return h
}
