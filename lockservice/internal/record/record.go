package record

import (
	"encoding/binary"
	"errors"
)

// The binary records of the reference and the store share one reader:
// unsigned varints and length-prefixed bytes.

var ErrCorrupt = errors.New("lockservice: corrupt record")

// Reader decodes a record, remembering the first error.
type Reader struct {
	B   []byte
	Err error
}

func (r *Reader) Uvarint() uint64 { return readNumber(r, binary.Uvarint) }

func (r *Reader) Varint() int64 { return readNumber(r, binary.Varint) }

// readNumber reads one number with decode (binary.Uvarint or Varint).
func readNumber[T uint64 | int64](r *Reader, decode func([]byte) (T, int)) T {
	if r.Err != nil {
		return 0
	}
	v, n := decode(r.B)
	if n <= 0 {
		r.Err = ErrCorrupt
		return 0
	}
	r.B = r.B[n:]
	return v
}

func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.Err != nil {
		return nil
	}
	if n > uint64(len(r.B)) {
		r.Err = ErrCorrupt
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

func (r *Reader) Done() error {
	if r.Err == nil && len(r.B) != 0 {
		r.Err = ErrCorrupt
	}
	return r.Err
}

func AppendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func AppendString(b []byte, v string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// Count reads a number of entries of at least minSize bytes each, refusing
// one the rest of the record cannot hold (so a corrupt count never sizes an
// allocation).
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B)/minSize) {
		r.Err = ErrCorrupt
		return 0
	}
	return int(n)
}

func (r *Reader) Fail(err error) {
	if r.Err == nil {
		r.Err = err
	}
}
