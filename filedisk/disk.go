// Package filedisk is a node's durable key-value storage on real files,
// with the methods a process uses on the simulator's disk (sim.Disk) —
// Write, Append, Truncate, Delete, Read, Keys, Sync — so that the same
// service code runs in the simulator and for real.
//
// Semantics are the simulator's: a write is visible to Read at once and
// durable once Sync returns; a crash (power loss, SIGKILL) keeps exactly
// the state as of some Sync — the last one that returned, or the one in
// progress when the crash came, never a part of one. That is stronger than
// sim.Disk's torn crash, so code that survives the simulator survives this.
//
// On disk, the data directory holds a log of batches, one per Sync, split
// in segment files (format.go): Sync encodes what changed since the last
// one (one op per key: put, append or delete), writes it after the
// current segment's batches with one write(2) and fsyncs once, so a Sync
// costs one fsync however many writes it covers (group commit). The
// segment is preallocated ahead of its batches (compact.go), so that the
// fsync flushes data, not the file's growth. SyncThen encodes the batch
// at once but leaves its write and fsync to a writer goroutine, which
// gathers every batch queued during an fsync into the next one and then
// tells each caller its batch is durable. Creating, renaming and
// removing segments fsyncs the directory. Open replays the log into an
// in-memory index (Read is a map lookup; memory is proportional to the
// live data), cuts a torn tail off the last segment, and refuses a log
// damaged anywhere else. When the log outgrows both Options.CompactBytes
// and twice the live data, Sync writes a snapshot segment and removes the
// segments it supersedes (compact.go), so the log stays proportional to
// the live data and compaction costs O(1) per byte written.
//
// I/O errors. sim.Disk's methods return nothing, and process code treats a
// returned Sync as a promise that the data is durable — it acknowledges,
// votes, grants. So a Sync that fails must not return: it panics with an
// error wrapping ErrFailed, and the disk stays failed (every later call
// panics with the same error; Err reports it). Retrying is not an option:
// after a failed fsync Linux may mark the dirty pages clean and report
// success on the next fsync although the data never reached the disk (the
// PostgreSQL "fsyncgate" of 2018), so the only safe recovery is to stop
// and rebuild the state from what is on disk: the runtime recovers the
// panic, exits, and a restart Opens the directory again.
//
// A Disk is safe for concurrent use, though a process uses it from one
// goroutine. Two Disks — in one process or two — cannot hold one
// directory at once: Open takes an exclusive flock on its LOCK file.
package filedisk

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFailed is wrapped by the error a failed disk panics with and Err
// returns: an I/O error made the durable state unknown, so the process
// must stop and reopen the directory.
var ErrFailed = errors.New("filedisk: disk failed")

// ErrClosed is what a call on a closed Disk panics with.
var ErrClosed = errors.New("filedisk: disk is closed")

// Options tune a Disk; the zero value is the defaults.
type Options struct {
	// SegmentBytes is the size past which Sync starts a new segment
	// file (default 32 MiB). Open reads a segment whole, so this bounds
	// the memory replay needs besides the live data.
	SegmentBytes int64
	// CompactBytes is the log size below which Sync never compacts
	// (default 64 MiB); above it, Sync compacts once the log is twice the
	// live data.
	CompactBytes int64
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 32 << 20
	}
	if o.CompactBytes <= 0 {
		o.CompactBytes = 64 << 20
	}
	return o
}

// Recovery says what Open found and repaired, for the caller to log.
type Recovery struct {
	Seq        uint64   // the last batch in the log: how many Syncs wrote something
	Keys       int      // keys present
	TornFile   string   // the segment whose torn tail was cut, or ""
	TornOffset int64    // where it was cut
	TornBytes  int64    // how many bytes were cut (with the zeros preallocated after them)
	Removed    []string // superseded segments and leftover temp files removed
}

// Disk is a durable key-value store in a directory; see the package doc.
type Disk struct {
	mu   sync.Mutex
	dir  string
	opts Options

	lockFile *os.File
	dirFile  *os.File // the directory, for fsync

	entries map[string]*entry
	dirty   []*entry // entries changed since the last Sync, in first-change order
	live    int64    // encoded size of the live state: what a snapshot holds

	seg      *os.File // the current segment, written at segSize
	segName  string
	segFirst uint64   // the first batch seg holds (or will hold): its name's seq
	segSize  int64    // where seg's batches end (its preallocated zeros follow)
	segAlloc int64    // how much of seg is preallocated (reserve)
	segments []string // the log's segment files, oldest first (the last is seg)
	logSize  int64    // total size of the segments' batches
	seq      uint64   // the last batch written
	encoded  uint64   // the last batch encoded: seq, or past it while the writer has batches to write
	buf      []byte   // scratch for encoding a batch

	// The background writer (SyncThen): batches encoded and waiting to
	// be written, whether the writer goroutine runs, and idle, signalled
	// when it stops. While it runs it owns the log's files (seg, segName,
	// segFirst, segments), which everyone else touches only once it is
	// idle (waitIdle); the counters others read after a write (seq,
	// segSize, logSize) it updates holding mu (roll resets segSize
	// without it: nobody else reads it while the writer runs).
	jobs    []syncJob
	writing bool
	idle    sync.Cond

	framePayload int               // where batches split into frames (tests shrink it)
	crashAt      func(step string) // tests: called at each step of compaction and roll

	recovery Recovery
	err      error // sticky: set by the first I/O error
	closed   bool

	syncDelay atomic.Int64  // test-only failpoint: nanoseconds each fsync of a batch waits (SetSyncDelay)
	fsyncs    atomic.Uint64 // fsyncs of batches since Open (Fsyncs)
}

// SetSyncDelay makes every later Sync that writes something wait d before
// its fsync, as a slow disk would: a test-only failpoint (a live run's
// slow-disk fault; the services expose it only with FENCESIM_TEST_HOOKS=1).
// 0 turns it off. The wait holds the disk, and so the process's executor,
// as a slow fsync does. It is safe to call from any goroutine.
func (d *Disk) SetSyncDelay(delay time.Duration) {
	d.syncDelay.Store(int64(max(delay, 0)))
}

// entry is one key: its current value and what its next Sync must write.
type entry struct {
	key    string
	val    []byte
	ok     bool // present
	onDisk bool // present in the durable state
	mode   uint8
	from   int // in modeAppend: len(val) at the last Sync
}

const (
	modeClean   uint8 = iota
	modeReplace       // Write or Delete since the last Sync: write val whole (or delete)
	modeAppend        // only Appends since the last Sync: write val[from:]
)

// size is e's share of a snapshot.
func (e *entry) size() int64 {
	if !e.ok {
		return 0
	}
	return int64(opSize(opPut, e.key, e.val))
}

// Write stores a copy of value under key. It is durable once Sync returns.
func (d *Disk) Write(key string, value []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	checkSize(key, len(value))
	e := d.entry(key)
	d.live -= e.size()
	e.val, e.ok = slices.Clone(value), true
	d.live += e.size()
	d.mark(e, modeReplace)
}

// Append adds data to the end of key's value, creating it if missing. A
// Sync after Appends writes only what they added, so an append-only log
// costs its new bytes, not its size.
func (d *Disk) Append(key string, data []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	e := d.entry(key)
	checkSize(key, len(e.val)+len(data))
	if !e.ok {
		d.mark(e, modeReplace)
	} else {
		d.mark(e, modeAppend)
	}
	// Growing val in place never changes a slice Read handed out: those
	// end at or before len(val), and val never shrinks in place (Write
	// and Delete replace it).
	d.live -= e.size()
	e.val, e.ok = append(e.val, data...), true
	d.live += e.size()
}

// Truncate cuts key's value to its first size bytes; a missing key or a
// size at or past the value's length leaves it alone. It is durable once
// Sync returns and, like every change, all or nothing with its Sync's
// batch: a crash never keeps less than the cut value.
func (d *Disk) Truncate(key string, size int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	if size < 0 {
		panic("filedisk: Truncate to a negative size")
	}
	e := d.entries[key]
	if e == nil || !e.ok || size >= len(e.val) {
		return
	}
	d.live -= e.size()
	// A copy: val never shrinks in place (see Append), and a batch writes
	// the cut value whole (a put), which is all-or-nothing like any batch.
	e.val = slices.Clone(e.val[:size])
	d.live += e.size()
	d.mark(e, modeReplace)
}

// Delete removes key. It is durable once Sync returns.
func (d *Disk) Delete(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	e := d.entries[key]
	if e == nil || !e.ok {
		return
	}
	d.live -= e.size()
	e.val, e.ok = nil, false
	d.mark(e, modeReplace)
}

// Read returns the current value of key, synced or not. The returned slice
// must not be modified.
func (d *Disk) Read(key string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	if e := d.entries[key]; e != nil && e.ok {
		return e.val[:len(e.val):len(e.val)], true
	}
	return nil, false
}

// Keys returns the present keys that start with prefix, sorted.
func (d *Disk) Keys(prefix string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	var keys []string
	for k, e := range d.entries {
		if e.ok && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Sync makes every write so far durable: it returns once they are on disk
// (after the batches of every SyncThen before it). On an I/O error it
// panics (see the package doc on why it cannot return).
func (d *Disk) Sync() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	if err := d.sync(); err != nil {
		panic(err)
	}
}

// syncJob is a batch encoded by SyncThen (nil: nothing new to write; it
// waits for the batches before it), and what to call once it is durable.
type syncJob struct {
	batch []byte
	seq   uint64
	done  func()
}

// SyncThen makes every write so far durable without waiting for it
// (process.SyncNotifier): it encodes them as the next batch, which a
// background writer appends and fsyncs, and calls done on the writer's
// goroutine once the batch is durable. Batches reach the disk in order;
// those that queue while an fsync runs share the next one. It reports
// true, and never calls done, when everything written is durable already,
// or when it synced in line because a compaction, which needs the log
// idle, was due. On an I/O error the writer marks the disk failed and
// panics, as a failed Sync does: the process must stop (see the package
// doc).
func (d *Disk) SyncThen(done func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usable()
	if d.compactDue() {
		if err := d.sync(); err != nil {
			panic(err)
		}
		return true
	}
	batch := d.encode(nil)
	if batch == nil && !d.writing {
		return true
	}
	d.jobs = append(d.jobs, syncJob{batch: batch, seq: d.encoded, done: done})
	if !d.writing {
		d.writing = true
		go d.writer()
	}
	return false
}

// writer appends and fsyncs the batches SyncThen queues — all those
// queued at once with one write and one fsync — then calls their done in
// order; it returns once none is left.
func (d *Disk) writer() {
	var buf []byte
	var jobs []syncJob
	for {
		d.mu.Lock()
		jobs, d.jobs = d.jobs, jobs[:0]
		if len(jobs) == 0 {
			d.writing = false
			d.idle.Broadcast()
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		buf = buf[:0]
		var first, last uint64
		for _, j := range jobs {
			if j.batch != nil {
				first, last = cmp.Or(first, j.seq), j.seq
				buf = append(buf, j.batch...)
			}
		}
		if len(buf) > 0 {
			err := d.writeBatches(buf, first)
			d.mu.Lock()
			if err != nil {
				d.err, d.jobs, d.writing = err, nil, false
				d.idle.Broadcast()
				d.mu.Unlock()
				panic(err)
			}
			d.wrote(int64(len(buf)), last)
			d.mu.Unlock()
		}
		for i, j := range jobs {
			j.done()
			jobs[i] = syncJob{}
		}
		if cap(buf) > 4*d.framePayload {
			buf = nil // a burst of big batches must not pin its buffer
		}
	}
}

// waitIdle waits, holding mu, until the background writer has written
// every queued batch, and returns the error that failed the disk, if any.
func (d *Disk) waitIdle() error {
	for d.writing {
		d.idle.Wait()
	}
	return d.err
}

// Err returns the error that failed the disk, or nil.
func (d *Disk) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Dir returns the data directory.
func (d *Disk) Dir() string { return d.dir }

// Recovery returns what Open found and repaired.
func (d *Disk) Recovery() Recovery {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.recovery
	r.Removed = slices.Clone(r.Removed)
	return r
}

// Close syncs what was written since the last Sync — a clean shutdown
// loses nothing, as a node that stops without crashing keeps its disk in
// the simulator — then closes the files and releases the directory. It
// returns the error that failed the disk, if any; the directory is
// released either way.
func (d *Disk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	err := d.waitIdle()
	if err == nil {
		err = d.sync()
	}
	if err == nil && d.seg != nil && d.segAlloc > d.segSize {
		// A clean shutdown leaves the log its batches, without the
		// zeros preallocated after them.
		if terr := d.seg.Truncate(d.segSize); terr != nil {
			err = fmt.Errorf("filedisk: truncating %s: %w", d.seg.Name(), terr)
		}
	}
	d.closed = true
	for _, f := range []*os.File{d.seg, d.dirFile, d.lockFile} {
		if f != nil {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("filedisk: closing %s: %w", f.Name(), cerr)
			}
		}
	}
	return err
}

// abandon closes the files without syncing, as a crash would leave them
// (tests only).
func (d *Disk) abandon() {
	d.closed = true
	for _, f := range []*os.File{d.seg, d.dirFile, d.lockFile} {
		if f != nil {
			f.Close()
		}
	}
}

// usable panics unless the disk can be used.
func (d *Disk) usable() {
	if d.err != nil {
		panic(d.err)
	}
	if d.closed {
		panic(ErrClosed)
	}
}

// checkSize panics on a key or value beyond the format's bounds: a
// programmer error, like indexing out of range.
func checkSize(key string, valueLen int) {
	if len(key) > maxKeyBytes {
		panic(fmt.Sprintf("filedisk: key of %d bytes is longer than the %d-byte limit", len(key), maxKeyBytes))
	}
	if valueLen > maxValueBytes {
		panic(fmt.Sprintf("filedisk: value of %d bytes under key %q is longer than the %d-byte limit", valueLen, key, maxValueBytes))
	}
}

func (d *Disk) entry(key string) *entry {
	e := d.entries[key]
	if e == nil {
		e = &entry{key: key}
		d.entries[key] = e
	}
	return e
}

// mark records that e changed; a Write or Delete overrides earlier Appends.
func (d *Disk) mark(e *entry, mode uint8) {
	switch {
	case e.mode == modeClean:
		e.mode, e.from = mode, len(e.val)
		d.dirty = append(d.dirty, e)
	case mode == modeReplace:
		e.mode = modeReplace
	}
}

// fail makes err the disk's sticky error and returns it. The caller holds
// mu.
func (d *Disk) fail(what string, err error) error {
	d.err = failure(what, err)
	return d.err
}

// failure is the error a failed disk reports, for a writer that does not
// hold mu (it sets the sticky error once it does).
func failure(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrFailed, what, err)
}

// sync writes the dirty entries as one batch and fsyncs it, after the
// background writer's batches, then compacts the log if it has grown
// enough. The caller holds mu.
func (d *Disk) sync() error {
	if err := d.waitIdle(); err != nil {
		return err
	}
	batch := d.encode(d.buf)
	if batch == nil {
		return nil
	}
	d.buf = batch
	if err := d.writeBatches(batch, d.encoded); err != nil {
		d.err = err
		return err
	}
	d.wrote(int64(len(batch)), d.encoded)
	if len(d.buf) > 4*d.framePayload {
		d.buf = nil // one huge batch must not pin its buffer forever
	}
	if d.compactDue() {
		return d.compact()
	}
	return nil
}

// compactDue reports whether the log has outgrown both CompactBytes and
// twice the live data. The caller holds mu.
func (d *Disk) compactDue() bool {
	return d.logSize > d.opts.CompactBytes && d.logSize > 2*d.live
}

// encode turns the dirty entries into the next batch, numbered after the
// last one encoded, in buf's array, and marks them clean: from here on
// they are the batch's to make durable. It returns nil when they change
// nothing on disk. The caller holds mu.
func (d *Disk) encode(buf []byte) []byte {
	if len(d.dirty) == 0 {
		return nil
	}
	var w frameWriter
	w.begin(buf, kindBatch, d.encoded+1, d.framePayload, nil)
	for _, e := range d.dirty {
		switch {
		case e.mode == modeAppend && len(e.val) > e.from:
			w.op(opAppend, e.key, e.val[e.from:])
		case e.mode == modeReplace && e.ok:
			w.op(opPut, e.key, e.val)
		case e.mode == modeReplace && e.onDisk:
			w.op(opDelete, e.key, nil)
		}
	}
	for _, e := range d.dirty {
		e.mode, e.onDisk = modeClean, e.ok
		if !e.ok {
			delete(d.entries, e.key)
		}
	}
	clear(d.dirty)
	d.dirty = d.dirty[:0]
	if w.ops == 0 {
		return nil
	}
	batch, _ := w.finish()
	d.encoded++
	return batch
}

// writeBatches appends data — batches first on, encoded in order — to the
// log with one write and fsyncs it once, rolling to a new segment first
// if the current one is full. Only the writer of the moment calls it: the
// background writer, or a holder of mu once that one is idle. It sets no
// sticky error (the caller does, holding mu).
func (d *Disk) writeBatches(data []byte, first uint64) error {
	// A segment that holds no batch yet (a fresh snapshot) is not full,
	// however big: its successor would bear its name's seq.
	if d.segSize >= d.opts.SegmentBytes && d.segFirst <= d.seq {
		if err := d.roll(first); err != nil {
			return err
		}
	}
	if err := d.reserve(int64(len(data))); err != nil {
		return err
	}
	if _, err := d.seg.WriteAt(data, d.segSize); err != nil {
		return failure("writing "+d.seg.Name(), err)
	}
	if delay := d.syncDelay.Load(); delay > 0 {
		time.Sleep(time.Duration(delay))
	}
	if err := d.seg.Sync(); err != nil {
		return failure("fsync "+d.seg.Name(), err)
	}
	d.fsyncs.Add(1)
	return nil
}

// Fsyncs reports how many fsyncs of batches the disk made since Open: one
// a Sync that wrote something, one for all the SyncThen batches a writer
// round gathered. Safe from any goroutine.
func (d *Disk) Fsyncs() uint64 { return d.fsyncs.Load() }

// wrote counts n bytes written, through batch last. The caller holds mu.
func (d *Disk) wrote(n int64, last uint64) {
	d.seq = last
	d.segSize += n
	d.logSize += n
}

// step is a point where a test may simulate a crash.
func (d *Disk) step(name string) {
	if d.crashAt != nil {
		d.crashAt(name)
	}
}
