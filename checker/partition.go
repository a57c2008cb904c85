package checker

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// partition is the operations of one resource, typed, with the history's
// records they came from at the same indices.
type partition[I, O, S any] struct {
	resource string
	typed    []typedOp[I, O]
	src      []S
	boxed    []porcupine.Operation // made by ops, when porcupine is needed
}

// ops returns the partition in porcupine's encoding.
func (p *partition[I, O, S]) ops() []porcupine.Operation {
	if p.boxed == nil {
		p.boxed = boxOps(p.typed)
	}
	return p.boxed
}

// carvePartitions makes one partition per resource of perResource (which
// holds each resource's op count, and is rewritten to its partition's
// index), in ascending resource order, every partition's slices cut from
// one allocation at their exact sizes.
func carvePartitions[I, O, S any](perResource map[string]int, total int) []partition[I, O, S] {
	resources := sortedKeys(perResource)
	parts := make([]partition[I, O, S], len(resources))
	allOps := make([]typedOp[I, O], 0, total)
	allSrc := make([]S, 0, total)
	off := 0
	for i, r := range resources {
		n := perResource[r]
		parts[i] = partition[I, O, S]{resource: r, typed: allOps[off : off : off+n], src: allSrc[off : off : off+n]}
		perResource[r] = i
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
// a return later than every other event of the history (end included),
// which is how porcupine expects operations that never returned to be
// encoded; a record whose return precedes its call returns when called.
func encodePartitions[I, O, S any](records []S, end time.Duration, describe func(S) opRecord, encode func(S) (I, O)) []partition[I, O, S] {
	infos := make([]opRecord, len(records))
	order := make([]int, len(records))
	for i, r := range records {
		infos[i], order[i] = describe(r), i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(infos[a].call, infos[b].call), cmp.Compare(infos[a].id, infos[b].id))
	})

	last := end
	clients := make(map[string]int)
	perResource := make(map[string]int) // encoded records per resource, then partition index
	encoded := 0
	for _, r := range infos {
		last = max(last, r.call)
		if !r.open {
			last = max(last, r.ret)
		}
		clients[r.client] = 0
		if !r.skip {
			perResource[r.resource]++
			encoded++
		}
	}
	open := last
	if open < math.MaxInt64 {
		open++
	}
	for i, c := range sortedKeys(clients) {
		clients[c] = i
	}

	parts := carvePartitions[I, O, S](perResource, encoded)
	for _, k := range order {
		r := infos[k]
		if r.skip {
			continue
		}
		ret := max(r.ret, r.call)
		if r.open {
			ret = open
		}
		in, out := encode(records[k])
		p := &parts[perResource[r.resource]]
		p.typed = append(p.typed, typedOp[I, O]{Client: clients[r.client], In: in, Call: int64(r.call), Out: out,
			Return: int64(ret), Meta: opMetadata{ID: r.id, Client: r.client}})
		p.src = append(p.src, records[k])
	}
	return parts
}
