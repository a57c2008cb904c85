package wire

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/lockservice/redlock"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

const max64 = math.MaxUint64

// samples holds messages of every type, with the boundary values a real
// run can reach: tokens and ids near 2^63 and 2^64-1, negative durations
// and values, empty and non-ASCII strings, nil and empty entry data.
func samples() []process.Message {
	return []process.Message{
		lockservice.AcquireRequest{Resource: "r", Client: "c1", TTL: 2 * time.Second, Request: 1},
		lockservice.AcquireRequest{Resource: "r", Client: "c1", TTL: 2 * time.Second, Request: 1, Wait: 3 * time.Second},
		lockservice.AcquireRequest{Resource: "", Client: "ü\x00", TTL: -1, Request: max64},
		lockservice.AcquireRequest{Resource: strings.Repeat("x", 300), Client: "c", TTL: math.MaxInt64, Request: 1 << 63},
		lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: time.Second, Request: 7<<32 | 3, Key: "req-7"},
		lockservice.RenewRequest{Resource: "r", Client: "c", Token: 1<<63 - 1, Request: 1 << 63},
		lockservice.RenewRequest{Token: max64, Request: max64},
		lockservice.RenewRequest{Resource: "r", Client: "c", Token: 5, Request: 6, TTL: 1500 * time.Millisecond},
		lockservice.RenewRequest{TTL: math.MinInt64},
		lockservice.ReleaseRequest{Resource: "r", Client: "c", Token: 1 << 63, Request: 7},
		lockservice.ReleaseRequest{Resource: "r", Client: "c", Token: 3, Request: 8, RequestID: "rel-ü"},
		lockservice.LockReply{Request: max64, Status: lockservice.Granted, Token: max64, TTL: time.Second},
		lockservice.LockReply{Request: 3, Status: lockservice.NotLeader, Leader: lockservice.NoLeader},
		lockservice.LockReply{Request: 4, Status: lockservice.Invalid, Err: "ttl: must be positive", Leader: math.MaxInt64},
		lockservice.LockReply{Status: lockservice.Stale, Leader: math.MinInt64, TTL: math.MinInt64},
		lockservice.WriteRequest{Resource: "r", Client: "c", Token: max64 - 1, Value: math.MinInt64, Request: 9},
		lockservice.WriteRequest{Value: math.MaxInt64},
		lockservice.WriteReply{Request: 9, Accepted: true, Highest: max64},
		lockservice.WriteReply{Request: 10, Accepted: false, Highest: 1 << 63, Err: "stale"},
		lockservice.ReadRequest{Resource: "r", Client: "c", Request: max64},
		lockservice.ReadReply{Request: 1, Value: -5, Token: max64, Err: ""},
		lockservice.ReadReply{Err: "no such resource"},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgVote, From: 1, To: 3, Term: max64, LogTerm: 1 << 63, Index: max64 - 1}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgApp, From: 2, To: 1, Term: 5, LogTerm: 4, Index: 10, Commit: 9,
			Entries: []raft.Entry{{Term: 5, Index: 11, Data: nil}, {Term: 5, Index: 12, Data: []byte{}}, {Term: 5, Index: 13, Data: []byte("cmd\x00\xff")}, {Term: max64, Index: max64, Data: bytes.Repeat([]byte{7}, 1000)}}}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgAppResp, From: max64, To: 1 << 63, Term: 5, Index: 3, LogTerm: 2, Reject: true, RejectHint: max64}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgHeartbeatResp}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgVote, From: 2, To: 3, Term: 7, LogTerm: 6, Index: 40, Transfer: true}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgTimeoutNow, From: 1, To: 2, Term: 6}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgSnap, From: 1, To: 2, Term: 6, Commit: 90,
			Snapshot: &raft.Snapshot{Index: max64, Term: 6, Data: []byte(`{"table":{"last_token":77}}`)}}},
		reference.RaftMessage{M: raft.Message{Type: raft.MsgSnap, From: 1, To: 2, Term: 6, Snapshot: &raft.Snapshot{Index: 1, Term: 1, Data: []byte{}}}},
		redlock.RedlockSet{Resource: "r", Value: max64, TTL: time.Second, Attempt: 1 << 63},
		redlock.RedlockExtend{Resource: "r", Value: 1, TTL: -time.Second, Attempt: max64},
		redlock.RedlockDel{Resource: "r", Value: max64, Attempt: 3},
		redlock.RedlockReply{Attempt: max64, OK: true, Holder: max64},
		redlock.RedlockReply{Attempt: 0, OK: false, Holder: 0},
		lockdsim.Eval{ID: max64, Script: "return 1", Keys: []string{"k{r}:lock", ""}, Args: []string{"ü", "500"}},
		lockdsim.Eval{ID: 1},
		lockdsim.EvalReply{ID: 2, Value: []any{int64(1), "18446744073709551615", int64(-2), nil, []any{"x"}}},
		lockdsim.EvalReply{ID: 3, Value: int64(math.MinInt64)},
		lockdsim.EvalReply{ID: 4, Err: "ERR fence counter exhausted", Run: max64},
		lockdsim.Subscribe{Channel: "fencesim:wake", Session: max64},
		lockdsim.Subscribed{Channel: "fencesim:wake", Session: 1, Run: max64},
		lockdsim.Published{Channel: "fencesim:wake", Payload: "r\na 1 500 60000\n3 500 1733318400000", Session: 7},
	}
}

// TestRoundTrip: every sample decodes to a value deeply equal to itself
// (nil entry data stays nil, empty stays empty), and the decoded message
// has the same fingerprint, so a real trace and a simulated one agree.
func TestRoundTrip(t *testing.T) {
	var c Codec
	for _, m := range samples() {
		b, err := c.AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got, err := c.DecodeMessage(b)
		if err != nil {
			t.Fatalf("%#v: decode: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip changed the message:\n got %#v\nwant %#v", got, m)
		}
		if got.Fingerprint() != m.Fingerprint() {
			t.Errorf("%T: fingerprint changed by the round trip", m)
		}
		// A prefix of an encoding is never a message: truncation on the
		// wire is detected.
		for i := 0; i < len(b); i++ {
			if _, err := c.DecodeMessage(b[:i]); err == nil {
				t.Errorf("%T: its first %d of %d bytes decode", m, i, len(b))
				break
			}
		}
		if _, err := c.DecodeMessage(append(b, 0)); err == nil {
			t.Errorf("%T: a trailing byte was accepted", m)
		}
	}
}

// TestDecodedDataIsCopied: the transport reuses its read buffer, so a
// decoded Raft entry must not alias it.
func TestDecodedDataIsCopied(t *testing.T) {
	var c Codec
	m := reference.RaftMessage{M: raft.Message{Type: raft.MsgApp, Entries: []raft.Entry{{Term: 1, Index: 1, Data: []byte("abc")}}}}
	b, _ := c.AppendMessage(nil, m)
	got, err := c.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if d := got.(reference.RaftMessage).M.Entries[0].Data; string(d) != "abc" {
		t.Fatalf("entry data %q changed with the input buffer", d)
	}
}

// TestTagsAreStable pins each type's tag byte: they are the wire format.
func TestTagsAreStable(t *testing.T) {
	want := map[string]byte{"AcquireRequest": 1, "RenewRequest": 2, "ReleaseRequest": 3, "LockReply": 4,
		"WriteRequest": 5, "WriteReply": 6, "ReadRequest": 7, "ReadReply": 8, "RaftMessage": 9,
		"RedlockSet": 40, "RedlockExtend": 41, "RedlockDel": 42, "RedlockReply": 43, "Eval": 50, "EvalReply": 51,
		"Subscribe": 52, "Subscribed": 53, "Published": 54}
	for _, m := range samples() {
		b, _ := Codec{}.AppendMessage(nil, m)
		name := reflect.TypeOf(m).Name()
		if b[0] != want[name] {
			t.Errorf("%s encodes with tag %d, want %d", name, b[0], want[name])
		}
	}
}

// TestEveryMessageTypeHasAnEncoding parses lockservice's non-test sources
// for the types with a Fingerprint method — the messages a process may
// send — and fails if one has no sample here, so a new message type cannot
// be added without a wire encoding and a round-trip test.
func TestEveryMessageTypeHasAnEncoding(t *testing.T) {
	var found []string
	// The whole tree, so that the scan survives lockservice's split into
	// subpackages.
	err := filepath.WalkDir("../lockservice", func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Fingerprint" {
				continue
			}
			typ := fn.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			found = append(found, typ.(*ast.Ident).Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 10 {
		t.Fatalf("found only %v: the source scan is broken", found)
	}
	var have []string
	for _, m := range samples() {
		have = append(have, reflect.TypeOf(m).Name())
	}
	for _, name := range found {
		if !slices.Contains(have, name) {
			t.Errorf("lockservice.%s is a message (it has Fingerprint) but wire has no sample of it: add its encoding, tag and a sample", name)
		}
	}
}

type unknown struct{}

func (unknown) Fingerprint() uint64 { return 0 }

func TestUnknownTypeIsAnError(t *testing.T) {
	if _, err := (Codec{}).AppendMessage(nil, unknown{}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("err %v, want ErrUnknownType", err)
	}
	for _, b := range [][]byte{nil, {0}, {10}, {255}} {
		if _, err := (Codec{}).DecodeMessage(b); err == nil {
			t.Errorf("%v decoded", b)
		}
	}
}

// TestHugeCountsAreRefusedCheaply: an entry count or string length that
// the bytes cannot hold is refused, not allocated.
func TestHugeCountsAreRefusedCheaply(t *testing.T) {
	b := []byte{TagRaftMessage, 5, 1, 2, 3, 4, 5}
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0x0f) // 2^32-1 entries
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := (Codec{}).DecodeMessage(b); err == nil {
			t.Fatal("decoded")
		}
	})
	if allocs > 10 {
		t.Fatalf("%v allocations refusing a lying entry count", allocs)
	}
	s := append([]byte{TagReadRequest}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	if _, err := (Codec{}).DecodeMessage(s); err == nil {
		t.Fatal("a 2^63-byte string decoded")
	}
}

// FuzzDecode: decoding arbitrary bytes never panics, and whatever decodes
// encodes back to the same bytes (the encoding is canonical), so a message
// a peer sent is exactly the one the process receives.
func FuzzDecode(f *testing.F) {
	for _, m := range samples() {
		b, _ := Codec{}.AppendMessage(nil, m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Codec{}.DecodeMessage(b)
		if err != nil {
			return
		}
		again, err := Codec{}.AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		if !bytes.Equal(again, b) {
			// Varints have one shortest form; a longer one decodes too
			// (binary.Uvarint accepts padding), so compare meanings.
			m2, err := Codec{}.DecodeMessage(again)
			if err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-encoding %x gave %x, decoding to %v (%v)", b, again, fmt.Sprintf("%#v", m2), err)
			}
		}
	})
}

func BenchmarkAppendDecodeRaftApp(b *testing.B) {
	m := reference.RaftMessage{M: raft.Message{Type: raft.MsgApp, From: 1, To: 2, Term: 5, Index: 100, LogTerm: 5, Commit: 99,
		Entries: []raft.Entry{{Term: 5, Index: 101, Data: make([]byte, 40)}}}}
	var c Codec
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = c.AppendMessage(buf[:0], m)
		if _, err := c.DecodeMessage(buf); err != nil {
			b.Fatal(err)
		}
	}
}
