package reference

import (
	"encoding/binary"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/process"
)

// The binary form of a replica's state in a snapshot: the lock table's
// last token, its leases, what it remembers of each client, and the index
// each lease started at. Clients and resources are written sorted, so
// equal states encode equally. It is the table's durable form like
// Snapshot (the single node's JSON), written directly from the table:
// a replica snapshots every few thousand entries for real and every few
// entries in a simulation, where encoding through encoding/json took a
// third of a run's time.

// appendState appends the replica state's encoding to b.
func appendState(b []byte, t *LockTable, started map[string]uint64) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, t.lastToken)
	leases := t.Leases()
	b = binary.AppendUvarint(b, uint64(len(leases)))
	for _, l := range leases {
		b = record.AppendString(b, l.Resource)
		b = record.AppendString(b, l.Holder)
		b = binary.AppendUvarint(b, l.Token)
		b = binary.AppendVarint(b, int64(l.TTL))
		b = binary.AppendVarint(b, int64(l.Deadline))
		b = binary.AppendUvarint(b, l.Request)
		b = record.AppendString(b, l.Key)
		b = binary.AppendUvarint(b, started[l.Resource])
	}
	if len(t.order) != len(t.clients) {
		t.order = sortedKeys(t.clients)
	}
	b = binary.AppendUvarint(b, uint64(len(t.order)))
	for _, c := range t.order {
		m := t.clients[c]
		if !m.encoded {
			m.enc, m.encoded = appendClient(m.enc[:0], c, m), true
		}
		b = append(b, m.enc...)
	}
	return b
}

// appendClient appends what the table remembers of client c.
func appendClient(b []byte, c string, m *clientMemory) []byte {
	b = record.AppendString(b, c)
	b = binary.AppendUvarint(b, m.highest)
	b = binary.AppendUvarint(b, m.forgotten)
	b = binary.AppendUvarint(b, uint64(len(m.dedup)))
	for _, d := range m.dedup {
		b = binary.AppendUvarint(b, d.Request)
		b = appendReply(b, d.Reply)
	}
	b = binary.AppendUvarint(b, uint64(len(m.keys)))
	for _, k := range m.keys {
		b = record.AppendString(b, k.Key)
		b = record.AppendString(b, k.Resource)
		b = appendReply(b, k.Reply)
	}
	return b
}

func appendReply(b []byte, r lockservice.LockReply) []byte {
	b = binary.AppendUvarint(b, r.Request)
	b = append(b, byte(r.Status))
	b = binary.AppendUvarint(b, r.Token)
	b = binary.AppendVarint(b, int64(r.TTL))
	b = record.AppendString(b, r.Err)
	b = binary.AppendVarint(b, int64(r.Leader))
	return binary.AppendVarint(b, int64(r.Waited))
}

// decodeState rebuilds a table and the lease start indexes from
// appendState's encoding. Deadlines are kept as they were: the replicated
// table is applied at time 0, so they are the table's, not a clock's, and
// a table restored from a snapshot equals the one the log built.
func decodeState(b []byte) (*LockTable, map[string]uint64, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return nil, nil, record.ErrCorrupt
	}
	r := &record.Reader{B: b[1:]}
	t := NewLockTable()
	started := map[string]uint64{}
	t.lastToken = r.Uvarint()
	for range r.Count(8) {
		l := &Lease{Resource: string(r.Bytes()), Holder: string(r.Bytes()), Token: r.Uvarint(), TTL: time.Duration(r.Varint()),
			Deadline: time.Duration(r.Varint()), Request: r.Uvarint(), Key: string(r.Bytes())}
		t.leases[l.Resource] = l
		if s := r.Uvarint(); s > 0 {
			started[l.Resource] = s
		}
	}
	for range r.Count(5) {
		m := &clientMemory{}
		c := string(r.Bytes())
		m.highest, m.forgotten = r.Uvarint(), r.Uvarint()
		n := r.Count(8)
		m.dedup = make([]dedupEntry, 0, max(n, dedupDepth+1))
		for range n {
			m.dedup = append(m.dedup, dedupEntry{Request: r.Uvarint(), Reply: readReply(r)})
		}
		for range r.Count(9) {
			m.keys = append(m.keys, keyEntry{Key: string(r.Bytes()), Resource: string(r.Bytes()), Reply: readReply(r)})
		}
		t.clients[c] = m
	}
	if err := r.Done(); err != nil {
		return nil, nil, err
	}
	return t, started, nil
}

func readReply(r *record.Reader) lockservice.LockReply {
	rep := lockservice.LockReply{Request: r.Uvarint()}
	if len(r.B) < 1 {
		r.Fail(record.ErrCorrupt)
		return rep
	}
	rep.Status, r.B = lockservice.Status(r.B[0]), r.B[1:]
	rep.Token, rep.TTL = r.Uvarint(), time.Duration(r.Varint())
	rep.Err = string(r.Bytes())
	rep.Leader, rep.Waited = process.NodeID(r.Varint()), time.Duration(r.Varint())
	return rep
}
