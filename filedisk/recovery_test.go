package filedisk

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lastBatch writes batches to a fresh directory, closes it, and returns
// the directory, the last segment, the offset where the last batch
// starts, and the state before and after the last batch.
func lastBatch(t *testing.T, framePayload int) (dir, seg string, start int64, before, after map[string]string) {
	t.Helper()
	dir = t.TempDir()
	d := open(t, dir, Options{})
	d.framePayload = framePayload
	for i := range 5 {
		d.Write(fmt.Sprint("k", i), []byte(strings.Repeat("v", 10+i)))
		d.Append("log", []byte(fmt.Sprint("e", i, ";")))
		d.Sync()
	}
	before = state(d)
	start = d.segSize
	d.Write("k1", []byte("overwritten"))
	d.Delete("k2")
	d.Append("log", []byte("last;"))
	d.Write("new", []byte(strings.Repeat("n", 40)))
	d.Sync()
	after = state(d)
	seg = filepath.Join(dir, d.segName)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, seg, start, before, after
}

// TestTornTailIsCutAtEveryOffset cuts the last segment at every byte of
// its last batch — one frame, then several — as a crash during write(2)
// or before fsync can: every cut opens to the state before that batch,
// and the file is cut back to where the batch began.
func TestTornTailIsCutAtEveryOffset(t *testing.T) {
	for _, framePayload := range []int{defaultFramePayload, 24} {
		t.Run(fmt.Sprint("framePayload=", framePayload), func(t *testing.T) {
			dir, seg, start, before, after := lastBatch(t, framePayload)
			full, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if framePayload < defaultFramePayload {
				if n := countFrames(t, full[start:]); n < 3 {
					t.Fatalf("the last batch has %d frames; the test needs several", n)
				}
			}
			for cut := start; cut <= int64(len(full)); cut++ {
				if err := os.WriteFile(seg, full[:cut], 0o644); err != nil {
					t.Fatal(err)
				}
				d, err := Open(dir, Options{})
				if err != nil {
					t.Fatalf("cut at %d: Open: %v", cut, err)
				}
				want, wantSize, wantTorn := before, start, cut-start
				if zeros(full[start:cut]) {
					wantTorn = 0 // read as zeros preallocated after the batches
				}
				if cut == int64(len(full)) {
					want, wantSize, wantTorn = after, cut, 0
				}
				got, rec := state(d), d.Recovery()
				d.Close()
				if !maps.Equal(got, want) {
					t.Fatalf("cut at %d: got %v, want %v", cut, got, want)
				}
				if rec.TornBytes != wantTorn {
					t.Errorf("cut at %d: Recovery.TornBytes = %d, want %d", cut, rec.TornBytes, wantTorn)
				}
				if info, _ := os.Stat(seg); info.Size() != wantSize {
					t.Fatalf("cut at %d: segment is %d bytes after Open, want %d", cut, info.Size(), wantSize)
				}
			}
		})
	}
}

// logBytes returns the segment file's batches, without the zeros
// preallocated after them.
func logBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for off < len(b) && !zeros(b[off:]) {
		_, next, problem := readFrame(b, off)
		if problem != "" {
			t.Fatalf("%s at %d: %s", path, off, problem)
		}
		off = next
	}
	return b[:off]
}

func countFrames(t *testing.T, b []byte) int {
	n := 0
	for off := 0; off < len(b) && !zeros(b[off:]); n++ {
		_, next, problem := readFrame(b, off)
		if problem != "" {
			t.Fatalf("frame %d at %d: %s", n, off, problem)
		}
		off = next
	}
	return n
}

// TestDamagedLastBatchIsCut: a bad CRC or trailing garbage after the last
// batch is what power loss before fsync leaves; it is cut like a short
// frame.
func TestDamagedLastBatchIsCut(t *testing.T) {
	for name, damage := range map[string]func(b []byte, start int64) []byte{
		"flipped byte in the last batch": func(b []byte, start int64) []byte { b[len(b)-3] ^= 0x40; return b },
		"zeros after the last batch":     func(b []byte, start int64) []byte { return append(b, make([]byte, 4096)...) },
		"garbage after the last batch":   func(b []byte, start int64) []byte { return append(b, "\x00\x00\x00\x20garbage"...) },
	} {
		t.Run(name, func(t *testing.T) {
			dir, seg, start, before, after := lastBatch(t, defaultFramePayload)
			full, _ := os.ReadFile(seg)
			damaged := damage(full, start)
			os.WriteFile(seg, damaged, 0o644)
			want, wantSize := after, int64(len(full))
			if len(damaged) == len(full) {
				want, wantSize = before, start
			}
			d := open(t, dir, Options{})
			checkState(t, d, want, "after Open")
			if info, _ := os.Stat(seg); info.Size() != wantSize {
				t.Errorf("segment is %d bytes after Open, want %d", info.Size(), wantSize)
			}
		})
	}
}

// TestDamageInTheMiddleIsRefused: damage that a crash cannot leave — in a
// frame followed by an intact later batch, in a segment that is not the
// last, in a snapshot — is refused with the file and offset.
func TestDamageInTheMiddleIsRefused(t *testing.T) {
	t.Run("last segment, intact batch after", func(t *testing.T) {
		dir, seg, _, _, _ := lastBatch(t, defaultFramePayload)
		b, _ := os.ReadFile(seg)
		b[frameHeader+payloadHeader+2] ^= 1 // inside batch 1's first op
		os.WriteFile(seg, b, 0o644)
		wantRefused(t, dir, seg+" is damaged at offset 0 (CRC-32C mismatch), but an intact frame of batch 2 follows")
	})
	t.Run("earlier segment", func(t *testing.T) {
		dir, segs := segmented(t)
		first := filepath.Join(dir, segs[0])
		b, _ := os.ReadFile(first)
		b = b[:len(b)-1] // short: a torn tail, were it the last segment
		os.WriteFile(first, b, 0o644)
		wantRefused(t, dir, first+" is damaged at offset 0 (short frame")
	})
	t.Run("snapshot", func(t *testing.T) {
		dir := t.TempDir()
		d := compacted(t, dir)
		snap := filepath.Join(dir, d.segments[0])
		d.Close()
		b, _ := os.ReadFile(snap)
		os.WriteFile(snap, b[:frameHeader+payloadHeader+3], 0o644) // torn inside the snapshot
		wantRefused(t, dir, "inside its snapshot")
	})
	t.Run("missing segment", func(t *testing.T) {
		dir, segs := segmented(t)
		os.Remove(filepath.Join(dir, segs[1]))
		wantRefused(t, dir, "a segment is missing")
	})
	t.Run("log without its start", func(t *testing.T) {
		dir, segs := segmented(t)
		os.Remove(filepath.Join(dir, segs[0]))
		wantRefused(t, dir, "no snapshot holds the batches before it")
	})
}

// segmented returns a closed directory whose log spans several segments,
// and their names.
func segmented(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	d := open(t, dir, Options{SegmentBytes: 50})
	for i := range 6 {
		d.Write(fmt.Sprint("k", i), []byte(strings.Repeat("v", 40)))
		d.Sync()
	}
	segs := slices.Clone(d.segments)
	if len(segs) < 3 {
		t.Fatalf("%d segments; the test needs several", len(segs))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, segs
}

func wantRefused(t *testing.T, dir, want string) {
	t.Helper()
	d, err := Open(dir, Options{})
	if err == nil {
		d.Close()
		t.Fatalf("Open of a damaged log: got no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Open of a damaged log: got %v, want it to contain %q", err, want)
	}
}

// compacted returns a disk in dir whose log starts with a snapshot.
func compacted(t *testing.T, dir string) *Disk {
	t.Helper()
	d := open(t, dir, Options{SegmentBytes: 200, CompactBytes: 600})
	for i := 0; !strings.HasPrefix(d.segments[0], snapPrefix); i++ {
		if i == 100 {
			t.Fatalf("no compaction after %d Syncs", i)
		}
		d.Write(fmt.Sprint("k", i%3), []byte(strings.Repeat("v", 50)))
		d.Sync()
	}
	return d
}
