package filedisk

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Compaction and rolling change which files make up the log. Each is a
// sequence of steps after any of which a crash leaves a directory that
// Open reads back to the same synced state:
//
//	compact: write snap-<seq+1>.tmp (the whole state), fsync it, rename it
//	         to snap-<seq+1>, fsync the directory, then remove the older
//	         segments and fsync the directory again.
//
// Open ignores and removes *.tmp, so a crash before the rename leaves the
// old log in charge; from the rename on, the newest snap- segment is where
// the log starts and Open removes the segments older than it. The snapshot
// is fsynced before the rename, so a snap- segment whose snapshot is not
// intact is damage, never a torn write.
//
//	roll:    create wal-<seq+1> (empty), fsync the directory, then write
//	         the batch at its start.
//
// The previous segment was fsynced by the Sync that last wrote it, so
// only the last segment can have a torn tail.
//
// A segment is written at offsets, not appended to: ahead of its batches
// the file is preallocated (preallocate), a chunk at a time, so its
// batches are followed by zeros, which Open reads as the segment's end (a
// frame never starts with a zero length). A crash with a chunk's size not
// yet durable leaves a shorter file: it reads the same.

// create makes a new empty file in the directory, for writing at offsets.
func (d *Disk) create(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(d.dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
}

// preallocChunk is how much of a segment is preallocated at a time: an
// fallocate per 4 MiB of log, and at most that much allocated ahead of
// the data — less for a small log (a quarter of CompactBytes, at most
// SegmentBytes), whose data directory must stay small.
const preallocChunk = 4 << 20

// reserve preallocates the current segment so that n more bytes fit in
// blocks it already has. The caller is the writer of the moment.
func (d *Disk) reserve(n int64) error {
	if d.segSize+n <= d.segAlloc {
		return nil
	}
	chunk := max(1, min(preallocChunk, d.opts.SegmentBytes, d.opts.CompactBytes/4))
	end := d.segSize + n + chunk
	if err := preallocate(d.seg, d.segAlloc, end-d.segAlloc); err != nil {
		return failure("preallocating "+d.seg.Name(), err)
	}
	d.segAlloc = end
	return nil
}

// roll starts a new segment for the next batch, next. Like writeBatches it
// sets no sticky error: the caller does.
func (d *Disk) roll(next uint64) error {
	name := segmentName(walPrefix, next)
	f, err := d.create(name)
	if err != nil {
		return failure("creating a segment", err)
	}
	d.step("roll-created")
	if err := d.dirFile.Sync(); err != nil {
		f.Close()
		return failure("fsync "+d.dir, err)
	}
	d.step("roll-dir-synced")
	// The old segment's preallocated zeros go (a crash may keep them:
	// Open reads them as its end), so that a finished segment is its
	// batches.
	old := d.seg
	if err := old.Truncate(d.segSize); err != nil {
		f.Close()
		return failure("truncating "+old.Name(), err)
	}
	d.seg, d.segName, d.segFirst, d.segSize, d.segAlloc = f, name, next, 0, 0
	d.segments = append(d.segments, name)
	if err := old.Close(); err != nil {
		return failure("closing "+old.Name(), err)
	}
	return nil
}

// compact replaces the log by a snapshot of the state, which is synced:
// compact runs right after a Sync has written every change.
func (d *Disk) compact() error {
	name := segmentName(snapPrefix, d.seq+1)
	final := filepath.Join(d.dir, name)
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return d.fail("creating a snapshot", err)
	}
	d.step("snapshot-created")
	keys := make([]string, 0, len(d.entries))
	for k := range d.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same state makes the same snapshot
	out := bufio.NewWriterSize(f, 64<<10)
	var w frameWriter
	w.begin(d.buf, kindSnapshot, d.seq, d.framePayload, out)
	for _, k := range keys {
		e := d.entries[k]
		w.op(opPut, e.key, e.val)
	}
	buf, err := w.finish()
	d.buf = buf
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		f.Close()
		return d.fail("writing "+tmp, err)
	}
	// Where the batches after it go.
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		f.Close()
		return d.fail("seeking "+tmp, err)
	}
	d.step("snapshot-written")
	if err := f.Sync(); err != nil {
		f.Close()
		return d.fail("fsync "+tmp, err)
	}
	d.step("snapshot-synced")
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		return d.fail("renaming the snapshot", err)
	}
	d.step("renamed")
	if err := d.dirFile.Sync(); err != nil {
		f.Close()
		return d.fail("fsync "+d.dir, err)
	}
	d.step("renamed-dir-synced")
	old, oldSeg := d.segments, d.seg
	d.seg, d.segName, d.segFirst, d.segSize, d.segAlloc = f, name, d.seq+1, size, size
	d.segments, d.logSize = []string{name}, size
	if err := oldSeg.Close(); err != nil {
		return d.fail("closing "+oldSeg.Name(), err)
	}
	for _, s := range old {
		if err := os.Remove(filepath.Join(d.dir, s)); err != nil {
			return d.fail("removing a superseded segment", err)
		}
		d.step("removed")
	}
	if err := d.dirFile.Sync(); err != nil {
		return d.fail("fsync "+d.dir, err)
	}
	d.step("removed-dir-synced")
	return nil
}
