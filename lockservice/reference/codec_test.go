package reference

import (
	"reflect"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice/raft"
)

func TestCodecRoundTrips(t *testing.T) {
	cmds := []Command{
		{Kind: CmdAcquire, Resource: "r1", Client: "c1", TTL: time.Second, Request: 1<<32 | 7},
		{Kind: CmdExpire, Resource: "résumé", Token: 42, Since: 40},
		{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3},
		{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3, RequestID: "rel-7"},
		{Kind: CmdAcquire, Resource: "r", Client: "c", TTL: time.Second, Request: 2<<32 | 1, Key: "req-7"},
		{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3, Next: HandOver{Client: "w", TTL: time.Second, Request: 2<<32 | 5, Key: "k", Token: 77}},
		{},
	}
	for _, c := range cmds {
		got, err := decodeCommand(encodeCommand(c))
		if err != nil || got != c {
			t.Errorf("command %+v: got %+v, %v", c, got, err)
		}
	}
	for _, e := range []raft.Entry{{Term: 3, Index: 17, Data: []byte("x")}, {Term: 1, Index: 1}, {Term: 2, Index: 5, Data: []byte{}}} {
		got, err := decodeEntry(encodeEntry(e))
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("entry %+v: got %+v, %v", e, got, err)
		}
	}
	hs := raft.HardState{Term: 9, Vote: 3, Commit: 1 << 40}
	if got, err := decodeHardState(encodeHardState(hs)); err != nil || got != hs {
		t.Errorf("hard state: got %+v, %v", got, err)
	}
}

// TestCodecKeepsTheBytesOfACommandWithoutRequestID: the optional field
// costs nothing when absent, so entries the simulator writes (and their
// digests in every trace hash) are unchanged; a flag no version defines
// is refused.
func TestCodecKeepsTheBytesOfACommandWithoutRequestID(t *testing.T) {
	c := Command{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3}
	want := []byte{codecVersion, byte(CmdRelease), 0, 1, 'r', 1, 'c', 0, 9, 3, 0}
	if got := encodeCommand(c); !reflect.DeepEqual(got, want) {
		t.Errorf("encodeCommand(%+v) = %v, want the version-1 bytes %v", c, got, want)
	}
	b := encodeCommand(c)
	b[2] = 2
	if _, err := decodeCommand(b); err == nil {
		t.Error("a command with an undefined flag decoded")
	}
}

// TestCodecRejectsEveryTruncation: a record cut short anywhere, or with
// bytes added, never decodes (and never panics).
func TestCodecRejectsEveryTruncation(t *testing.T) {
	records := map[string][]byte{
		"command":    encodeCommand(Command{Kind: CmdAcquire, Resource: "r1", Client: "c1", TTL: time.Second, Request: 5}),
		"release":    encodeCommand(Command{Kind: CmdRelease, Resource: "r1", Client: "c1", Token: 4, RequestID: "id"}),
		"keyed":      encodeCommand(Command{Kind: CmdAcquire, Resource: "r1", Client: "c1", TTL: time.Second, Request: 5, Key: "k"}),
		"hand-over":  encodeCommand(Command{Kind: CmdRelease, Resource: "r1", Client: "c1", Token: 4, Request: 6, Next: HandOver{Client: "w", TTL: time.Second, Request: 5, Key: "k"}}),
		"entry":      encodeEntry(raft.Entry{Term: 3, Index: 17, Data: []byte("data")}),
		"hard state": encodeHardState(raft.HardState{Term: 9, Vote: 3, Commit: 300}),
	}
	decode := map[string]func([]byte) error{
		"command":    func(b []byte) error { _, err := decodeCommand(b); return err },
		"release":    func(b []byte) error { _, err := decodeCommand(b); return err },
		"keyed":      func(b []byte) error { _, err := decodeCommand(b); return err },
		"hand-over":  func(b []byte) error { _, err := decodeCommand(b); return err },
		"entry":      func(b []byte) error { _, err := decodeEntry(b); return err },
		"hard state": func(b []byte) error { _, err := decodeHardState(b); return err },
	}
	for name, b := range records { //detlint:sorted (test cases are independent)
		for n := 0; n < len(b); n++ {
			if decode[name](b[:n]) == nil {
				t.Errorf("%s: a %d-byte prefix of %d decoded", name, n, len(b))
			}
		}
		if decode[name](append(append([]byte{}, b...), 0)) == nil {
			t.Errorf("%s: trailing bytes decoded", name)
		}
	}
}

// FuzzDecodeCommand: what decodes re-encodes to the same command, and
// the follower's check (which builds no string) accepts exactly what
// decodes, of a kind and TTLs a replica can apply.
func FuzzDecodeCommand(f *testing.F) {
	f.Add(encodeCommand(Command{Kind: CmdAcquire, Resource: "r", Client: "c", TTL: time.Second}))
	f.Add(encodeCommand(Command{Kind: CmdAcquire, Resource: "r", Client: "c", TTL: time.Second, Request: 5, Key: "k"}))
	f.Add(encodeCommand(Command{Kind: CmdRelease, Resource: "r", Client: "c", Token: 4, RequestID: "id"}))
	f.Add(encodeCommand(Command{Kind: CmdRelease, Resource: "r1", Client: "c1", Token: 4, Request: 6, Next: HandOver{Client: "w", TTL: time.Second, Request: 5, Key: "k"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		applicable := err == nil && c.Kind >= CmdAcquire && c.Kind <= CmdExpire && c.TTL >= 0 && c.Next.TTL >= 0
		if checked := checkEntries(raft.Message{Entries: []raft.Entry{{Index: 1, Data: b}}}) == nil; checked != applicable {
			t.Fatalf("checkEntries passes %x: %v; it decodes to an applicable command: %v (%+v, %v)", b, checked, applicable, c, err)
		}
		if err == nil {
			if again, err := decodeCommand(encodeCommand(c)); err != nil || again != c {
				t.Fatalf("%+v does not round-trip", c)
			}
		}
	})
}

func TestLogKeySortsByIndex(t *testing.T) {
	for _, c := range []struct {
		index uint64
		want  string
	}{{1, "raft/log/00000000000000000001"}, {1234567, "raft/log/00000000000001234567"}, {^uint64(0), "raft/log/18446744073709551615"}} {
		if got := logKey(c.index); got != c.want {
			t.Errorf("logKey(%d) = %q, want %q", c.index, got, c.want)
		}
	}
}

// TestCommandFlagsStayZero: the command encoding keeps version 1's flags
// varint, 0 for every command without a Key (each entry's digest, and so
// every trace hash, is over these bytes), and refuses any other flag, or
// the key flag with no key after the fields (an older build's takeover
// flag, bit 0, included).
func TestCommandFlagsStayZero(t *testing.T) {
	b := encodeCommand(Command{Kind: CmdAcquire, Resource: "r", Client: "c", TTL: time.Second, Request: 5})
	if len(b) < 3 || b[0] != codecVersion || b[1] != byte(CmdAcquire) || b[2] != 0 {
		t.Fatalf("encoding %x: want version, kind, a zero flags byte", b)
	}
	for _, flags := range []byte{1, 2, 0x7f} {
		set := append([]byte{}, b...)
		set[2] = flags
		if _, err := decodeCommand(set); err == nil {
			t.Errorf("a command with flags %#x decoded", flags)
		}
	}
}

// TestCodecRefusesAFlaggedEmptyField: each command has one encoding (an
// entry's digest is over its bytes): a flag whose field follows empty is
// the encoding of no command, refused like the key flag's.
func TestCodecRefusesAFlaggedEmptyField(t *testing.T) {
	b := encodeCommand(Command{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3})
	for _, flags := range []byte{flagRequestID, flagKey} {
		set := append([]byte{}, b...)
		set[2] = flags
		set = append(set, 0) // the flagged field, empty
		if c, err := decodeCommand(set); err == nil {
			t.Errorf("flags %#x with an empty field decoded to %+v", flags, c)
		}
	}
}

// TestCodecHandOverOnlyOnARelease: a hand-over (Command.Next) is written
// only when it names a waiter, and decodes only on a release, with a
// waiter named: any other command carrying one, or one naming nobody, is
// the encoding of no command.
func TestCodecHandOverOnlyOnARelease(t *testing.T) {
	plain := Command{Kind: CmdRelease, Resource: "r", Client: "c", Token: 9, Request: 3}
	if b := encodeCommand(plain); b[2] != 0 {
		t.Fatalf("a release without a hand-over has flags %#x, want 0 (its bytes unchanged)", b[2])
	}
	with := plain
	with.Next = HandOver{Client: "w", TTL: time.Second, Request: 4}
	b := encodeCommand(with)
	if b[2] != flagNext {
		t.Fatalf("a release with a hand-over has flags %#x, want %#x", b[2], flagNext)
	}
	for _, k := range []CommandKind{CmdAcquire, CmdRenew, CmdExpire} {
		bad := append([]byte{}, b...)
		bad[1] = byte(k)
		if c, err := decodeCommand(bad); err == nil {
			t.Errorf("kind %d with a hand-over decoded to %+v", k, c)
		}
	}
	nobody := append(encodeCommand(plain), 0, 0, 0, 0, 0) // an empty waiter's fields
	nobody[2] = flagNext
	if c, err := decodeCommand(nobody); err == nil {
		t.Errorf("a hand-over to nobody decoded to %+v", c)
	}
	if err := checkEntries(raft.Message{Entries: []raft.Entry{{Index: 1, Data: encodeCommand(Command{Kind: CmdRelease, Resource: "r", Client: "c",
		Next: HandOver{Client: "w", TTL: -time.Second}})}}}); err == nil {
		t.Error("a hand-over with a negative TTL passed checkEntries")
	}
}
