//go:build linux

package filedisk

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// TestSegmentsArePreallocated: the current segment is allocated ahead of
// its batches, so a Sync writes into blocks the file has (an fsync of
// data alone); it grows a chunk at a time, not a Sync at a time; a rolled
// segment and a cleanly closed one keep their batches only.
func TestSegmentsArePreallocated(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, Options{SegmentBytes: 64 << 10})
	seg := filepath.Join(dir, d.segName)
	d.Write("k", []byte("v"))
	d.Sync()
	size := fileSize(t, seg)
	if size <= d.segSize {
		t.Fatalf("after a Sync the segment is %d bytes for %d of batches: not preallocated", size, d.segSize)
	}
	for i := range 20 {
		d.Write(fmt.Sprint("k", i), []byte("value"))
		d.Sync()
	}
	if got := fileSize(t, seg); got != size {
		t.Errorf("20 small Syncs changed the segment's size from %d to %d: they were not written into preallocated blocks", size, got)
	}
	for i := 0; len(d.segments) < 2; i++ {
		d.Write(fmt.Sprint("big", i), []byte(strings.Repeat("x", 4000)))
		d.Sync()
	}
	if got, want := fileSize(t, seg), int64(len(logBytes(t, seg))); got != want {
		t.Errorf("a rolled segment is %d bytes, its batches %d", got, want)
	}
	last := filepath.Join(dir, d.segName)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, last), int64(len(logBytes(t, last))); got != want {
		t.Errorf("a closed disk's last segment is %d bytes, its batches %d", got, want)
	}
}

// TestCrashKeepsThePreallocatedZeros: a crash (no Close) leaves the
// preallocated zeros after the batches; Open reads them as the log's end,
// cuts nothing, writes after the batches, and a torn batch written into
// the zeros is cut as at a file's end.
func TestCrashKeepsThePreallocatedZeros(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, Options{})
	for i := range 5 {
		d.Write(fmt.Sprint("k", i), []byte(strings.Repeat("v", 10+i)))
		d.Sync()
	}
	want := state(d)
	seg, end := filepath.Join(dir, d.segName), d.segSize
	d.abandon()
	if fileSize(t, seg) <= end {
		t.Fatal("no zeros after the batches: the test needs them")
	}

	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, rec := state(d), d.Recovery(); !maps.Equal(got, want) || rec.TornBytes != 0 {
		t.Fatalf("after a crash: %v, %+v; want %v and nothing cut", got, rec, want)
	}
	d.Write("after", []byte("crash"))
	d.Sync()
	want = state(d)
	end = d.segSize
	d.abandon()

	// A torn batch in the zeros: a frame header that promises more than
	// was written.
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\x00\x00\x00\x40\x12\x34\x56\x78\x01half"), end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, rec := state(d), d.Recovery(); !maps.Equal(got, want) || rec.TornOffset != end || rec.TornBytes == 0 {
		t.Fatalf("after a torn batch: %v, %+v; want %v and a cut at %d", got, rec, want, end)
	}
	if got := fileSize(t, seg); got != end {
		t.Errorf("the segment is %d bytes after the cut, want %d", got, end)
	}
}
