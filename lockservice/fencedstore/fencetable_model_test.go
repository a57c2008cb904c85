package fencedstore

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/lockservice"
)

// fenceSM drives a FenceTable and a model register per resource with the
// same random writes and reads.
// The model's names, the lock table model's (reference).
var (
	smResources = []string{"r0", "r1", "r2"}
	smClients   = []string{"c0", "c1", "c2"}
)

type fenceSM struct {
	tbl    *FenceTable
	ignore bool
	regs   map[string]Register
	last   map[string]lastWrite                  // by client: its latest decided write
	sent   map[string][]lockservice.WriteRequest // by client, in increasing request order
}

func newFenceSM(ignore bool) *fenceSM {
	tbl := NewFenceTable()
	tbl.IgnoreTokens = ignore
	return &fenceSM{tbl: tbl, ignore: ignore, regs: map[string]Register{}, last: map[string]lastWrite{}, sent: map[string][]lockservice.WriteRequest{}}
}

// registers copies the table's registers (through Snapshot, which copies).
func (s *fenceSM) registers() map[string]Register { return s.tbl.Snapshot().Registers }

// write sends w to the table and checks the decision against the model.
func (s *fenceSM) write(t *rapid.T, w lockservice.WriteRequest) {
	before := s.registers()
	got := s.tbl.Write(w)
	after := s.registers()

	lw, known := s.last[w.Client]
	switch {
	case known && w.Request == lw.Request: // a duplicate: replayed, nothing changes
		if got != (WriteDecision{Reply: lw.Reply}) {
			t.Fatalf("duplicate %+v: decision %+v, want the replayed reply %+v", w, got, lw.Reply)
		}
		if !maps.Equal(before, after) {
			t.Fatalf("duplicate %+v changed the registers: %+v → %+v", w, before, after)
		}
	case known && w.Request < lw.Request: // stale: no reply, nothing changes
		if got != (WriteDecision{Stale: true}) {
			t.Fatalf("stale %+v (client's latest is %d): decision %+v, want Stale", w, lw.Request, got)
		}
		if !maps.Equal(before, after) {
			t.Fatalf("stale %+v changed the registers: %+v → %+v", w, before, after)
		}
	default: // a new request: decided and applied
		r := s.regs[w.Resource]
		accept := s.ignore || w.Token >= r.Highest
		if accept {
			r.Value, r.ValueToken, r.Highest = w.Value, w.Token, max(r.Highest, w.Token)
		}
		want := lockservice.WriteReply{Request: w.Request, Accepted: accept, Highest: r.Highest}
		if got != (WriteDecision{Reply: want, Applied: true}) {
			t.Fatalf("%+v (ignore tokens %v) against %+v: decision %+v, want %+v",
				w, s.ignore, s.regs[w.Resource], got, WriteDecision{Reply: want, Applied: true})
		}
		if !accept {
			// Rejected: no register changes (the resource may have appeared
			// as a zero register, which reads the same as never written).
			if before[w.Resource] != after[w.Resource] {
				t.Fatalf("rejected %+v changed its register: %+v → %+v", w, before[w.Resource], after[w.Resource])
			}
		}
		s.regs[w.Resource] = r
		s.last[w.Client] = lastWrite{Request: w.Request, Reply: want}
	}
	for k, b := range before {
		if after[k].Highest < b.Highest {
			t.Fatalf("%+v lowered the highest token of %s: %d → %d", w, k, b.Highest, after[k].Highest)
		}
	}
}

func (s *fenceSM) writeNew(t *rapid.T) {
	c := rapid.SampledFrom(smClients).Draw(t, "client")
	var req uint64
	if n := len(s.sent[c]); n > 0 {
		req = s.sent[c][n-1].Request
	}
	w := lockservice.WriteRequest{
		Resource: rapid.SampledFrom(smResources).Draw(t, "resource"),
		Client:   c,
		Token:    rapid.Uint64Range(0, 8).Draw(t, "token"),
		Value:    rapid.Int64Range(-1000, 1000).Draw(t, "value"),
		Request:  req + rapid.Uint64Range(1, 3).Draw(t, "reqGap"),
	}
	s.sent[c] = append(s.sent[c], w)
	s.write(t, w)
}

// writeDuplicate sends the client's latest write again, as the network's
// duplicate or a retry would.
func (s *fenceSM) writeDuplicate(t *rapid.T) {
	c := rapid.SampledFrom(smClients).Draw(t, "client")
	if len(s.sent[c]) == 0 {
		t.Skip("no write sent yet")
	}
	s.write(t, s.sent[c][len(s.sent[c])-1])
}

// writeStale sends an older write of the client: a delayed copy.
func (s *fenceSM) writeStale(t *rapid.T) {
	c := rapid.SampledFrom(smClients).Draw(t, "client")
	n := len(s.sent[c])
	if n < 2 {
		t.Skip("no older write")
	}
	s.write(t, rapid.SampledFrom(s.sent[c][:n-1]).Draw(t, "old"))
}

func (s *fenceSM) read(t *rapid.T) {
	r := rapid.SampledFrom(smResources).Draw(t, "resource")
	if got := s.tbl.Read(r); got != s.regs[r] {
		t.Fatalf("Read(%s) = %+v, model says %+v", r, got, s.regs[r])
	}
}

func (s *fenceSM) restart(t *rapid.T) {
	before := s.registers()
	switch rapid.SampledFrom([]string{"snapshot", "json", "record"}).Draw(t, "via") {
	case "snapshot":
		s.tbl = RestoreFenceTable(s.tbl.Snapshot())
	case "json":
		b, err := json.Marshal(s.tbl.Snapshot())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var snap StoreSnapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		s.tbl = RestoreFenceTable(snap)
	case "record": // the store's disk form
		b := s.tbl.appendRecord(nil, false)
		tbl, err := decodeStoreRecord(b)
		if err != nil {
			t.Fatalf("decode %x: %v", b, err)
		}
		s.tbl = tbl
	}
	s.tbl.IgnoreTokens = s.ignore // configuration, not state: the store sets it
	if after := s.registers(); !maps.Equal(before, after) {
		t.Fatalf("restore: registers %+v, were %+v", after, before)
	}
}

func (s *fenceSM) check(t *rapid.T) {
	var want []string
	for r, reg := range s.regs {
		want = append(want, r)
		if got := s.tbl.Read(r); got != reg {
			t.Fatalf("register %s = %+v, model says %+v", r, got, reg)
		}
	}
	slices.Sort(want)
	if got := s.tbl.Resources(); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("Resources() = %v, model says %v", got, want)
	}
	for c, lw := range s.last {
		// The client's latest decision is what a duplicate would replay.
		if got := s.tbl.Write(lockservice.WriteRequest{Resource: "r0", Client: c, Token: 0, Request: lw.Request}); got != (WriteDecision{Reply: lw.Reply}) {
			t.Fatalf("client %s: duplicate of request %d decided %+v, want the replay of %+v", c, lw.Request, got, lw.Reply)
		}
	}
}

func TestFenceTableAgreesWithModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newFenceSM(rapid.Bool().Draw(t, "ignoreTokens"))
		t.Repeat(map[string]func(*rapid.T){
			"writeNew":       s.writeNew,
			"writeDuplicate": s.writeDuplicate,
			"writeStale":     s.writeStale,
			"read":           s.read,
			"restart":        s.restart,
			"":               s.check,
		})
	})
}
