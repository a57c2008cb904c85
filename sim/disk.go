package sim

import (
	"slices"
	"strings"
	"time"
)

// Disk is a node's durable key-value storage with an explicit sync barrier,
// modelled on write(2) + fsync(2): Write is visible to Read at once (the page
// cache) but survives a crash only once Sync has returned. A crash drops
// every write since the last Sync; a torn crash (World.CrashTorn) keeps a
// truncated prefix of the last unsynced Write or Append instead of dropping
// it (a Truncate or Delete never tears).
//
// Sync completes instantly in virtual time unless the node has a sync delay
// (World.SetSyncDelay): then the node stalls until the sync completes, and
// the writes it covers become durable only then — a crash during the stall
// loses them (or tears the last), exactly as power failing during fsync.
// Nothing the process sent after the Sync has left by then.
type Disk struct {
	// recs holds every key ever written and not since deleted for good:
	// one record per key with its current and its synced value, so that a
	// write costs one map lookup and a sync none.
	recs map[string]*record
	// hot are the records most recently looked up by a write, compared by
	// key before the map is asked: a process writes the same few keys over
	// and over (a log's tail segment, a record's two slots), with the same
	// string each time, and comparing a string with itself is a pointer
	// comparison, where the map hashes the whole key.
	hot     [4]*record
	hotNext int
	dirty   []*record // records written since the last Sync, in write order
	// last is the most recent unsynced Write or Append (nil when there is
	// none, or when the most recent change was a Delete, which cannot
	// tear); the bytes it wrote are last.cur[lastFrom:].
	last     *record
	lastFrom int
	// lastHeld: the last write was made while a slow Sync was in flight
	// (after it, in the event that stalled the node): the write waits for
	// the sync as the node's messages do, so a crash before the sync
	// completes drops it whole — it never reached the disk to be torn.
	lastHeld bool
	// onSync, if set, is told of every Sync; on a slow disk it returns the
	// true time the sync completes (and stalls the node until then).
	onSync func() (done time.Duration, slow bool)
	// now reads true time, to settle syncs in flight.
	now func() time.Duration
	// inflight are records covered by a slow Sync still in progress,
	// durable once true time reaches inflightDone.
	inflight     []*record
	inflightDone time.Duration
	// pending are the asynchronous syncs in flight (SyncThen), oldest
	// first, each durable at its own true time; a crash before that time
	// loses what it covers. schedule runs a node event at a true time, and
	// asyncDelay says how long a sync takes (the node's sync delay).
	pending    []pendingSync
	schedule   func(at time.Duration, fire func())
	asyncDelay func() time.Duration
	// syncSeq counts the syncs that make writes durable (Sync and
	// SyncThen): a record remembers the sequence number of the sync that
	// made its value durable, so that an older sync completing later
	// never takes a newer synced value back.
	syncSeq uint64
	// size is the bytes the current values hold; past maxBytes (if set)
	// full is called, which stops the run (Limits.DiskBytes).
	size, peak int
	maxBytes   int
	full       func()

	writes, syncs, lost, torn int
}

// record is one key: what Read sees (cur) and what survives a crash
// (synced), each with its presence, and which pending lists hold it.
type record struct {
	key                string
	cur, synced        []byte
	curOK, syncedOK    bool
	isDirty, isFlushed bool   // in Disk.dirty, in Disk.inflight
	pending            int    // how many of Disk.pending cover it
	syncedSeq          uint64 // the sync that made synced durable
	// shared is set once cur may be seen by someone else (a caller of
	// Read, or synced after a crash): Append then copies it before
	// growing it, so no slice handed out ever changes.
	shared bool
}

func newDisk() *Disk {
	return &Disk{recs: map[string]*record{}}
}

// Write stores a copy of value under key. It is not durable until Sync.
func (d *Disk) Write(key string, value []byte) {
	d.settle()
	r := d.record(key)
	d.resize(len(value) - len(r.cur))
	r.cur, r.curOK, r.shared = slices.Clone(value), true, false
	d.markDirty(r)
	d.last, d.lastFrom, d.lastHeld = r, 0, len(d.inflight) > 0
}

// resize accounts for a change of delta bytes in the current values, and
// calls full if they now exceed maxBytes: checked before the bytes are
// copied, so a runaway log stops at the limit, not past it.
func (d *Disk) resize(delta int) {
	d.size += delta
	if d.size > d.peak {
		if d.maxBytes > 0 && d.size > d.maxBytes && d.full != nil {
			d.full()
		}
		d.peak = d.size
	}
}

// Append adds data to the end of key's value (creating it if missing), as
// write(2) does on a file opened with O_APPEND: an append-only log costs
// one copy of what is added, not of the whole value. Like Write it is not
// durable until Sync; a torn crash keeps what the key held before its last
// append plus a prefix of that append.
func (d *Disk) Append(key string, data []byte) {
	d.settle()
	r := d.record(key)
	d.resize(len(data))
	from := len(r.cur)
	if r.shared || !r.curOK {
		// Never grow an array someone else may hold (the synced copy
		// after a crash, a reader's slice): start a private one.
		grown := make([]byte, from, max(2*(from+len(data)), 64))
		copy(grown, r.cur)
		r.cur, r.curOK, r.shared = grown, true, false
	}
	r.cur = append(r.cur, data...)
	d.markDirty(r)
	d.last, d.lastFrom, d.lastHeld = r, from, len(d.inflight) > 0
}

// Truncate cuts key's value to its first size bytes, as ftruncate(2)
// does; a missing key or a size at or past the value's length leaves it
// alone. Like Write it is not durable until Sync, but it never tears: a
// torn crash after it keeps key as of the last Sync (or cut, if a Sync
// covered the cut) — never a prefix shorter than size, which a torn
// rewrite of the kept bytes with Write could leave.
func (d *Disk) Truncate(key string, size int) {
	d.settle()
	r := d.recs[key]
	if size < 0 {
		panic("sim: Disk.Truncate to a negative size")
	}
	if r == nil || !r.curOK || size >= len(r.cur) {
		return
	}
	d.resize(size - len(r.cur))
	// The capacity ends at size, so a later Append copies rather than
	// overwriting the bytes a synced copy or a reader's slice may share.
	r.cur = r.cur[:size:size]
	d.markDirty(r)
	d.last = nil
}

// Delete removes key. Like Write, it is not durable until Sync.
func (d *Disk) Delete(key string) {
	d.settle()
	r := d.record(key)
	d.resize(-len(r.cur))
	r.cur, r.curOK = nil, false
	d.markDirty(r)
	d.last = nil
}

// record returns key's record, making an empty one if there is none.
func (d *Disk) record(key string) *record {
	for _, r := range d.hot {
		if r != nil && r.key == key {
			return r
		}
	}
	r := d.recs[key]
	if r == nil {
		r = &record{key: key}
		d.recs[key] = r
	}
	d.hot[d.hotNext] = r
	d.hotNext = (d.hotNext + 1) % len(d.hot)
	return r
}

// forget drops r, gone for good, from the disk's records.
func (d *Disk) forget(r *record) {
	delete(d.recs, r.key)
	for i := range d.hot {
		if d.hot[i] == r {
			d.hot[i] = nil
		}
	}
}

func (d *Disk) markDirty(r *record) {
	d.writes++
	if !r.isDirty {
		r.isDirty = true
		d.dirty = append(d.dirty, r)
	}
}

// Read returns the current value of key, synced or not. The returned slice
// must not be modified.
func (d *Disk) Read(key string) ([]byte, bool) {
	if r := d.recs[key]; r != nil && r.curOK {
		r.shared = true
		return r.cur, true
	}
	return nil, false
}

// Keys returns the keys that start with prefix, sorted, so that a process
// restoring its state walks them in the same order in every run.
func (d *Disk) Keys(prefix string) []string {
	var keys []string
	for k, r := range d.recs { //detlint:sorted
		if r.curOK && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Sync makes every write so far durable. On a node with a sync delay, a
// Sync made by the node's process stalls the node (see World.SetSyncDelay).
func (d *Disk) Sync() {
	d.settle()
	d.syncs++
	d.syncSeq++
	d.coverPending()
	if d.onSync != nil {
		if done, slow := d.onSync(); slow {
			for _, r := range d.dirty {
				r.isDirty = false
				if !r.isFlushed {
					r.isFlushed = true
					d.inflight = append(d.inflight, r)
				}
			}
			d.dirty = d.dirty[:0]
			d.inflightDone = max(d.inflightDone, done)
			return // the last write stays tearable until the sync completes
		}
	}
	for _, r := range d.dirty {
		r.isDirty = false
		d.commit(r)
	}
	d.dirty = d.dirty[:0]
	d.last = nil
}

// commit makes the current value of r durable, and forgets r once it is
// gone for good.
func (d *Disk) commit(r *record) {
	r.synced, r.syncedOK, r.syncedSeq = r.cur, r.curOK, d.syncSeq
	if !r.curOK && !r.isDirty && !r.isFlushed && r.pending == 0 {
		d.forget(r)
	}
}

// pendingSync is one asynchronous sync in flight: the values it makes
// durable, as they were when it began, and when it completes.
type pendingSync struct {
	start, at time.Duration // when it begins (the one before it done) and completes
	seq       uint64
	writes    []pendingWrite // a key written again later appears again, newer
}

// pendingWrite is one record's value as an asynchronous sync saw it. The
// slice stays intact: Append never writes within a value's length, and
// Truncate caps its capacity.
type pendingWrite struct {
	r   *record
	val []byte
	ok  bool
}

// SyncThen implements process.SyncNotifier: it makes every write so far
// durable without stalling the node. On a fast disk, with no earlier
// SyncThen in flight, it syncs at once and reports true. Otherwise the
// sync takes the node's sync delay from when the disk is free (it syncs
// one at a time; the calls made while a sync runs share the next), and
// done then runs as an event of the node — unless a crash came first,
// which loses what the sync covered as it loses any unsynced write. It
// reports false then.
func (d *Disk) SyncThen(done func()) bool {
	d.settle()
	delay := time.Duration(0)
	if d.asyncDelay != nil {
		delay = d.asyncDelay()
	}
	if d.schedule == nil || delay <= 0 && len(d.pending) == 0 {
		d.Sync()
		return true
	}
	d.syncs++
	now := d.now()
	n := len(d.pending)
	if n == 0 || d.pending[n-1].start <= now {
		// The disk is idle, or busy with a sync that has begun: this one
		// begins when it is free.
		d.syncSeq++
		start := now
		if len(d.inflight) > 0 {
			start = max(start, d.inflightDone) // a slow Sync of this event
		}
		if n > 0 {
			start = max(start, d.pending[n-1].at)
		}
		d.pending = append(d.pending, pendingSync{start: start, at: start + delay, seq: d.syncSeq})
		n++
	}
	// Else it joins the sync queued behind the one in flight, which has
	// not begun: one fsync covers every write made before it begins, as
	// filedisk's writer gathers the batches queued while it syncs.
	ps := &d.pending[n-1]
	for _, r := range d.dirty {
		r.isDirty = false
		r.pending++
		ps.writes = append(ps.writes, pendingWrite{r: r, val: r.cur, ok: r.curOK})
	}
	d.dirty = d.dirty[:0]
	d.schedule(ps.at, done)
	return false
}

// settlePending completes the asynchronous syncs whose time has come.
func (d *Disk) settlePending() {
	k := 0
	for k < len(d.pending) && d.pending[k].at <= d.now() {
		ps := &d.pending[k]
		for _, w := range ps.writes {
			r := w.r
			r.pending--
			if ps.seq >= r.syncedSeq { // >=: a later write of this sync's
				r.synced, r.syncedOK, r.syncedSeq = w.val, w.ok, ps.seq
			}
			if !r.curOK && !r.isDirty && !r.isFlushed && r.pending == 0 {
				d.forget(r)
			}
		}
		k++
	}
	if k > 0 {
		clear(d.pending[:k])
		d.pending = append(d.pending[:0], d.pending[k:]...)
		if l := d.last; l != nil && !l.isDirty && !l.isFlushed && l.pending == 0 {
			d.last = nil // durable now: nothing left to tear
		}
	}
}

// coverPending puts the records of the asynchronous syncs in flight back
// among the dirty ones, so that a Sync covers them (it makes every write
// so far durable, as an fsync queued behind them would) or a crash loses
// them. Their syncs still complete, and their done still runs.
func (d *Disk) coverPending() {
	for i := range d.pending {
		for _, w := range d.pending[i].writes {
			if !w.r.isDirty {
				w.r.isDirty = true
				d.dirty = append(d.dirty, w.r)
			}
		}
	}
}

// settle completes the slow syncs whose time has come.
func (d *Disk) settle() {
	if len(d.pending) > 0 {
		d.settlePending()
	}
	if len(d.inflight) == 0 || d.now == nil || d.now() < d.inflightDone {
		return
	}
	for _, r := range d.inflight {
		r.isFlushed = false
		d.commit(r)
	}
	d.inflight = d.inflight[:0]
	if len(d.dirty) == 0 && (d.last == nil || d.last.pending == 0) {
		d.last = nil // durable now: nothing left to tear
	}
}

// unsettle is called by a crash: a slow sync still in flight never
// completes, so the writes it covered are as unsynced as the rest.
func (d *Disk) unsettle() {
	d.settle()
	if len(d.pending) > 0 {
		// The asynchronous syncs still in flight never complete either.
		d.coverPending()
		for i := range d.pending {
			for _, w := range d.pending[i].writes {
				w.r.pending = 0
			}
		}
		clear(d.pending)
		d.pending = d.pending[:0]
	}
	if len(d.inflight) == 0 {
		return
	}
	recs := d.inflight
	for _, r := range recs {
		r.isFlushed, r.isDirty = false, true
	}
	for _, r := range d.dirty {
		if !slices.Contains(recs, r) {
			recs = append(recs, r)
		}
	}
	// The sync never completes: its completion time goes with it, or a
	// later, faster sync of the restarted process would count as durable
	// only once the lost one would have completed.
	d.dirty, d.inflight, d.inflightDone = recs, nil, 0
}

// SyncDone reports when the slow syncs now in flight complete; ok is
// false when none is in flight (everything synced is durable already). A
// harness uses it to learn when a decision the process just synced becomes
// a fact — and, with World.CrashedAt, whether a crash took it back.
func (d *Disk) SyncDone() (done time.Duration, ok bool) {
	d.settle()
	if n := len(d.pending); n > 0 {
		// The asynchronous syncs complete in order: the last one last.
		return max(d.inflightDone, d.pending[n-1].at), true
	}
	if len(d.inflight) == 0 {
		return 0, false
	}
	return d.inflightDone, true
}

// Bytes returns the bytes the disk's current values hold: what
// Limits.DiskBytes bounds.
func (d *Disk) Bytes() int { return d.size }

// Dirty reports how many keys hold writes that a crash would lose.
func (d *Disk) Dirty() int {
	d.settle()
	n := len(d.dirty) + len(d.inflight)
	for i := range d.pending {
		for _, w := range d.pending[i].writes {
			if !w.r.isDirty && !w.r.isFlushed && w.r.syncedSeq < d.pending[i].seq {
				n++ // not since covered by a Sync
			}
		}
	}
	return n
}

// crash drops every unsynced write: the disk comes back as of the last Sync.
func (d *Disk) crash() {
	d.unsettle()
	for _, r := range d.dirty {
		d.lost++
		r.isDirty = false
		d.size += len(r.synced) - len(r.cur)
		r.cur, r.curOK, r.shared = r.synced, r.syncedOK, true
		if !r.curOK {
			d.forget(r)
		}
	}
	d.dirty = d.dirty[:0]
	d.last = nil
}

// crashTorn is crash, except that the most recent unsynced write, if the
// most recent change was a non-empty Write or Append, is torn rather than
// dropped: the first floor(len·keep) of the bytes it wrote (always fewer
// than all of them) survive, durably — after what the key held before it,
// for an Append. keep must lie in [0, 1). It reports whether a write was
// torn.
func (d *Disk) crashTorn(keep float64) bool {
	d.settle()
	held := d.lastHeld && len(d.inflight) > 0 // the last write waits for a sync the crash stops
	d.unsettle()
	r, from := d.last, d.lastFrom
	if r == nil || len(r.cur) <= from || held {
		d.crash()
		return false
	}
	wrote := len(r.cur) - from
	n := int(float64(wrote) * keep) // one IEEE product: the same on every platform
	n = max(0, min(n, wrote-1))
	kept := slices.Clone(r.cur[:from+n])
	d.crash()
	d.lost-- // the torn key was counted as lost; it is torn instead
	d.torn++
	r = d.record(r.key) // crash may have forgotten it
	d.size += len(kept) - len(r.cur)
	r.cur, r.curOK, r.shared = kept, true, false
	r.synced, r.syncedOK = kept, true
	return true
}

// DiskStats counts what happened to a disk during a run.
type DiskStats struct {
	Writes int // Write and Delete calls
	Syncs  int // Sync calls
	Lost   int // keys whose unsynced writes were dropped by crashes
	Torn   int // writes torn by torn crashes (a prefix survived)
}

// Stats returns the disk's counters.
func (d *Disk) Stats() DiskStats {
	return DiskStats{Writes: d.writes, Syncs: d.syncs, Lost: d.lost, Torn: d.torn}
}
