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
// truncated prefix of the last unsynced write instead of dropping it.
//
// Sync completes instantly in virtual time unless the node has a sync delay
// (World.SetSyncDelay): then the node stalls until the sync completes, and
// the writes it covers become durable only then — a crash during the stall
// loses them (or tears the last), exactly as power failing during fsync.
// Nothing the process sent after the Sync has left by then.
type Disk struct {
	cur    map[string][]byte // what Read sees
	synced map[string][]byte // what survives a crash
	dirty  []string          // keys written since the last Sync, in write order
	// last is the key of the most recent unsynced Write ("" with lastOK
	// false when there is none, or when the most recent change was a
	// Delete, which cannot tear).
	last   string
	lastOK bool
	// onSync, if set, is told of every Sync; on a slow disk it returns the
	// true time the sync completes (and stalls the node until then).
	onSync func() (done time.Duration, slow bool)
	// now reads true time, to settle syncs in flight.
	now func() time.Duration
	// inflight are keys covered by a slow Sync still in progress, durable
	// once true time reaches inflightDone.
	inflight     []string
	inflightDone time.Duration

	writes, syncs, lost, torn int
}

func newDisk() *Disk {
	return &Disk{cur: map[string][]byte{}, synced: map[string][]byte{}}
}

// Write stores a copy of value under key. It is not durable until Sync.
func (d *Disk) Write(key string, value []byte) {
	d.settle()
	d.cur[key] = slices.Clone(value)
	d.markDirty(key)
	d.last, d.lastOK = key, true
}

// Delete removes key. Like Write, it is not durable until Sync.
func (d *Disk) Delete(key string) {
	d.settle()
	delete(d.cur, key)
	d.markDirty(key)
	d.last, d.lastOK = "", false
}

func (d *Disk) markDirty(key string) {
	d.writes++
	if !slices.Contains(d.dirty, key) {
		d.dirty = append(d.dirty, key)
	}
}

// Read returns the current value of key, synced or not. The returned slice
// must not be modified.
func (d *Disk) Read(key string) ([]byte, bool) {
	v, ok := d.cur[key]
	return v, ok
}

// Keys returns the keys that start with prefix, sorted, so that a process
// restoring its state walks them in the same order in every run.
func (d *Disk) Keys(prefix string) []string {
	var keys []string
	for k := range d.cur { //detlint:sorted
		if strings.HasPrefix(k, prefix) {
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
	if d.onSync != nil {
		if done, slow := d.onSync(); slow {
			for _, k := range d.dirty {
				if !slices.Contains(d.inflight, k) {
					d.inflight = append(d.inflight, k)
				}
			}
			d.dirty = d.dirty[:0]
			d.inflightDone = max(d.inflightDone, done)
			return // the last write stays tearable until the sync completes
		}
	}
	d.commit(d.dirty)
	d.dirty = d.dirty[:0]
	d.last, d.lastOK = "", false
}

// commit makes the current values of keys durable.
func (d *Disk) commit(keys []string) {
	for _, k := range keys {
		if v, ok := d.cur[k]; ok {
			d.synced[k] = v
		} else {
			delete(d.synced, k)
		}
	}
}

// settle completes a slow sync whose time has come.
func (d *Disk) settle() {
	if len(d.inflight) == 0 || d.now == nil || d.now() < d.inflightDone {
		return
	}
	d.commit(d.inflight)
	d.inflight = d.inflight[:0]
	if len(d.dirty) == 0 {
		d.last, d.lastOK = "", false
	}
}

// unsettle is called by a crash: a slow sync still in flight never
// completes, so the writes it covered are as unsynced as the rest.
func (d *Disk) unsettle() {
	d.settle()
	if len(d.inflight) == 0 {
		return
	}
	keys := d.inflight
	for _, k := range d.dirty {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	d.dirty, d.inflight = keys, nil
}

// SyncDone reports when the slow sync now in flight completes; ok is
// false when none is in flight (everything synced is durable already). A
// harness uses it to learn when a decision the process just synced becomes
// a fact — and, with World.CrashedAt, whether a crash took it back.
func (d *Disk) SyncDone() (done time.Duration, ok bool) {
	d.settle()
	if len(d.inflight) == 0 {
		return 0, false
	}
	return d.inflightDone, true
}

// Dirty reports how many keys hold writes that a crash would lose.
func (d *Disk) Dirty() int {
	d.settle()
	return len(d.dirty) + len(d.inflight)
}

// crash drops every unsynced write: the disk comes back as of the last Sync.
func (d *Disk) crash() {
	d.unsettle()
	for _, k := range d.dirty {
		d.lost++
		if v, ok := d.synced[k]; ok {
			d.cur[k] = v
		} else {
			delete(d.cur, k)
		}
	}
	d.dirty = d.dirty[:0]
	d.last, d.lastOK = "", false
}

// crashTorn is crash, except that the most recent unsynced write, if the
// most recent change was a non-empty write, is torn rather than dropped:
// the first floor(len·keep) of its bytes (always fewer than all of them)
// survive under its key, durably. keep must lie in [0, 1). It reports
// whether a write was torn.
func (d *Disk) crashTorn(keep float64) bool {
	d.unsettle()
	key, ok := d.last, d.lastOK
	v := d.cur[key]
	if !ok || len(v) == 0 {
		d.crash()
		return false
	}
	n := int(float64(len(v)) * keep) // one IEEE product: the same on every platform
	n = max(0, min(n, len(v)-1))
	prefix := slices.Clone(v[:n])
	d.crash()
	d.lost-- // the torn key was counted as lost; it is torn instead
	d.torn++
	d.cur[key] = prefix
	d.synced[key] = prefix
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
