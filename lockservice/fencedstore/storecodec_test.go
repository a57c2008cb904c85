package fencedstore

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
)

// genFenceTable draws a table: a run of writes (fenced or not), and
// sometimes decisions no Write makes (an Err, a reply to another request),
// which the record must still carry.
func genFenceTable(t *rapid.T) *FenceTable {
	tbl := NewFenceTable()
	tbl.IgnoreTokens = rapid.Bool().Draw(t, "ignore")
	name := rapid.OneOf(rapid.SampledFrom([]string{"", "r", "r0", "r1", "résumé", "a\x00b"}), rapid.StringN(0, 12, -1))
	next := map[string]uint64{}
	for range rapid.IntRange(0, 40).Draw(t, "writes") {
		c := name.Draw(t, "client")
		next[c] += rapid.Uint64Range(1, 1<<40).Draw(t, "step")
		tbl.Write(lockservice.WriteRequest{Resource: name.Draw(t, "resource"), Client: c, Token: rapid.Uint64().Draw(t, "token"),
			Value: rapid.Int64().Draw(t, "value"), Request: next[c]})
	}
	for range rapid.IntRange(0, 3).Draw(t, "odd") {
		c := name.Draw(t, "odd client")
		if _, ok := tbl.last[c]; !ok {
			tbl.lastKeys = insertSorted(tbl.lastKeys, c)
		}
		tbl.last[c] = lastWrite{Request: rapid.Uint64().Draw(t, "request"), Reply: lockservice.WriteReply{Request: rapid.Uint64().Draw(t, "reply request"),
			Accepted: rapid.Bool().Draw(t, "accepted"), Highest: rapid.Uint64().Draw(t, "highest"), Err: rapid.String().Draw(t, "err")}}
	}
	return tbl
}

// sameTable compares the durable state of two tables (not configuration).
func sameTable(a, b *FenceTable) error {
	if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
		return fmt.Errorf("state %+v, want %+v", b.Snapshot(), a.Snapshot())
	}
	if !slices.Equal(a.regKeys, b.regKeys) || !slices.Equal(a.lastKeys, b.lastKeys) {
		return fmt.Errorf("keys %q %q, want %q %q", b.regKeys, b.lastKeys, a.regKeys, a.lastKeys)
	}
	return nil
}

// TestStoreRecordRoundTrips: decode(encode(t)) is t; the encoding is
// canonical (encoding the decoded table gives the same bytes), independent
// of the order keys were inserted in, and appends to what the buffer held.
func TestStoreRecordRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tbl := genFenceTable(t)
		prefix := []byte("prefix")
		b := tbl.appendRecord(slices.Clone(prefix), false)
		if !bytes.HasPrefix(b, prefix) {
			t.Fatalf("appendRecord overwrote its buffer: %q", b)
		}
		b = b[len(prefix):]
		got, err := decodeStoreRecord(b)
		if err != nil {
			t.Fatalf("decode %x: %v", b, err)
		}
		if err := sameTable(tbl, got); err != nil {
			t.Fatal(err)
		}
		if again := got.appendRecord(nil, false); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
		// The same state restored from a snapshot (whose keys come out of
		// maps) encodes to the same bytes.
		if via := RestoreFenceTable(tbl.Snapshot()).appendRecord(nil, false); !bytes.Equal(via, b) {
			t.Fatalf("the same state encodes differently:\n%x\n%x", via, b)
		}
		if !slices.IsSorted(tbl.Resources()) || !slices.Equal(tbl.Resources(), slices.Sorted(maps.Keys(tbl.regs))) {
			t.Fatalf("Resources() = %q", tbl.Resources())
		}
	})
}

// TestStoreRecordVolatileHighest: the StoreConfig.FenceInMemory record forgets
// every register's highest token and nothing else.
func TestStoreRecordVolatileHighest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tbl := genFenceTable(t)
		got, err := decodeStoreRecord(tbl.appendRecord(nil, true))
		if err != nil {
			t.Fatal(err)
		}
		want := RestoreFenceTable(tbl.Snapshot())
		for _, r := range want.regs { //detlint:sorted (each register alone)
			r.Highest = 0
		}
		if err := sameTable(want, got); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStoreRecordRefusesCorruption: every truncation, trailing bytes, keys
// out of order, unknown flags, another version and an old JSON record are
// refused; random bytes never panic, and what decodes re-encodes.
func TestStoreRecordRefusesCorruption(t *testing.T) {
	tbl := NewFenceTable()
	tbl.Write(lockservice.WriteRequest{Resource: "r1", Client: "b", Token: 3, Value: -7, Request: 1})
	tbl.Write(lockservice.WriteRequest{Resource: "r0", Client: "a", Token: 300, Value: 1 << 40, Request: 9})
	tbl.Write(lockservice.WriteRequest{Resource: "r1", Client: "a", Token: 2, Value: 5, Request: 10}) // rejected
	b := tbl.appendRecord(nil, false)
	for n := 0; n < len(b); n++ {
		if _, err := decodeStoreRecord(b[:n]); err == nil {
			t.Errorf("a %d-byte prefix of %d decoded", n, len(b))
		}
	}
	if _, err := decodeStoreRecord(append(slices.Clone(b), 0)); err == nil {
		t.Error("trailing bytes decoded")
	}

	swapped := NewFenceTable() // keys out of order: the same table with its key lists reversed
	swapped.Write(lockservice.WriteRequest{Resource: "r0", Client: "a", Token: 1, Request: 1})
	swapped.Write(lockservice.WriteRequest{Resource: "r1", Client: "b", Token: 1, Request: 1})
	for _, keys := range []*[]string{&swapped.regKeys, &swapped.lastKeys} {
		slices.Reverse(*keys)
		if _, err := decodeStoreRecord(swapped.appendRecord(nil, false)); err == nil || !strings.Contains(err.Error(), "out of order") {
			t.Errorf("keys %q out of order: %v, want refused", *keys, err)
		}
		slices.Reverse(*keys)
	}
	dup := NewFenceTable()
	dup.Write(lockservice.WriteRequest{Resource: "r", Client: "a", Token: 1, Request: 1})
	dup.regKeys = append(dup.regKeys, "r")
	if _, err := decodeStoreRecord(dup.appendRecord(nil, false)); err == nil {
		t.Error("a resource twice decoded")
	}

	one := NewFenceTable()
	one.Write(lockservice.WriteRequest{Resource: "r", Client: "a", Token: 1, Request: 1})
	flags := one.appendRecord(nil, false)
	// version, 1, "r", highest 1, value 0, value token 1, 1, "a", request 1, flags at index 11
	if flags[11] != lwAccepted {
		t.Fatalf("layout changed: %x", flags)
	}
	flags[11] |= 8
	if _, err := decodeStoreRecord(flags); err == nil || !strings.Contains(err.Error(), "flags") {
		t.Errorf("unknown flags: %v, want refused", err)
	}

	for _, c := range []struct {
		rec  []byte
		want string
	}{
		{nil, "empty record"},
		{[]byte(`{"registers":{},"last":{}}`), "JSON record"},
		{append([]byte{storeRecordVersion + 1}, b[1:]...), "unknown record version 2"},
	} {
		if _, err := decodeStoreRecord(c.rec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %q", c.rec, err, c.want)
		}
	}

	rapid.Check(t, func(t *rapid.T) {
		rec := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "rec")
		if rapid.Bool().Draw(t, "versioned") && len(rec) > 0 {
			rec[0] = storeRecordVersion
		}
		if got, err := decodeStoreRecord(rec); err == nil { // (varints may be overlong: not canonical bytes)
			again, err := decodeStoreRecord(got.appendRecord(nil, false))
			if err != nil {
				t.Fatalf("%x decoded, but its re-encoding does not: %v", rec, err)
			}
			if err := sameTable(got, again); err != nil {
				t.Fatalf("%x: %v", rec, err)
			}
		}
	})
}

// A store whose synced record does not decode refuses to start, with a
// message that says so, rather than starting empty (which would forget
// every fence).
func TestFencedStoreRefusesCorruptRecord(t *testing.T) {
	for name, rec := range map[string][]byte{ //detlint:sorted (independent cases)
		"json":      []byte(`{"registers":{"r":{"highest":5,"value":1,"value_token":5}},"last":{}}`),
		"truncated": NewFenceTable().appendRecord(nil, false)[:1],
		"version":   {storeRecordVersion + 1, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			w := simtest.NewTestWorld(t, nil)
			st := addStore(t, w, lockservice.NopObserver{})
			rs := record.Slotted{Key: record.StateKey}
			rs.Store(w.Disk(st), rec)
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "lockservice: corrupt store state on disk") {
					t.Fatalf("panic %q, want the corrupt state refused", msg)
				}
			}()
			w.Run(time.Second, 1000)
			t.Fatal("the store started on a corrupt record")
		})
	}
}

// A crash that tears the store's latest record (its slow sync still in
// flight) brings back the previous synced one: the fence and the value of
// the write before, which was acknowledged; the torn write was not.
func TestFencedStoreSurvivesTornRecord(t *testing.T) {
	for _, keep := range []float64{0, 0.3, 0.9, 0.99} {
		w := simtest.NewTestWorld(t, nil)
		st := addStore(t, w, lockservice.NopObserver{})
		p, _ := simtest.AddProbe(t, w, "p")
		p.SendAt(1*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 5, Value: 50, Request: 1})
		p.SendAt(10*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 7, Value: 70, Request: 2})
		w.At(15*time.Millisecond, "slow disk", func() { w.SetSyncDelay(st, 100*time.Millisecond) })
		p.SendAt(20*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 9, Value: 90, Request: 3})
		w.At(40*time.Millisecond, "torn crash", func() { w.CrashTorn(st, keep) })
		w.At(50*time.Millisecond, "restart", func() { w.SetSyncDelay(st, 0); w.Restart(st) })
		p.SendAt(60*time.Millisecond, st, lockservice.ReadRequest{Resource: "r", Client: "p", Request: 4})
		p.SendAt(70*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 6, Value: 60, Request: 5})
		p.SendAt(80*time.Millisecond, st, lockservice.WriteRequest{Resource: "r", Client: "p", Token: 8, Value: 80, Request: 6})
		simtest.RunToQuiescence(t, w)

		if torn := w.Disk(st).Stats().Torn; torn != 1 {
			t.Fatalf("keep %v: %d torn writes, want 1", keep, torn)
		}
		if len(p.Reads) != 1 || p.Reads[0].Msg != (lockservice.ReadReply{Request: 4, Value: 70, Token: 7}) {
			t.Errorf("keep %v: read after the restart %+v, want value 70 with token 7", keep, p.Reads)
		}
		if got := p.OnlyWriteReply(t, 5); got != (lockservice.WriteReply{Request: 5, Accepted: false, Highest: 7}) {
			t.Errorf("keep %v: token 6 after the restart: %+v, want rejected below 7", keep, got)
		}
		if got := p.OnlyWriteReply(t, 6); got != (lockservice.WriteReply{Request: 6, Accepted: true, Highest: 8}) {
			t.Errorf("keep %v: token 8 after the restart: %+v, want accepted", keep, got)
		}
	}
}
