package fencedstore

import (
	"encoding/binary"
	"fmt"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
)

// The fenced store's durable record: the whole table, written (and synced)
// on every applied write. It was JSON of a copied snapshot, about a tenth
// of the standard run's CPU; it is now a compact binary form encoded
// straight from the table into a reused buffer:
//
//	version byte (storeRecordVersion)
//	uvarint n, then n registers in increasing resource order:
//	    resource (uvarint length, bytes), Highest (uvarint),
//	    Value (zig-zag varint), ValueToken (uvarint)
//	uvarint m, then m clients' latest decisions in increasing client order:
//	    client (uvarint length, bytes), Request (uvarint), flags (uvarint:
//	    1 accepted, 2 an Err follows, 4 the reply's request differs and
//	    follows), Reply.Highest (uvarint), [Reply.Request], [Reply.Err]
//
// Keys are strictly increasing, so one table has exactly one encoding and a
// decoder refuses anything else; a record of another version (a JSON record
// begins with '{') is refused by name.

const storeRecordVersion = 1

const (
	lwAccepted   = 1 << iota // Reply.Accepted
	lwErr                    // Reply.Err follows
	lwReplyReqID             // Reply.Request differs from Request and follows
	lwAllFlags   = lwAccepted | lwErr | lwReplyReqID
)

// appendRecord appends t's durable record to b. volatileHighest
// (StoreConfig.FenceInMemory) writes every register's highest token as 0:
// the fence lives in memory only and a restart forgets it.
func (t *FenceTable) appendRecord(b []byte, volatileHighest bool) []byte {
	b = append(b, storeRecordVersion)
	b = binary.AppendUvarint(b, uint64(len(t.regKeys)))
	for _, k := range t.regKeys {
		r := t.regs[k]
		highest := r.Highest
		if volatileHighest {
			highest = 0
		}
		b = record.AppendString(b, k)
		b = binary.AppendUvarint(b, highest)
		b = binary.AppendVarint(b, r.Value)
		b = binary.AppendUvarint(b, r.ValueToken)
	}
	b = binary.AppendUvarint(b, uint64(len(t.lastKeys)))
	for _, c := range t.lastKeys {
		lw := t.last[c]
		var flags uint64
		if lw.Reply.Accepted {
			flags |= lwAccepted
		}
		if lw.Reply.Err != "" {
			flags |= lwErr
		}
		if lw.Reply.Request != lw.Request {
			flags |= lwReplyReqID
		}
		b = record.AppendString(b, c)
		b = binary.AppendUvarint(b, lw.Request)
		b = binary.AppendUvarint(b, flags)
		b = binary.AppendUvarint(b, lw.Reply.Highest)
		if flags&lwReplyReqID != 0 {
			b = binary.AppendUvarint(b, lw.Reply.Request)
		}
		if flags&lwErr != 0 {
			b = record.AppendString(b, lw.Reply.Err)
		}
	}
	return b
}

// decodeStoreRecord rebuilds a table from its durable record. The table is
// fenced (IgnoreTokens and the fence rule are configuration: the store
// sets them).
func decodeStoreRecord(b []byte) (*FenceTable, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty record")
	}
	if b[0] != storeRecordVersion {
		if b[0] == '{' {
			return nil, fmt.Errorf("a JSON record (an older version of the store); want binary version %d", storeRecordVersion)
		}
		return nil, fmt.Errorf("unknown record version %d, want %d", b[0], storeRecordVersion)
	}
	r := record.Reader{B: b[1:]}
	t := &FenceTable{}

	n := r.Count(4) // a register takes at least 4 bytes
	t.regs = make(map[string]*Register, n)
	t.regKeys = make([]string, 0, n)
	for i := 0; i < n && r.Err == nil; i++ {
		k := string(r.Bytes())
		reg := &Register{Highest: r.Uvarint(), Value: r.Varint(), ValueToken: r.Uvarint()}
		if i > 0 && k <= t.regKeys[i-1] {
			r.Fail(fmt.Errorf("resource %q out of order", k))
		}
		t.regKeys = append(t.regKeys, k)
		t.regs[k] = reg
	}

	m := r.Count(4) // a client's decision takes at least 4 bytes
	t.last = make(map[string]lastWrite, m)
	t.lastKeys = make([]string, 0, m)
	for i := 0; i < m && r.Err == nil; i++ {
		c := string(r.Bytes())
		lw := lastWrite{Request: r.Uvarint()}
		flags := r.Uvarint()
		lw.Reply = lockservice.WriteReply{Request: lw.Request, Accepted: flags&lwAccepted != 0, Highest: r.Uvarint()}
		if flags&^lwAllFlags != 0 {
			r.Fail(fmt.Errorf("client %q: unknown flags %#x", c, flags))
		}
		if flags&lwReplyReqID != 0 {
			lw.Reply.Request = r.Uvarint()
		}
		if flags&lwErr != 0 {
			lw.Reply.Err = string(r.Bytes())
		}
		if i > 0 && c <= t.lastKeys[i-1] {
			r.Fail(fmt.Errorf("client %q out of order", c))
		}
		t.lastKeys = append(t.lastKeys, c)
		t.last[c] = lw
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return t, nil
}
