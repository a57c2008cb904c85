package checker

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/anishathalye/porcupine"
)

// typedOp is one operation of a partition as the linearizability search
// sees it: typed, with its interval and the ops it must follow. Only a
// report's view boxes it into a porcupine.Operation.
type typedOp[I, O any] struct {
	In  I
	Out O
	// Call and Return are true times. An open op (no answer, or an
	// ambiguous one) may take effect at any time after its call: its
	// Return is math.MaxInt64 and it precedes nothing.
	Call, Return int64
	Open         bool
	// After lists the ops (indices in the partition) of the same client
	// that returned at the very instant this op was called. A client's ops
	// are sequential, so this op comes after them, although real time
	// alone (an op precedes another iff it returned strictly before the
	// other's call) would leave them concurrent: the recorder stamps a
	// client's next call at the instant its previous op returned.
	After  []int32
	Client int // porcupine's ClientId
}

// precedes reports whether op a must be linearized before op b: a returned
// strictly before b was called, or a is one of b's own client's ops that
// returned at the instant b was called.
func precedes[I, O any](ops []typedOp[I, O], a, b int) bool {
	return !ops[a].Open && ops[a].Return < ops[b].Call || slices.Contains(ops[b].After, int32(a))
}

// partition is the operations of one resource, typed, with the indices
// of the history's records they came from (at the same indices): the
// records themselves are only read to describe a violation or to box ops
// for porcupine, so they are not copied.
type partition[I, O, S any] struct {
	resource string
	typed    []typedOp[I, O]
	at       []int32 // typed[i] came from records[at[i]]
	records  []S
	describe func(*S) opRecord     // by pointer: records are large, and this runs per record
	boxed    []porcupine.Operation // made by ops, when porcupine is needed
	exact    bool                  // set by ops: porcupine's encoding orders ops exactly as precedes does
}

// src is the history record typed[i] came from.
func (p *partition[I, O, S]) src(i int) S { return p.records[p.at[i]] }

// ops returns the partition in porcupine's encoding (see porcupineTimes).
func (p *partition[I, O, S]) ops() []porcupine.Operation {
	if p.boxed == nil {
		var calls, rets []int64
		calls, rets, p.exact = porcupineTimes(p.typed)
		p.boxed = make([]porcupine.Operation, len(p.typed))
		for i, op := range p.typed {
			r := p.describe(&p.records[p.at[i]])
			p.boxed[i] = porcupine.Operation{ClientId: op.Client, Input: op.In, Call: calls[i], Output: op.Out, Return: rets[i],
				Metadata: opMetadata{ID: r.id, Client: r.client}}
		}
	}
	return p.boxed
}

// porcupineTimes re-times ops for porcupine, whose only order is real time
// with ties concurrent, so that it sees the program order of precedes as
// closely as integers allow. Every instant t becomes three, 3t..3t+2: calls
// at 3t, returns at 3t+1, except that a return some op comes After moves to
// 3t and that op's call to 3t+1. One such pair at an instant is exact. Two
// pairs of different clients at one instant (a returns and a' is called, b
// returns and b' is called) form a partial order that no intervals
// represent — a before a', b before b', a' concurrent with b, b' with a —
// and porcupine then also orders a before b' and b before a': stricter
// than the search, which uses precedes itself. exact says whether that
// happened (or an op is both a pair's successor and, at its own instant, a
// pair's predecessor). Open ops return after every other event.
func porcupineTimes[I, O any](ops []typedOp[I, O]) (calls, rets []int64, exact bool) {
	n := len(ops)
	calls, rets = make([]int64, n), make([]int64, n)
	isPred := make([]bool, n)
	// The pairs at each instant: ops come sorted by call (see
	// encodePartitions), so one instant's pairs are counted in one run
	// of ops; a map from instant to count was most of this function's
	// time. Unsorted ops (built by hand) fall back to the map.
	exact = true
	sorted := true
	var pairs map[int64]int
	var runAt int64
	runPairs := 0
	var last int64
	for i, op := range ops {
		last = max(last, op.Call)
		if !op.Open {
			last = max(last, op.Return)
		}
		for _, j := range op.After {
			isPred[j] = true
		}
		if i > 0 && op.Call < ops[i-1].Call {
			sorted = false
		}
		if len(op.After) == 0 {
			continue
		}
		if runPairs > 0 && op.Call != runAt {
			exact = exact && runPairs == 1
			runPairs = 0
		}
		runAt = op.Call
		runPairs += len(op.After)
	}
	exact = exact && runPairs <= 1
	if !sorted {
		pairs = make(map[int64]int) // instant → pairs at it
		for _, op := range ops {
			if len(op.After) > 0 {
				pairs[op.Call] += len(op.After)
			}
		}
		exact = true
		for _, k := range pairs {
			exact = exact && k == 1
		}
	}
	for i, op := range ops {
		calls[i] = 3 * op.Call
		if len(op.After) > 0 {
			calls[i]++
		}
		switch {
		case op.Open:
			rets[i] = 3*last + 3
		case isPred[i]:
			rets[i] = 3 * op.Return
		default:
			rets[i] = 3*op.Return + 1
		}
		if rets[i] < calls[i] { // a pair's successor that returned at once and is itself a predecessor
			rets[i], exact = calls[i], false
		}
	}
	return calls, rets, exact
}

// carvePartitions makes one partition per resource (counts[k] ops for
// resource names[k]), every partition's slices cut from one allocation at
// their exact sizes.
func carvePartitions[I, O, S any](names []string, counts []int, total int, records []S, describe func(*S) opRecord) []partition[I, O, S] {
	parts := make([]partition[I, O, S], len(names))
	allOps := make([]typedOp[I, O], 0, total)
	allAt := make([]int32, 0, total)
	off := 0
	for i, r := range names {
		n := counts[i]
		parts[i] = partition[I, O, S]{resource: r, typed: allOps[off : off : off+n], at: allAt[off : off : off+n], records: records, describe: describe}
		off += n
	}
	return parts
}

// opRecord is what partitioning needs to know of one history record.
type opRecord struct {
	resource, client string
	id               int
	call, ret        time.Duration
	skip             bool // constrains nothing: left out of the partitions
	open             bool // may take effect at any later time: an open return
}

// encodePartitions turns a history's records into one partition per
// resource, in ascending resource order, each sorted by call time then ID
// so that the encoding does not depend on input order. An open record gets
// Return math.MaxInt64; a record whose return precedes its call returns
// when called. Each op's After holds the ops of its own client, in its
// partition, that returned at the instant it was called (see typedOp).
func encodePartitions[I, O, S any](records []S, describe func(*S) opRecord, encode func(*S) (I, O)) []partition[I, O, S] {
	// Resources and clients are numbered in first-seen order here (one
	// map look-up per record), then renumbered in name order below, so
	// that the encoding does not depend on input order. A record is
	// described twice (here and when encoded) rather than kept described:
	// describing is cheap, and a second array of records was not.
	res, cli := make([]int32, len(records)), make([]int32, len(records))
	var resNums, cliNums numbering
	var counts []int
	encoded := 0
	sorted := true
	var prev opRecord
	for i := range records {
		r := describe(&records[i])
		if i > 0 && (r.call < prev.call || r.call == prev.call && r.id < prev.id) {
			sorted = false
		}
		prev = r
		cli[i], res[i] = cliNums.of(r.client), -1
		if r.skip {
			continue
		}
		k := resNums.of(r.resource)
		if int(k) == len(counts) {
			counts = append(counts, 0)
		}
		res[i] = k
		counts[k]++
		encoded++
	}
	// The order to encode in: by call, then ID. Recorded histories are
	// in that order already.
	var order []int32
	if !sorted {
		order = make([]int32, len(records))
		calls, ids := make([]time.Duration, len(records)), make([]int, len(records))
		for i := range records {
			r := describe(&records[i])
			order[i], calls[i], ids[i] = int32(i), r.call, r.id
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			return cmp.Or(cmp.Compare(calls[a], calls[b]), cmp.Compare(ids[a], ids[b]))
		})
	}
	cliRank := nameRanks(cliNums.names)
	resRank := nameRanks(resNums.names)
	names, sortedCounts := make([]string, len(resRank)), make([]int, len(resRank))
	for k, r := range resRank {
		names[r], sortedCounts[r] = resNums.names[k], counts[k]
	}

	parts := carvePartitions[I, O](names, sortedCounts, encoded, records, describe)
	for n := range records {
		k := int32(n)
		if order != nil {
			k = order[n]
		}
		if res[k] < 0 {
			continue
		}
		r := describe(&records[k])
		ret := int64(max(r.ret, r.call))
		if r.open {
			ret = math.MaxInt64
		}
		in, out := encode(&records[k])
		p := &parts[resRank[res[k]]]
		p.typed = append(p.typed, typedOp[I, O]{Client: int(cliRank[cli[k]]), In: in, Call: int64(r.call), Out: out,
			Return: ret, Open: r.open})
		p.at = append(p.at, k)
	}
	for i := range parts {
		linkProgramOrder(parts[i].typed)
	}
	return parts
}

// numbering numbers names in first-seen order. A history names a few
// resources and clients, each once per record: up to numberingScan names
// are found by comparing (a recorder's names share their bytes, so most
// comparisons end at the pointer), and only past that by hashing — the
// two map look-ups per record were two fifths of encoding's own time.
type numbering struct {
	names []string
	idx   map[string]int32 // once there are more than numberingScan names
}

const numberingScan = 16

// lookup returns name's number, if it has one.
func (n *numbering) lookup(name string) (int32, bool) {
	if n.idx != nil {
		i, ok := n.idx[name]
		return i, ok
	}
	// First by identity: a recorder's names share their bytes, so this
	// finds nearly every name without comparing bytes ("c1" and "c2" are
	// as long as each other: telling them apart reads them).
	for i, s := range n.names {
		if len(s) == len(name) && unsafe.StringData(s) == unsafe.StringData(name) {
			return int32(i), true
		}
	}
	for i, s := range n.names {
		if s == name {
			return int32(i), true
		}
	}
	return -1, false
}

// of returns name's number, numbering it if it is new.
func (n *numbering) of(name string) int32 {
	if i, ok := n.lookup(name); ok {
		return i
	}
	if n.idx == nil {
		if len(n.names) < numberingScan {
			n.names = append(n.names, name)
			return int32(len(n.names) - 1)
		}
		n.idx = make(map[string]int32, 2*numberingScan)
		for i, s := range n.names {
			n.idx[s] = int32(i)
		}
	}
	n.idx[name] = int32(len(n.names))
	n.names = append(n.names, name)
	return int32(len(n.names) - 1)
}

// nameRanks returns each name's position in ascending name order.
func nameRanks(names []string) []int32 {
	idx := make([]int32, len(names))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	rank := make([]int32, len(names))
	for r, i := range idx {
		rank[i] = int32(r)
	}
	return rank
}

// linkProgramOrder fills each op's After: the earlier ops of its client
// that returned (not open) at the instant it was called. ops are sorted by
// call, so an op's After are among the ops before it.
func linkProgramOrder[I, O any](ops []typedOp[I, O]) {
	// Each client keeps the answered ops that returned at or after the
	// latest call: an op that returned earlier is before every later
	// call, so it is in no later op's After. A client has a handful in
	// flight, so this is a short scan per op and no hashing; a map keyed
	// by (client, instant) was a fifth of the checker's time.
	clients := 0
	for i := range ops {
		clients = max(clients, ops[i].Client+1)
	}
	recent := make([][]int32, clients)
	for i := range ops {
		op := &ops[i]
		kept := recent[op.Client][:0]
		for _, j := range recent[op.Client] {
			switch at := ops[j].Return; {
			case at < op.Call:
				continue
			case at == op.Call:
				op.After = append(op.After, j)
			}
			kept = append(kept, j)
		}
		if !op.Open {
			kept = append(kept, int32(i))
		}
		recent[op.Client] = kept
	}
}
