package branches

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"runtime/coverage"
)

// Meta names the covered code's blocks: per package (in the binary's
// numbering, the one Feature carries) its functions and their blocks'
// source lines. Decoded from runtime/coverage.WriteMeta (Go's meta-data
// file, version 1: internal/coverage/encodemeta).
type Meta struct {
	Packages []Package
}

// Package is one covered package's functions, in the binary's numbering.
type Package struct {
	Path  string
	Funcs []Func
}

// Func is one function's name, file and blocks (by counter index).
type Func struct {
	Name, File string
	Blocks     []Lines
}

// Lines are a block's first and last source line.
type Lines struct{ Start, End uint32 }

// ReadMeta returns this binary's meta-data (Available must have said yes).
func ReadMeta() (*Meta, error) {
	var b bytes.Buffer
	if err := coverage.WriteMeta(&b); err != nil {
		return nil, err
	}
	return DecodeMeta(b.Bytes())
}

// Blocks counts the covered code's blocks.
func (m *Meta) Blocks() int {
	n := 0
	for _, p := range m.Packages {
		for _, f := range p.Funcs {
			n += len(f.Blocks)
		}
	}
	return n
}

// Name says where f's block is: package, function, file and lines, and
// the bucket of its count ("reference.(*LockTable).Grant locktable.go:120
// ×4-7"); a block the meta-data does not know is named by its numbers.
func (m *Meta) Name(f Feature) string {
	pkg, fn, ctr := int(uint64(f)>>48), int(uint64(f)>>24&0xffffff), int(uint64(f)>>8&0xffff)
	if m == nil || pkg >= len(m.Packages) || fn >= len(m.Packages[pkg].Funcs) || ctr >= len(m.Packages[pkg].Funcs[fn].Blocks) {
		return f.String()
	}
	p, fd := m.Packages[pkg], m.Packages[pkg].Funcs[fn]
	l := fd.Blocks[ctr]
	lines := fmt.Sprint(l.Start)
	if l.End != l.Start {
		lines += fmt.Sprintf("-%d", l.End)
	}
	return fmt.Sprintf("%s.%s %s:%s ×%s", path.Base(p.Path), fd.Name, path.Base(fd.File), lines, bucketNames[f&0xff])
}

const (
	metaFileHeaderSize = 4 + 4 + 8 + 8 + 16 + 4 + 4 + 1 + 1 + 6
	metaPkgHeaderSize  = 4 + 4 + 4 + 4 + 16 + 1 + 3 + 4 + 4
	metaVersion        = 1
)

var metaMagic = [4]byte{0x00, 0x63, 0x76, 0x6d} // CovMetaMagic

// DecodeMeta reads a meta-data file.
func DecodeMeta(b []byte) (*Meta, error) {
	bad := func(why string, a ...any) (*Meta, error) {
		return nil, fmt.Errorf("branches: not a Go coverage meta-data file of version 1: "+why, a...)
	}
	if len(b) < metaFileHeaderSize || !bytes.Equal(b[:4], metaMagic[:]) || binary.LittleEndian.Uint32(b[4:]) != metaVersion {
		return bad("header")
	}
	entries := binary.LittleEndian.Uint64(b[16:])
	if entries > uint64(len(b)-metaFileHeaderSize)/16 {
		return bad("%d packages in %d bytes", entries, len(b))
	}
	m := &Meta{Packages: make([]Package, entries)}
	for i := range entries {
		off := binary.LittleEndian.Uint64(b[metaFileHeaderSize+8*i:])
		n := binary.LittleEndian.Uint64(b[metaFileHeaderSize+8*(entries+i):])
		if off > uint64(len(b)) || n > uint64(len(b))-off {
			return bad("package %d past the end", i)
		}
		p, err := decodePackage(b[off : off+n])
		if err != nil {
			return bad("package %d: %v", i, err)
		}
		m.Packages[i] = p
	}
	return m, nil
}

// decodePackage reads one package's meta-data symbol.
func decodePackage(b []byte) (Package, error) {
	if len(b) < metaPkgHeaderSize {
		return Package{}, fmt.Errorf("short header")
	}
	pathIdx := binary.LittleEndian.Uint32(b[8:])
	funcs := binary.LittleEndian.Uint32(b[40:])
	if uint64(funcs) > uint64(len(b)-metaPkgHeaderSize)/4 {
		return Package{}, fmt.Errorf("%d functions in %d bytes", funcs, len(b))
	}
	r := uleb{b: b, at: metaPkgHeaderSize + 4*int(funcs)}
	strs := make([]string, 0, min(r.next(), uint64(len(b))))
	for range cap(strs) {
		n := r.next()
		if r.err != nil || n > uint64(len(b)-r.at) {
			return Package{}, fmt.Errorf("string table past the end")
		}
		strs = append(strs, string(b[r.at:r.at+int(n)]))
		r.at += int(n)
	}
	str := func(i uint64) string {
		if i < uint64(len(strs)) {
			return strs[i]
		}
		r.err = fmt.Errorf("string %d of %d", i, len(strs))
		return ""
	}
	p := Package{Path: str(uint64(pathIdx)), Funcs: make([]Func, funcs)}
	for k := range funcs {
		r.at = int(binary.LittleEndian.Uint32(b[metaPkgHeaderSize+4*k:]))
		if r.at > len(b) {
			return Package{}, fmt.Errorf("function %d past the end", k)
		}
		units := r.next()
		f := Func{Name: str(r.next()), File: str(r.next())}
		if units > uint64(len(b)) {
			return Package{}, fmt.Errorf("function %d: %d blocks", k, units)
		}
		for range units {
			st, _, en, _, _ := r.next(), r.next(), r.next(), r.next(), r.next()
			f.Blocks = append(f.Blocks, Lines{Start: uint32(st), End: uint32(en)})
		}
		if r.err != nil {
			return Package{}, r.err
		}
		p.Funcs[k] = f
	}
	return p, r.err
}

// uleb reads unsigned LEB128 values (Go's uvarint), remembering the first
// error.
type uleb struct {
	b   []byte
	at  int
	err error
}

func (u *uleb) next() uint64 {
	if u.err != nil || u.at >= len(u.b) {
		if u.err == nil {
			u.err = fmt.Errorf("values past the end")
		}
		return 0
	}
	v, n := binary.Uvarint(u.b[u.at:])
	if n <= 0 {
		u.err = fmt.Errorf("a bad value")
		return 0
	}
	u.at += n
	return v
}
