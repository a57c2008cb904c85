package filedisk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// The log is a run of frames. A frame is sealed as lockservice seals a
// value — a big-endian uint32 payload length and a CRC-32C of the payload
// in front — so a torn or damaged frame is detected:
//
//	frame   = len:uint32 crc:uint32 payload
//	payload = kind:uint8 seq:uint64 op*
//	op      = code:uint8 uvarint(len(key)) key [uvarint(len(value)) value]
//
// A batch is what one Sync made durable (or, for kindSnapshot, the whole
// state a compaction saved): one or more frames with the same kind and seq,
// the last of them flagged final. A batch counts only once its final frame
// is read, so a Sync is atomic even when its batch spans several frames.
// Ops never straddle frames, so every frame decodes on its own. A
// segment's frames may be followed by zeros (preallocated: compact.go);
// a frame's length is never zero, so zeros where a frame would start end
// the segment.

const (
	frameHeader   = 8 // uint32 length, uint32 CRC-32C
	payloadHeader = 9 // kind, seq

	kindBatch    byte = 1 // the writes of one Sync
	kindSnapshot byte = 2 // the whole synced state, at the head of a snap- segment
	kindFinal    byte = 0x80

	opPut    byte = 1
	opAppend byte = 2
	opDelete byte = 3

	// maxKeyBytes and maxValueBytes bound what a process may store, so a
	// frame's length field has a bound a reader can check before trusting it.
	maxKeyBytes   = 1 << 16
	maxValueBytes = 1 << 30
	maxOpBytes    = 1 + binary.MaxVarintLen64 + maxKeyBytes + binary.MaxVarintLen64 + maxValueBytes
	maxPayload    = payloadHeader + maxOpBytes

	// defaultFramePayload is where a batch is split into a new frame: big
	// enough that an ordinary Sync is one frame, small enough that the
	// snapshot streams through a small buffer.
	defaultFramePayload = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameWriter encodes a batch into frames of about limit payload bytes.
// With out set, each finished frame is written there and the buffer reused
// (the snapshot streams); without, frames accumulate in buf (a Sync's
// batch is written with one write(2)).
type frameWriter struct {
	buf   []byte
	start int // offset in buf of the frame being filled
	kind  byte
	seq   uint64
	limit int
	ops   int // ops in the batch so far
	out   io.Writer
	err   error
}

func (w *frameWriter) begin(buf []byte, kind byte, seq uint64, limit int, out io.Writer) {
	*w = frameWriter{buf: buf[:0], kind: kind, seq: seq, limit: limit, out: out}
	w.openFrame()
}

func (w *frameWriter) openFrame() {
	w.start = len(w.buf)
	w.buf = append(w.buf, make([]byte, frameHeader)...)
	w.buf = append(w.buf, w.kind)
	w.buf = binary.BigEndian.AppendUint64(w.buf, w.seq)
}

// op adds one op, starting a new frame first if this one would outgrow
// the limit (an op larger than the limit gets a frame of its own).
func (w *frameWriter) op(code byte, key string, value []byte) {
	size := opSize(code, key, value)
	if used := len(w.buf) - w.start - frameHeader; used > payloadHeader && used+size > w.limit {
		w.closeFrame(false)
		w.openFrame()
	}
	w.buf = append(w.buf, code)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)))
	w.buf = append(w.buf, key...)
	if code != opDelete {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(value)))
		w.buf = append(w.buf, value...)
	}
	w.ops++
}

// closeFrame seals the frame being filled.
func (w *frameWriter) closeFrame(final bool) {
	f := w.buf[w.start:]
	if final {
		f[frameHeader] |= kindFinal
	}
	p := f[frameHeader:]
	binary.BigEndian.PutUint32(f[0:4], uint32(len(p)))
	binary.BigEndian.PutUint32(f[4:8], crc32.Checksum(p, castagnoli))
	if w.out != nil && w.err == nil {
		_, w.err = w.out.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

// finish seals the last frame and returns the encoded batch (empty when
// streamed to out).
func (w *frameWriter) finish() ([]byte, error) {
	w.closeFrame(true)
	return w.buf, w.err
}

// opSize is the encoded size of one op.
func opSize(code byte, key string, value []byte) int {
	n := 1 + uvarintLen(len(key)) + len(key)
	if code != opDelete {
		n += uvarintLen(len(value)) + len(value)
	}
	return n
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// readFrame reads the frame at off in data: its payload and the offset
// after it, or a description of why no intact frame starts there.
func readFrame(data []byte, off int) (payload []byte, next int, problem string) {
	rest := data[off:]
	if len(rest) < frameHeader {
		return nil, 0, fmt.Sprintf("short frame header (%d of %d bytes)", len(rest), frameHeader)
	}
	n := binary.BigEndian.Uint32(rest[0:4])
	if n < payloadHeader || n > maxPayload {
		return nil, 0, fmt.Sprintf("impossible frame length %d", n)
	}
	if uint64(n) > uint64(len(rest)-frameHeader) {
		return nil, 0, fmt.Sprintf("short frame (%d of %d payload bytes)", len(rest)-frameHeader, n)
	}
	p := rest[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(p, castagnoli) != binary.BigEndian.Uint32(rest[4:8]) {
		return nil, 0, "CRC-32C mismatch"
	}
	return p, off + frameHeader + int(n), ""
}

// splitPayload splits an intact frame's payload into its header and ops.
func splitPayload(p []byte) (kind byte, final bool, seq uint64, ops []byte, err error) {
	kind, final = p[0]&^kindFinal, p[0]&kindFinal != 0
	if kind != kindBatch && kind != kindSnapshot {
		return 0, false, 0, nil, fmt.Errorf("unknown frame kind %#x", p[0])
	}
	return kind, final, binary.BigEndian.Uint64(p[1:9]), p[payloadHeader:], nil
}

var errBadOp = errors.New("malformed op")

// nextOp decodes the first op of b.
func nextOp(b []byte) (code byte, key string, value, rest []byte, err error) {
	if len(b) == 0 {
		return 0, "", nil, nil, errBadOp
	}
	code, b = b[0], b[1:]
	if code != opPut && code != opAppend && code != opDelete {
		return 0, "", nil, nil, fmt.Errorf("%w: unknown op code %#x", errBadOp, code)
	}
	k, b, ok := lengthPrefixed(b)
	if !ok {
		return 0, "", nil, nil, errBadOp
	}
	if code != opDelete {
		if value, b, ok = lengthPrefixed(b); !ok {
			return 0, "", nil, nil, errBadOp
		}
	}
	return code, string(k), value, b, nil
}

func lengthPrefixed(b []byte) (v, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// laterFrame looks in data[from:] for an intact frame of a batch after
// seq: proof that the batch seq was finished and synced before it, so a
// damaged frame before it is not a torn write. Only candidates whose
// header and seq fit are checksummed, so the scan costs little.
func laterFrame(data []byte, from int, seq uint64) (at int, found uint64, ok bool) {
	for p := from; p+frameHeader+payloadHeader <= len(data); p++ {
		n := binary.BigEndian.Uint32(data[p:])
		if n < payloadHeader || uint64(n) > uint64(len(data)-p-frameHeader) {
			continue
		}
		k := data[p+frameHeader] &^ kindFinal
		s := binary.BigEndian.Uint64(data[p+frameHeader+1:])
		if (k != kindBatch && k != kindSnapshot) || s <= seq || s-seq > 1<<32 {
			continue
		}
		if _, _, problem := readFrame(data, p); problem == "" {
			return p, s, true
		}
	}
	return 0, 0, false
}

// Segment files are named by the seq of their first batch, in fixed-width
// hex so that names sort in log order. A wal- segment starts with batch
// seq; a snap- segment starts with a snapshot of the state after batch
// seq−1, then batches seq, seq+1, … appended as to any segment.
const (
	walPrefix  = "wal-"
	snapPrefix = "snap-"
	tmpSuffix  = ".tmp"
	lockName   = "LOCK"
)

func segmentName(prefix string, seq uint64) string {
	return fmt.Sprintf("%s%016x", prefix, seq)
}

// parseSegmentName returns the seq and kind of a segment file name.
func parseSegmentName(name string) (seq uint64, snap, ok bool) {
	var digits string
	switch {
	case strings.HasPrefix(name, walPrefix):
		digits = name[len(walPrefix):]
	case strings.HasPrefix(name, snapPrefix):
		digits, snap = name[len(snapPrefix):], true
	default:
		return 0, false, false
	}
	if len(digits) != 16 {
		return 0, false, false
	}
	seq, err := strconv.ParseUint(digits, 16, 64)
	if err != nil || seq == 0 {
		return 0, false, false
	}
	return seq, snap, true
}
