package record

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/fencesim/fencesim/process"
)

// Torn writes: a crash may leave the last unsynced write as a prefix of
// itself. Every value this package puts on disk is therefore sealed — a
// length and a CRC-32C in front — and a value that does not unseal is
// treated as never written. A record that must survive its own torn
// overwrite (a snapshot, Raft's term and vote) alternates between two slots
// with a sequence number, so the other slot still holds the last synced
// copy; a torn overwrite was never synced, so nothing that depended on it
// was ever sent.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const SealHeader = 8 // uint32 length, uint32 CRC-32C

// Seal frames v so that a torn copy is detected.
func Seal(v []byte) []byte {
	return EndSeal(append(BeginSeal(make([]byte, 0, SealHeader+len(v))), v...))
}

// BeginSeal starts a sealed value in buf (reused, its contents dropped):
// the caller appends the value after the header that endSeal fills in, so
// that a value is encoded and sealed in one reusable buffer.
func BeginSeal(buf []byte) []byte {
	return append(buf[:0], make([]byte, SealHeader)...)
}

// EndSeal fills in the header of a value begun with beginSeal.
func EndSeal(b []byte) []byte {
	v := b[SealHeader:]
	binary.BigEndian.PutUint32(b[0:4], uint32(len(v)))
	binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(v, castagnoli))
	return b
}

// Unseal returns the value inside b, or false if b is torn or corrupt.
func Unseal(b []byte) ([]byte, bool) {
	if len(b) < SealHeader {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b[0:4])
	v := b[SealHeader:]
	if uint32(len(v)) != n || crc32.Checksum(v, castagnoli) != binary.BigEndian.Uint32(b[4:8]) {
		return nil, false
	}
	return v, true
}

// Slotted is a record kept in two alternating disk slots.
type Slotted struct {
	Key   string
	seq   uint64    // sequence number of the last copy written
	slots [2]string // key/0 and key/1, made once
	buf   []byte    // scratch for the sealed copy (the disk keeps its own)
	// Torn is set by Load when a slot holds a copy that does not unseal:
	// the newest write, torn by a crash (the next Store overwrites it).
	Torn bool
}

func (s *Slotted) slot(seq uint64) string {
	if s.slots[0] == "" {
		s.slots = [2]string{s.Key + "/0", s.Key + "/1"}
	}
	return s.slots[seq%2]
}

// Load returns the newest intact copy and remembers its sequence number.
func (s *Slotted) Load(d process.Disk) ([]byte, bool) {
	var best []byte
	found := false
	for _, k := range []string{s.slot(0), s.slot(1)} {
		raw, ok := d.Read(k)
		if !ok {
			continue
		}
		v, ok := Unseal(raw)
		if !ok || len(v) < 8 {
			s.Torn = true
			continue
		}
		if seq := binary.BigEndian.Uint64(v[:8]); !found || seq > s.seq {
			best, s.seq, found = v[8:], seq, true
		}
	}
	return best, found
}

// Store writes the concatenation of parts as the next copy, into the
// slot not holding the newest one. The caller syncs. (Parts spare a
// caller with a header and a large body a copy of the body.)
func (s *Slotted) Store(d process.Disk, parts ...[]byte) {
	s.seq++
	b := binary.BigEndian.AppendUint64(BeginSeal(s.buf), s.seq)
	for _, p := range parts {
		b = append(b, p...)
	}
	s.buf = EndSeal(b)
	d.Write(s.slot(s.seq), s.buf)
}

// StateKey is the disk key of a process's snapshot (the single node's
// lock table, the store's registers).
const StateKey = "state"
