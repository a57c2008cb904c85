// Package wire is the binary encoding of the reference lock service's
// messages for the real runtime's transport (realrt.Codec): every message
// type that crosses the network in the simulator — client requests and
// replies, fenced-store requests and replies, Raft messages between
// replicas, the Redlock contrast's node messages and the simulated
// lockd's script calls.
//
// An encoding is one type tag byte, then the message's fields in
// declaration order: unsigned integers (tokens, request ids, terms,
// indexes) as uvarints, so a uint64 keeps all 64 bits; signed ones
// (durations in nanoseconds, node ids, values) as zigzag varints; bools as
// one byte, 0 or 1; strings and byte slices as a uvarint length and the
// bytes. An encoding must be consumed exactly: trailing bytes are an error.
//
// The tags are part of the wire format and never change or get reused; a
// new message type takes a new tag. They are the numbers the messages'
// Fingerprint methods fold in first, so one number names a type in traces
// and on the wire:
//
//	 1 lockservice.AcquireRequest   2 RenewRequest      3 ReleaseRequest
//	 4 lockservice.LockReply
//	 5 lockservice.WriteRequest     6 WriteReply
//	 7 lockservice.ReadRequest      8 ReadReply
//	 9 reference.RaftMessage (a raft.Message with its entries and, in a
//	   MsgSnap, its snapshot)
//	40 redlock.RedlockSet      41 RedlockExtend     42 RedlockDel
//	43 redlock.RedlockReply
//	50 lockdsim.Eval           51 lockdsim.EvalReply (a script reply: a kind
//	   byte — 0 nil, 1 integer, 2 string, 3 array — then its value; then
//	   the error and the Redis run)
//	52 lockdsim.Subscribe      53 lockdsim.Subscribed
//	54 lockdsim.Published
//
// Decoding never panics and never allocates more than the input's length
// justifies, whatever the bytes (FuzzDecode checks it): a peer that sends
// garbage gets an error and its connection closed, nothing else.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/lockdsim"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/lockservice/redlock"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// The type tags (see the package doc).
const (
	TagAcquireRequest = 1
	TagRenewRequest   = 2
	TagReleaseRequest = 3
	TagLockReply      = 4
	TagWriteRequest   = 5
	TagWriteReply     = 6
	TagReadRequest    = 7
	TagReadReply      = 8
	TagRaftMessage    = 9
	TagRedlockSet     = 40
	TagRedlockExtend  = 41
	TagRedlockDel     = 42
	TagRedlockReply   = 43
	TagEval           = 50
	TagEvalReply      = 51
	TagSubscribe      = 52
	TagSubscribed     = 53
	TagPublished      = 54
)

// maxValueDepth bounds the nesting of a script reply's arrays.
const maxValueDepth = 8

// Codec is the lock service's realrt.Codec. Its zero value is ready.
type Codec struct{}

// ErrUnknownType is wrapped by the error of AppendMessage for a message
// type this package does not encode.
var ErrUnknownType = errors.New("wire: message type has no encoding")

// AppendMessage appends m's encoding to b.
func (Codec) AppendMessage(b []byte, m process.Message) ([]byte, error) {
	switch m := m.(type) {
	case lockservice.AcquireRequest:
		b = append(b, TagAcquireRequest)
		b = appendString(b, m.Resource)
		b = appendString(b, m.Client)
		b = binary.AppendVarint(b, int64(m.TTL))
		b = binary.AppendUvarint(b, m.Request)
		b = appendString(b, m.Key)
		b = binary.AppendVarint(b, int64(m.Wait))
	case lockservice.RenewRequest:
		b = append(b, TagRenewRequest)
		b = appendTokenRequest(b, m.Resource, m.Client, m.Token, m.Request)
		b = binary.AppendVarint(b, int64(m.TTL))
	case lockservice.ReleaseRequest:
		b = append(b, TagReleaseRequest)
		b = appendTokenRequest(b, m.Resource, m.Client, m.Token, m.Request)
		b = appendString(b, m.RequestID)
	case lockservice.LockReply:
		b = append(b, TagLockReply)
		b = binary.AppendUvarint(b, m.Request)
		b = binary.AppendUvarint(b, uint64(m.Status))
		b = binary.AppendUvarint(b, m.Token)
		b = binary.AppendVarint(b, int64(m.TTL))
		b = appendString(b, m.Err)
		b = binary.AppendVarint(b, int64(m.Leader))
		b = binary.AppendVarint(b, int64(m.Waited))
	case lockservice.WriteRequest:
		b = append(b, TagWriteRequest)
		b = appendTokenRequest(b, m.Resource, m.Client, m.Token, m.Request)
		b = binary.AppendVarint(b, m.Value)
	case lockservice.WriteReply:
		b = append(b, TagWriteReply)
		b = binary.AppendUvarint(b, m.Request)
		b = appendBool(b, m.Accepted)
		b = binary.AppendUvarint(b, m.Highest)
		b = appendString(b, m.Err)
	case lockservice.ReadRequest:
		b = append(b, TagReadRequest)
		b = appendString(b, m.Resource)
		b = appendString(b, m.Client)
		b = binary.AppendUvarint(b, m.Request)
	case lockservice.ReadReply:
		b = append(b, TagReadReply)
		b = binary.AppendUvarint(b, m.Request)
		b = binary.AppendVarint(b, m.Value)
		b = binary.AppendUvarint(b, m.Token)
		b = appendString(b, m.Err)
	case reference.RaftMessage:
		b = append(b, TagRaftMessage)
		b = appendRaft(b, &m.M)
	case redlock.RedlockSet:
		b = append(b, TagRedlockSet)
		b = appendRedlock(b, m.Resource, m.Value, m.TTL, m.Attempt)
	case redlock.RedlockExtend:
		b = append(b, TagRedlockExtend)
		b = appendRedlock(b, m.Resource, m.Value, m.TTL, m.Attempt)
	case redlock.RedlockDel:
		b = append(b, TagRedlockDel)
		b = appendString(b, m.Resource)
		b = binary.AppendUvarint(b, m.Value)
		b = binary.AppendUvarint(b, m.Attempt)
	case redlock.RedlockReply:
		b = append(b, TagRedlockReply)
		b = binary.AppendUvarint(b, m.Attempt)
		b = appendBool(b, m.OK)
		b = binary.AppendUvarint(b, m.Holder)
	case lockdsim.Eval:
		b = append(b, TagEval)
		b = binary.AppendUvarint(b, m.ID)
		b = appendString(b, m.Script)
		b = appendStrings(b, m.Keys)
		b = appendStrings(b, m.Args)
	case lockdsim.EvalReply:
		b = append(b, TagEvalReply)
		b = binary.AppendUvarint(b, m.ID)
		var err error
		if b, err = appendValue(b, m.Value, 0); err != nil {
			return b, err
		}
		b = appendString(b, m.Err)
		b = binary.AppendUvarint(b, m.Run)
	case lockdsim.Subscribe:
		b = append(b, TagSubscribe)
		b = appendString(b, m.Channel)
		b = binary.AppendUvarint(b, m.Session)
	case lockdsim.Subscribed:
		b = append(b, TagSubscribed)
		b = appendString(b, m.Channel)
		b = binary.AppendUvarint(b, m.Session)
		b = binary.AppendUvarint(b, m.Run)
	case lockdsim.Published:
		b = append(b, TagPublished)
		b = appendString(b, m.Channel)
		b = appendString(b, m.Payload)
		b = binary.AppendUvarint(b, m.Session)
	default:
		return b, fmt.Errorf("%w: %T", ErrUnknownType, m)
	}
	return b, nil
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// appendValue encodes a script reply: nil, int64, string or []any of them.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, 0), nil
	case int64:
		return binary.AppendVarint(append(b, 1), v), nil
	case string:
		return appendString(append(b, 2), v), nil
	case []any:
		if depth >= maxValueDepth {
			return b, fmt.Errorf("%w: a script reply nested deeper than %d", ErrUnknownType, maxValueDepth)
		}
		b = binary.AppendUvarint(append(b, 3), uint64(len(v)))
		for _, e := range v {
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("%w: a script reply of type %T", ErrUnknownType, v)
}

func appendTokenRequest(b []byte, resource, client string, token, request uint64) []byte {
	b = appendString(b, resource)
	b = appendString(b, client)
	b = binary.AppendUvarint(b, token)
	return binary.AppendUvarint(b, request)
}

func appendRedlock(b []byte, resource string, value uint64, ttl time.Duration, attempt uint64) []byte {
	b = appendString(b, resource)
	b = binary.AppendUvarint(b, value)
	b = binary.AppendVarint(b, int64(ttl))
	return binary.AppendUvarint(b, attempt)
}

// appendRaft encodes a Raft message. An entry's Data is written as its
// length + 1, and 0 for nil: a nil Data is a new leader's empty entry,
// which the replica must tell apart from a command with empty data.
func appendRaft(b []byte, m *raft.Message) []byte {
	b = binary.AppendUvarint(b, uint64(m.Type))
	b = binary.AppendUvarint(b, uint64(m.From))
	b = binary.AppendUvarint(b, uint64(m.To))
	b = binary.AppendUvarint(b, m.Term)
	b = binary.AppendUvarint(b, m.LogTerm)
	b = binary.AppendUvarint(b, m.Index)
	b = binary.AppendUvarint(b, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		b = binary.AppendUvarint(b, e.Term)
		b = binary.AppendUvarint(b, e.Index)
		if e.Data == nil {
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(e.Data))+1)
			b = append(b, e.Data...)
		}
	}
	b = binary.AppendUvarint(b, m.Commit)
	b = appendBool(b, m.Reject)
	b = binary.AppendUvarint(b, m.RejectHint)
	b = appendBool(b, m.Transfer)
	// A MsgSnap's snapshot: present, then index, term and the state.
	b = appendBool(b, m.Snapshot != nil)
	if s := m.Snapshot; s != nil {
		b = binary.AppendUvarint(b, s.Index)
		b = binary.AppendUvarint(b, s.Term)
		b = binary.AppendUvarint(b, uint64(len(s.Data)))
		b = append(b, s.Data...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// errCorrupt is wrapped by every decoding error.
var errCorrupt = errors.New("wire: corrupt message")

// DecodeMessage decodes one message encoded by AppendMessage. The result
// shares no memory with b.
func (Codec) DecodeMessage(b []byte) (process.Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", errCorrupt)
	}
	r := reader{b: b[1:]}
	var m process.Message
	switch tag := b[0]; tag {
	case TagAcquireRequest:
		m = lockservice.AcquireRequest{Resource: r.string(), Client: r.string(), TTL: time.Duration(r.varint()), Request: r.uvarint(), Key: r.string(), Wait: time.Duration(r.varint())}
	case TagRenewRequest:
		m = lockservice.RenewRequest{Resource: r.string(), Client: r.string(), Token: r.uvarint(), Request: r.uvarint(), TTL: time.Duration(r.varint())}
	case TagReleaseRequest:
		m = lockservice.ReleaseRequest{Resource: r.string(), Client: r.string(), Token: r.uvarint(), Request: r.uvarint(), RequestID: r.string()}
	case TagLockReply:
		rep := lockservice.LockReply{Request: r.uvarint()}
		rep.Status = lockservice.Status(r.small(255))
		rep.Token = r.uvarint()
		rep.TTL = time.Duration(r.varint())
		rep.Err = r.string()
		rep.Leader = process.NodeID(r.varint())
		rep.Waited = time.Duration(r.varint())
		m = rep
	case TagWriteRequest:
		m = lockservice.WriteRequest{Resource: r.string(), Client: r.string(), Token: r.uvarint(), Request: r.uvarint(), Value: r.varint()}
	case TagWriteReply:
		m = lockservice.WriteReply{Request: r.uvarint(), Accepted: r.bool(), Highest: r.uvarint(), Err: r.string()}
	case TagReadRequest:
		m = lockservice.ReadRequest{Resource: r.string(), Client: r.string(), Request: r.uvarint()}
	case TagReadReply:
		m = lockservice.ReadReply{Request: r.uvarint(), Value: r.varint(), Token: r.uvarint(), Err: r.string()}
	case TagRaftMessage:
		m = reference.RaftMessage{M: r.raft()}
	case TagRedlockSet:
		m = redlock.RedlockSet{Resource: r.string(), Value: r.uvarint(), TTL: time.Duration(r.varint()), Attempt: r.uvarint()}
	case TagRedlockExtend:
		m = redlock.RedlockExtend{Resource: r.string(), Value: r.uvarint(), TTL: time.Duration(r.varint()), Attempt: r.uvarint()}
	case TagRedlockDel:
		m = redlock.RedlockDel{Resource: r.string(), Value: r.uvarint(), Attempt: r.uvarint()}
	case TagRedlockReply:
		m = redlock.RedlockReply{Attempt: r.uvarint(), OK: r.bool(), Holder: r.uvarint()}
	case TagEval:
		m = lockdsim.Eval{ID: r.uvarint(), Script: r.string(), Keys: r.strings(), Args: r.strings()}
	case TagEvalReply:
		m = lockdsim.EvalReply{ID: r.uvarint(), Value: r.value(0), Err: r.string(), Run: r.uvarint()}
	case TagSubscribe:
		m = lockdsim.Subscribe{Channel: r.string(), Session: r.uvarint()}
	case TagSubscribed:
		m = lockdsim.Subscribed{Channel: r.string(), Session: r.uvarint(), Run: r.uvarint()}
	case TagPublished:
		m = lockdsim.Published{Channel: r.string(), Payload: r.string(), Session: r.uvarint()}
	default:
		return nil, fmt.Errorf("%w: unknown type tag %d", errCorrupt, tag)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w (type tag %d): %s", errCorrupt, b[0], r.err)
	}
	return m, nil
}

// reader decodes fields in order, remembering the first error; after one,
// every read returns a zero value. Go evaluates a composite literal's
// fields in order, so the decode cases above read fields left to right.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *reader) uvarint() uint64 { return readNumber(r, binary.Uvarint) }

func (r *reader) varint() int64 { return readNumber(r, binary.Varint) }

// readNumber reads one number with decode (binary.Uvarint or Varint).
func readNumber[T uint64 | int64](r *reader, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.fail("bad varint at %d bytes from the end", len(r.b))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// small reads a uvarint that must not exceed max (an enum).
func (r *reader) small(max uint64) uint64 {
	v := r.uvarint()
	if v > max {
		r.fail("value %d out of range 0..%d", v, max)
		return 0
	}
	return v
}

func (r *reader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail("bad bool")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// bytes reads n bytes, n checked against what is left before anything is
// allocated.
func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("length %d exceeds the %d bytes left", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes(r.uvarint())) }

func (r *reader) raft() raft.Message {
	m := raft.Message{Type: raft.MessageType(r.small(255)), From: raft.ID(r.uvarint()), To: raft.ID(r.uvarint()),
		Term: r.uvarint(), LogTerm: r.uvarint(), Index: r.uvarint()}
	n := r.uvarint()
	// Each entry takes at least 3 bytes, so a count beyond a third of what
	// is left is a lie: refuse it before allocating for it.
	if n > uint64(len(r.b))/3 {
		r.fail("%d entries cannot fit in %d bytes", n, len(r.b))
	}
	if r.err == nil && n > 0 {
		m.Entries = make([]raft.Entry, n)
		for i := range m.Entries {
			e := &m.Entries[i]
			e.Term, e.Index = r.uvarint(), r.uvarint()
			if l := r.uvarint(); l > 0 {
				e.Data = append([]byte{}, r.bytes(l-1)...) // copied: the transport reuses its buffer
			}
		}
	}
	m.Commit = r.uvarint()
	m.Reject = r.bool()
	m.RejectHint = r.uvarint()
	m.Transfer = r.bool()
	if r.bool() {
		s := &raft.Snapshot{Index: r.uvarint(), Term: r.uvarint()}
		s.Data = append([]byte{}, r.bytes(r.uvarint())...) // copied: the transport reuses its buffer
		m.Snapshot = s
	}
	return m
}

// strings reads a count and that many strings; each takes at least a
// byte, so a count beyond what is left is refused before allocating.
func (r *reader) strings() []string {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("%d strings cannot fit in %d bytes", n, len(r.b))
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

// value reads a script reply (see appendValue).
func (r *reader) value(depth int) any {
	switch kind := r.small(3); {
	case r.err != nil || kind == 0:
		return nil
	case kind == 1:
		return r.varint()
	case kind == 2:
		return r.string()
	}
	n := r.uvarint()
	if depth >= maxValueDepth || n > uint64(len(r.b)) {
		r.fail("an array of %d values at depth %d in %d bytes", n, depth, len(r.b))
		return nil
	}
	out := make([]any, n)
	for i := range out {
		out[i] = r.value(depth + 1)
	}
	return out
}
