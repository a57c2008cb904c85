// Package branches reads Go's own coverage counters as a search signal:
// which basic blocks of the protocol code a run executed, and roughly how
// often (AFL's hit-count buckets). The hand-placed marks of package
// coverage name the corners someone thought of; these counters count
// every block, so a corner nobody planned still tells a guided search
// that a run went somewhere new.
//
// The counters exist only in a binary built with coverage in atomic mode,
// restricted to the code worth steering by:
//
//	go build -cover -covermode=atomic -coverpkg=github.com/fencesim/fencesim/lockservice/...,github.com/fencesim/fencesim/cmd/simrun -o simrun-cov ./cmd/simrun
//
// (atomic, because only then can the runtime clear them between runs).
// They are global to the process: a run's counters are its own only if no
// other run executes covered code at the same time, which the caller
// arranges (package scenarios runs the simulations of a branch-guided
// search one at a time).
//
// Reading them goes through runtime/coverage.WriteCounters, whose output
// is Go's counter-data file (internal/coverage/encodecounter, version 1):
// Read decodes that format and checks its magic, version and flavor, so a
// toolchain that changed it fails with an error rather than a wrong signal.
package branches

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/coverage"
	"slices"
)

// Feature is one basic block of the covered code and its hit-count bucket
// in a run: package, function and counter index as the binary numbers
// them (stable within one binary, which is all a search needs), and the
// bucket in the low byte.
type Feature uint64

// newFeature packs a block and a count's bucket.
func newFeature(pkg, fn, ctr uint32, count uint32) Feature {
	return Feature(uint64(pkg&0xffff)<<48 | uint64(fn&0xffffff)<<24 | uint64(ctr&0xffff)<<8 | uint64(Bucket(count)))
}

// Block is the feature's block without its bucket: two runs that executed
// the same block a different number of times share it.
func (f Feature) Block() uint64 { return uint64(f) >> 8 }

func (f Feature) String() string {
	return fmt.Sprintf("pkg%d.fn%d.block%d×%s", uint64(f)>>48, uint64(f)>>24&0xffffff, uint64(f)>>8&0xffff, bucketNames[f&0xff])
}

// Bucket is a hit count's class, as AFL counts them: 1, 2, 3, 4–7, 8–15,
// 16–31, 32–127, 128 and more. A block reached a different number of
// times within a class is not a new state; across classes it is (a loop
// that ran once against one that ran a hundred times).
func Bucket(n uint32) uint8 {
	switch {
	case n == 0:
		return 0
	case n <= 3:
		return uint8(n)
	case n <= 7:
		return 4
	case n <= 15:
		return 5
	case n <= 31:
		return 6
	case n <= 127:
		return 7
	}
	return 8
}

var bucketNames = [...]string{"0", "1", "2", "3", "4-7", "8-15", "16-31", "32-127", "128+"}

// Available says whether this binary carries counters that Reset can
// clear, and if not, how to build one that does.
func Available() error {
	// The runtime learns the counter mode, and can write counters, once
	// the meta-data was prepared: at start in a binary whose main package
	// is covered, only at exit in a test binary (go test -cover). Writing
	// it prepares it.
	if err := coverage.WriteMeta(io.Discard); err != nil {
		return fmt.Errorf("%v: branch coverage needs a binary built with "+
			"go build -cover -covermode=atomic -coverpkg=github.com/fencesim/fencesim/lockservice/...,github.com/fencesim/fencesim/cmd/simrun -o simrun-cov ./cmd/simrun", err)
	}
	if err := coverage.ClearCounters(); err != nil {
		return fmt.Errorf("%v: branch coverage needs a binary built with "+
			"go build -cover -covermode=atomic -coverpkg=github.com/fencesim/fencesim/lockservice/...,github.com/fencesim/fencesim/cmd/simrun -o simrun-cov ./cmd/simrun", err)
	}
	return nil
}

// Reset clears every counter, before a run (after Available said yes).
func Reset() error { return coverage.ClearCounters() }

// Reader reads the counters after a run, reusing its buffer from one
// read to the next.
type Reader struct{ buf bytes.Buffer }

// Read returns the features of the counters as they are now, sorted.
func (r *Reader) Read() ([]Feature, error) {
	r.buf.Reset()
	if err := coverage.WriteCounters(&r.buf); err != nil {
		return nil, err
	}
	return Decode(r.buf.Bytes())
}

// The counter-data file's framing (internal/coverage: CounterFileHeader,
// CounterSegmentHeader, CounterFileFooter), all little-endian.
const (
	fileHeaderSize    = 4 + 4 + 16 + 1 + 1 + 6
	segmentHeaderSize = 8 + 4 + 4
	footerSize        = 4 + 4 + 4 + 4
	counterVersion    = 1
	flavorRaw         = 1
	flavorULEB128     = 2
)

var counterMagic = [4]byte{0x00, 0x63, 0x77, 0x6d} // CovCounterMagic

// ErrFormat: the bytes are not a counter-data file this package reads.
var ErrFormat = errors.New("branches: not a Go coverage counter file of version 1")

// Decode reads a counter-data file (every segment) into the features of
// its nonzero counters, sorted and without repeats.
func Decode(b []byte) ([]Feature, error) {
	if len(b) < fileHeaderSize+footerSize || !bytes.Equal(b[:4], counterMagic[:]) ||
		binary.LittleEndian.Uint32(b[4:]) != counterVersion {
		return nil, ErrFormat
	}
	flavor, bigEndian := b[24], b[25] != 0
	if bigEndian || (flavor != flavorRaw && flavor != flavorULEB128) {
		return nil, fmt.Errorf("%w (flavor %d, big-endian %v)", ErrFormat, flavor, bigEndian)
	}
	footer := b[len(b)-footerSize:]
	if !bytes.Equal(footer[:4], counterMagic[:]) {
		return nil, fmt.Errorf("%w: no footer", ErrFormat)
	}
	segments := binary.LittleEndian.Uint32(footer[8:])
	d := decoder{b: b[:len(b)-footerSize], at: fileHeaderSize, raw: flavor == flavorRaw}
	var out []Feature
	for range segments {
		if d.at+segmentHeaderSize > len(d.b) {
			return nil, fmt.Errorf("%w: segment header past the end", ErrFormat)
		}
		h := d.b[d.at:]
		funcs := binary.LittleEndian.Uint64(h)
		skip := uint64(binary.LittleEndian.Uint32(h[8:])) + uint64(binary.LittleEndian.Uint32(h[12:]))
		if skip > uint64(len(d.b)-d.at-segmentHeaderSize) {
			return nil, fmt.Errorf("%w: string table past the end", ErrFormat)
		}
		d.at += segmentHeaderSize + int(skip)
		for range funcs {
			n, pkg, fn := d.val(), d.val(), d.val()
			if d.err == nil && uint64(n) > uint64(len(d.b)-d.at) { // every counter takes a byte at least
				d.err = fmt.Errorf("%w: %d counters past the end", ErrFormat, n)
			}
			for c := uint32(0); c < n && d.err == nil; c++ {
				if v := d.val(); v != 0 {
					out = append(out, newFeature(pkg, fn, c, v))
				}
			}
			if d.err != nil {
				return nil, d.err
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// decoder reads the values of a counter payload.
type decoder struct {
	b   []byte
	at  int
	raw bool
	err error
}

func (d *decoder) val() uint32 {
	if d.err != nil {
		return 0
	}
	if d.raw {
		if d.at+4 > len(d.b) {
			d.err = fmt.Errorf("%w: counters past the end", ErrFormat)
			return 0
		}
		v := binary.LittleEndian.Uint32(d.b[d.at:])
		d.at += 4
		return v
	}
	v, n := binary.Uvarint(d.b[d.at:])
	if n <= 0 || v > 1<<32-1 {
		d.err = fmt.Errorf("%w: a bad counter value", ErrFormat)
		return 0
	}
	d.at += n
	return uint32(v)
}
