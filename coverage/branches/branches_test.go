package branches

import (
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// The testdata files are what runtime/coverage.WriteCounters wrote in a
// binary built with go1.26 -cover -covermode=atomic over this package p:
//
//	func F(n int) int { s := 0; for i := 0; i < n; i++ { if i%2 == 0 { s++ } else { s-- } }; return s }
//	func G() int { return 1 }
//
// f5 after F(5) (counters cleared before), g after G() alone.
func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeRealCounters(t *testing.T) {
	got, err := Decode(read(t, "f5.covcounters"))
	if err != nil {
		t.Fatal(err)
	}
	// F's blocks: entry, loop header, loop body (5 times), the if branch
	// (i = 0, 2, 4) and the else branch (i = 1, 3).
	want := []Feature{newFeature(0, 0, 0, 1), newFeature(0, 0, 1, 1), newFeature(0, 0, 2, 5), newFeature(0, 0, 3, 3), newFeature(0, 0, 4, 2)}
	if !slices.Equal(got, want) {
		t.Fatalf("F(5): got %v, want %v", got, want)
	}
	got, err = Decode(read(t, "g.covcounters"))
	if err != nil || !slices.Equal(got, []Feature{newFeature(0, 1, 0, 1)}) {
		t.Fatalf("G(): got %v, %v; want G's one block, once (F's counters were cleared)", got, err)
	}
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	good := read(t, "f5.covcounters")
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	cases := map[string][]byte{
		"empty":       nil,
		"bad magic":   mutate(func(b []byte) []byte { b[1] = 'x'; return b }),
		"version 2":   mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 2); return b }),
		"flavor 9":    mutate(func(b []byte) []byte { b[24] = 9; return b }),
		"big-endian":  mutate(func(b []byte) []byte { b[25] = 1; return b }),
		"no footer":   good[:len(good)-16],
		"truncated":   append(slices.Clone(good[:len(good)-24]), good[len(good)-16:]...),
		"huge strtab": mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[fileHeaderSize+8:], 1<<31); return b }),
		"2 segments":  mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[len(b)-8:], 2); return b }),
	}
	for name, b := range cases {
		if fs, err := Decode(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Decode = %v, %v; want ErrFormat", name, fs, err)
		}
	}
}

// FuzzDecode: no input makes Decode panic or return unsorted features.
func FuzzDecode(f *testing.F) {
	f.Add(read(f, "f5.covcounters"))
	f.Add(read(f, "g.covcounters"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := Decode(b)
		if err == nil && !slices.IsSorted(fs) {
			t.Fatalf("unsorted features %v", fs)
		}
	})
}

func TestBucket(t *testing.T) {
	for n, want := range map[uint32]uint8{0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 7: 4, 8: 5, 15: 5, 16: 6, 31: 6, 32: 7, 127: 7, 128: 8, 1 << 31: 8} {
		if got := Bucket(n); got != want {
			t.Errorf("Bucket(%d) = %d, want %d", n, got, want)
		}
	}
	if a, b := newFeature(1, 2, 3, 5), newFeature(1, 2, 3, 6); a != b || a.Block() != newFeature(1, 2, 3, 100).Block() {
		t.Errorf("counts of one bucket must give one feature, and every count one block: %v %v", a, b)
	}
}

// TestAvailableSaysHowToBuild: go test's binary has no atomic counters
// (unless run with -cover -covermode=atomic), and the error says how to
// get a binary that has.
func TestAvailableSaysHowToBuild(t *testing.T) {
	if err := Available(); err != nil && !strings.Contains(err.Error(), "-covermode=atomic") {
		t.Fatalf("Available() = %v; want the build command in the error", err)
	}
}

// TestDecodeHugeCountEndsAtOnce: a function entry claiming 2^32−1
// counters in a short file is refused without walking them.
func TestDecodeHugeCountEndsAtOnce(t *testing.T) {
	b := read(t, "g.covcounters")
	// The payload is the last values before the footer: nctrs, pkg, fn,
	// one counter (uleb128, one byte each here). Make nctrs 2^32−1.
	payload := len(b) - 16 - 4
	huge := binary.AppendUvarint(nil, 1<<32-1)
	b = slices.Concat(b[:payload], huge, b[payload+1:])
	if _, err := Decode(b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "4294967295 counters past the end") {
		t.Fatalf("Decode = %v, want ErrFormat naming the count, refused before any counter is read", err)
	}
}

// p.covmeta is runtime/coverage.WriteMeta's output in a binary covering
// the same package p (package 0) and its main (package 1).
func TestDecodeMetaNamesBlocks(t *testing.T) {
	m, err := DecodeMeta(read(t, "p.covmeta"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Packages) != 2 || m.Packages[0].Path != "covtry/p" || len(m.Packages[0].Funcs) != 2 {
		t.Fatalf("packages %+v", m.Packages)
	}
	f := m.Packages[0].Funcs[0]
	if f.Name != "F" || !strings.HasSuffix(f.File, "p/p.go") || len(f.Blocks) != 5 || f.Blocks[0].Start != 2 {
		t.Fatalf("F: %+v", f)
	}
	if got := m.Name(newFeature(0, 0, 2, 5)); got != "p.F p.go:2 ×4-7" {
		t.Errorf("Name = %q", got)
	}
	if got := m.Name(newFeature(7, 0, 0, 1)); got != newFeature(7, 0, 0, 1).String() {
		t.Errorf("a block the meta-data does not know: %q", got)
	}
	if m.Blocks() < 6 {
		t.Errorf("Blocks() = %d, want F's 5 and G's 1 at least", m.Blocks())
	}
	for cut := range len(read(t, "p.covmeta")) {
		if _, err := DecodeMeta(read(t, "p.covmeta")[:cut]); err == nil {
			t.Errorf("a meta-data file cut at %d bytes decoded", cut)
		}
	}
}

// FuzzDecodeMeta: no input makes DecodeMeta panic.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(read(f, "p.covmeta"))
	f.Fuzz(func(t *testing.T, b []byte) { DecodeMeta(b) })
}
