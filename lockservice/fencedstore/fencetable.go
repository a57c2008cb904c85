package fencedstore

import (
	"maps"
	"slices"

	"github.com/fencesim/fencesim/lockservice"
)

// Register is one resource's state in the fenced store.
type Register struct {
	Highest    uint64 `json:"highest"`     // highest token ever accepted
	Value      int64  `json:"value"`       // current value
	ValueToken uint64 `json:"value_token"` // token of the write that set Value
}

// FenceTable is the fenced store's state machine: pure, no I/O. A write is
// accepted iff its token is at least the highest token accepted for its
// resource (equal is accepted: the holder may write many times). Each
// client's writes are deduplicated by request id, so a duplicated or
// retried write is decided once — otherwise a delayed copy of an old write
// could land again after a newer one and roll the value back.
type FenceTable struct {
	regs map[string]*Register
	last map[string]lastWrite // by client: its latest decided write
	// regKeys and lastKeys are the keys of regs and last, sorted: the
	// durable record is encoded in this order, with no map iteration.
	regKeys, lastKeys []string

	// IgnoreTokens turns fencing off: every write is accepted. It exists for
	// the unfenced contrast design and the canary that proves the checker
	// can fail; the reference store never sets it.
	IgnoreTokens bool
	// fence replaces the rule token ≥ highest (StoreConfig.Fence).
	Fence func(token, highest uint64) bool
}

type lastWrite struct {
	Request uint64                 `json:"request"`
	Reply   lockservice.WriteReply `json:"reply"`
}

// NewFenceTable returns an empty, fenced table.
func NewFenceTable() *FenceTable {
	return &FenceTable{regs: map[string]*Register{}, last: map[string]lastWrite{}}
}

// WriteDecision is what Write decided.
type WriteDecision struct {
	Reply lockservice.WriteReply
	// Applied is false for a duplicate of an already decided request: the
	// reply is replayed and nothing is logged or changed.
	Applied bool
	// Stale is true for a copy of a request older than the client's latest:
	// the client gave up on it; it gets no reply at all.
	Stale bool
}

// Write decides w. Requests from one client must carry increasing ids.
func (t *FenceTable) Write(w lockservice.WriteRequest) WriteDecision {
	lw, seen := t.last[w.Client]
	if seen {
		if w.Request == lw.Request {
			return WriteDecision{Reply: lw.Reply}
		}
		if w.Request < lw.Request {
			return WriteDecision{Stale: true}
		}
	}
	r := t.regs[w.Resource]
	if r == nil {
		r = &Register{}
		t.regs[w.Resource] = r
		t.regKeys = insertSorted(t.regKeys, w.Resource)
	}
	rep := lockservice.WriteReply{Request: w.Request}
	if t.IgnoreTokens || t.accepts(w.Token, r.Highest) {
		r.Value, r.ValueToken = w.Value, w.Token
		r.Highest = max(r.Highest, w.Token)
		rep.Accepted = true
	}
	rep.Highest = r.Highest
	if !seen {
		t.lastKeys = insertSorted(t.lastKeys, w.Client)
	}
	t.last[w.Client] = lastWrite{Request: w.Request, Reply: rep}
	return WriteDecision{Reply: rep, Applied: true}
}

// accepts is the fence: a token at least the highest accepted.
func (t *FenceTable) accepts(token, highest uint64) bool {
	if t.Fence != nil {
		return t.Fence(token, highest)
	}
	return token >= highest
}

// Read returns resource's register (zero if never written).
func (t *FenceTable) Read(resource string) Register {
	if r := t.regs[resource]; r != nil {
		return *r
	}
	return Register{}
}

// StoreSnapshot is the fenced store's durable form.
type StoreSnapshot struct {
	Registers map[string]Register  `json:"registers"`
	Last      map[string]lastWrite `json:"last"`
}

// Snapshot copies the table (the store's disk record is appendRecord's
// binary form, encoded from the table itself).
func (t *FenceTable) Snapshot() StoreSnapshot {
	s := StoreSnapshot{Registers: make(map[string]Register, len(t.regs)), Last: maps.Clone(t.last)}
	for k, r := range t.regs { //detlint:sorted (into a map)
		s.Registers[k] = *r
	}
	return s
}

// Resources lists the resources ever written, sorted.
func (t *FenceTable) Resources() []string {
	return append(make([]string, 0, len(t.regKeys)), t.regKeys...)
}

// insertSorted inserts k, which keys does not hold, keeping keys sorted.
func insertSorted(keys []string, k string) []string {
	i, _ := slices.BinarySearch(keys, k)
	return slices.Insert(keys, i, k)
}

// RestoreFenceTable rebuilds a table from a snapshot.
func RestoreFenceTable(s StoreSnapshot) *FenceTable {
	t := NewFenceTable()
	for k, r := range s.Registers { //detlint:sorted (into a map; the keys are sorted below)
		t.regs[k] = &r
		t.regKeys = append(t.regKeys, k)
	}
	if s.Last != nil {
		t.last = maps.Clone(s.Last)
	}
	t.lastKeys = slices.Sorted(maps.Keys(t.last))
	slices.Sort(t.regKeys)
	return t
}
