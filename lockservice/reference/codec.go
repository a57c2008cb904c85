package reference

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/fencesim/fencesim/lockservice/internal/record"
	"github.com/fencesim/fencesim/lockservice/raft"
)

// The replicated service encodes its log entries, commands and Raft's hard
// state in a compact binary form: unsigned varints and length-prefixed
// bytes. JSON cost nearly half of a replicated run (profile of the
// standard run), and these records are written on every proposal.

const codecVersion = 1

// flagKey is the command flag of an entry that carries a Key. Bit 0 stays
// unused: an older build's takeover flag was a set flag, refused since.
const flagKey = 2

// flagNext says a release carries its resource's next holder's acquire
// (Command.Next) after its other fields.
const flagNext = 4

func encodeCommand(c Command) []byte {
	b := make([]byte, 0, 32+len(c.Resource)+len(c.Client))
	// The flags varint: 0 unless an optional field follows (flagRequestID,
	// flagKey), so that an entry without one keeps its bytes (each
	// entry's digest, and so every trace hash, is over them).
	var flags byte
	if c.RequestID != "" {
		flags |= flagRequestID
	}
	if c.Key != "" {
		flags |= flagKey
	}
	if c.Next.Client != "" {
		flags |= flagNext
	}
	b = append(b, codecVersion, byte(c.Kind), flags)
	b = record.AppendString(b, c.Resource)
	b = record.AppendString(b, c.Client)
	for _, v := range []uint64{uint64(c.TTL), c.Token, c.Request, c.Since} {
		b = binary.AppendUvarint(b, v)
	}
	if flags&flagRequestID != 0 {
		b = record.AppendString(b, c.RequestID)
	}
	if c.Key != "" {
		b = record.AppendString(b, c.Key)
	}
	if n := c.Next; n.Client != "" {
		b = record.AppendString(b, n.Client)
		for _, v := range []uint64{uint64(n.TTL), n.Token, n.Request} {
			b = binary.AppendUvarint(b, v)
		}
		b = record.AppendString(b, n.Key)
	}
	return b
}

// flagRequestID says a command's RequestID follows its other fields.
const flagRequestID = 1

func decodeCommand(b []byte) (Command, error) { return decodeCommandNames(b, nil) }

// decodeCommandNames is decodeCommand sharing the resource and client
// strings through names, so that applying an entry allocates no string.
func decodeCommandNames(b []byte, names *nameTable) (Command, error) {
	return decodeCommandText(b, fieldText{names: names})
}

// fieldText makes a decoded command's strings: names interned through
// names (nil: copied), other text copied; or, when only checking that
// the command decodes, a placeholder that is empty exactly when the field
// is (a follower checks every entry it receives before it persists it,
// and applies it later: the check need not build what it drops).
type fieldText struct {
	names *nameTable
	check bool
}

func (f fieldText) name(b []byte) string {
	if f.check {
		return placeholder(b)
	}
	return f.names.get(b)
}

func (f fieldText) text(b []byte) string {
	if f.check {
		return placeholder(b)
	}
	return string(b)
}

func placeholder(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return "-"
}

func decodeCommandText(b []byte, text fieldText) (Command, error) {
	if len(b) < 2 || b[0] != codecVersion {
		return Command{}, fmt.Errorf("lockservice: corrupt log entry: unknown encoding")
	}
	c := Command{Kind: CommandKind(b[1])}
	r := record.Reader{B: b[2:]}
	flags := r.Uvarint()
	if flags&^(flagRequestID|flagKey|flagNext) != 0 {
		r.Fail(record.ErrCorrupt) // a flag no version defines
	}
	c.Resource = text.name(r.Bytes())
	c.Client = text.name(r.Bytes())
	c.TTL = time.Duration(r.Uvarint())
	c.Token, c.Request, c.Since = r.Uvarint(), r.Uvarint(), r.Uvarint()
	if flags&flagRequestID != 0 {
		if c.RequestID = text.text(r.Bytes()); c.RequestID == "" {
			r.Fail(record.ErrCorrupt) // flagged, so not empty
		}
	}
	if flags&flagKey != 0 {
		if c.Key = text.text(r.Bytes()); c.Key == "" {
			r.Fail(record.ErrCorrupt) // flagged, so not empty
		}
	}
	if flags&flagNext != 0 {
		n := &c.Next
		n.Client = text.name(r.Bytes())
		n.TTL = time.Duration(r.Uvarint())
		n.Token, n.Request = r.Uvarint(), r.Uvarint()
		n.Key = text.text(r.Bytes())
		if n.Client == "" || c.Kind != CmdRelease {
			r.Fail(record.ErrCorrupt) // flagged, so named; only a release hands over
		}
	}
	if err := r.Done(); err != nil {
		return Command{}, fmt.Errorf("lockservice: corrupt log entry: %w", err)
	}
	return c, nil
}

// checkEntries refuses a Raft message whose entries carry a command this
// replica could not apply: one that does not decode, of no known kind, or
// with a negative TTL. Raft checks the entries' places in the log; what
// they say is the lock service's to check, before they reach the disk.
// The check builds none of the command's strings (fieldText).
func checkEntries(m raft.Message) error {
	for _, e := range m.Entries {
		if e.Data == nil {
			continue // a new leader's empty entry
		}
		c, err := decodeCommandText(e.Data, fieldText{check: true})
		if err != nil {
			return fmt.Errorf("raft message from %d: entry %d: %w", m.From, e.Index, err)
		}
		if c.Kind < CmdAcquire || c.Kind > CmdExpire || c.TTL < 0 || c.Next.TTL < 0 {
			return fmt.Errorf("raft message from %d: entry %d: command kind %d with TTL %v cannot be applied", m.From, e.Index, c.Kind, c.TTL)
		}
	}
	return nil
}

// encodeEntry writes a Raft log entry; a nil Data (a new leader's empty
// entry) stays distinct from empty data.
func encodeEntry(e raft.Entry) []byte {
	return appendEntry(make([]byte, 0, 24+len(e.Data)), e)
}

// appendEntry appends e's encoding to b.
func appendEntry(b []byte, e raft.Entry) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, e.Term)
	b = binary.AppendUvarint(b, e.Index)
	if e.Data == nil {
		return append(b, 0)
	}
	return record.AppendBytes(append(b, 1), e.Data)
}

// decodeEntry decodes a Raft log entry into a fresh copy of its data.
func decodeEntry(b []byte) (raft.Entry, error) {
	e, err := decodeEntryShared(b)
	if e.Data != nil {
		e.Data = append([]byte{}, e.Data...)
	}
	return e, err
}

// decodeEntryShared is decodeEntry whose data aliases b (clipped, so an
// append to it cannot write into b): for a caller that owns b and never
// changes it, as loadLog its copy of a segment — one allocation per
// segment on a restart instead of one per entry.
func decodeEntryShared(b []byte) (raft.Entry, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return raft.Entry{}, record.ErrCorrupt
	}
	r := record.Reader{B: b[1:]}
	e := raft.Entry{Term: r.Uvarint(), Index: r.Uvarint()}
	if r.Err == nil && len(r.B) > 0 {
		has := r.B[0]
		r.B = r.B[1:]
		if has == 1 {
			e.Data = slices.Clip(r.Bytes())
			if e.Data == nil {
				e.Data = []byte{} // empty data stays distinct from none
			}
		}
	} else {
		r.Err = record.ErrCorrupt
	}
	return e, r.Done()
}

func encodeHardState(hs raft.HardState) []byte { return appendHardState(nil, hs) }

// appendHardState appends hs's encoding to b.
func appendHardState(b []byte, hs raft.HardState) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, hs.Term)
	b = binary.AppendUvarint(b, uint64(hs.Vote))
	return binary.AppendUvarint(b, hs.Commit)
}

func decodeHardState(b []byte) (raft.HardState, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return raft.HardState{}, record.ErrCorrupt
	}
	r := record.Reader{B: b[1:]}
	hs := raft.HardState{Term: r.Uvarint(), Vote: raft.ID(r.Uvarint()), Commit: r.Uvarint()}
	return hs, r.Done()
}

// nameTable interns the few resource and client names a replica sees. It
// stops growing at maxNames, after which names are simply copied.
type nameTable struct{ m map[string]string }

const maxNames = 4096

func (t *nameTable) get(b []byte) string {
	if t == nil {
		return string(b)
	}
	if s, ok := t.m[string(b)]; ok { // the conversion does not allocate
		return s
	}
	s := string(b)
	if t.m == nil {
		t.m = map[string]string{}
	}
	if len(t.m) < maxNames {
		t.m[s] = s
	}
	return s
}

// CommandDigest is a compact identity of an encoded log command: FNV-1a
// (64 bits) of its bytes, 0 for a new leader's empty entry (nil). Replicas
// report it with every entry they apply (EvEntryApplied), so that the
// checker compares what they applied at each index without keeping the
// commands; it is computed in place, allocating nothing.
func CommandDigest(data []byte) uint64 {
	if data == nil {
		return 0
	}
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, b := range data {
		h ^= uint64(b)
		h *= prime
	}
	return h
}
