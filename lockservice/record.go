package lockservice

import (
	"encoding/binary"
	"errors"
)

// The binary records of the reference and the store share one reader:
// unsigned varints and length-prefixed bytes.

var errCorrupt = errors.New("lockservice: corrupt record")

// reader decodes a record, remembering the first error.
type reader struct {
	b   []byte
	err error
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
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errCorrupt
	}
	return r.err
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func appendString(b []byte, v string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// count reads a number of entries of at least minSize bytes each, refusing
// one the rest of the record cannot hold (so a corrupt count never sizes an
// allocation).
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/minSize) {
		r.err = errCorrupt
		return 0
	}
	return int(n)
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
