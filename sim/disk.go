package sim

import (
	"slices"
	"strings"
)

// Disk is a node's durable key-value storage with an explicit sync barrier,
// modelled on write(2) + fsync(2): Write is visible to Read at once (the page
// cache) but survives a crash only once Sync has returned. A crash drops
// every write since the last Sync.
//
// Sync completes instantly in virtual time; a slow disk is a fault the
// nemesis models by pausing the node around it.
type Disk struct {
	cur    map[string][]byte // what Read sees
	synced map[string][]byte // what survives a crash
	dirty  []string          // keys written since the last Sync, in write order

	writes, syncs, lost int
}

func newDisk() *Disk {
	return &Disk{cur: map[string][]byte{}, synced: map[string][]byte{}}
}

// Write stores a copy of value under key. It is not durable until Sync.
func (d *Disk) Write(key string, value []byte) {
	d.cur[key] = slices.Clone(value)
	d.markDirty(key)
}

// Delete removes key. Like Write, it is not durable until Sync.
func (d *Disk) Delete(key string) {
	delete(d.cur, key)
	d.markDirty(key)
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

// Sync makes every write so far durable.
func (d *Disk) Sync() {
	d.syncs++
	for _, k := range d.dirty {
		if v, ok := d.cur[k]; ok {
			d.synced[k] = v
		} else {
			delete(d.synced, k)
		}
	}
	d.dirty = d.dirty[:0]
}

// Dirty reports how many keys hold writes that a crash would lose.
func (d *Disk) Dirty() int { return len(d.dirty) }

// crash drops every unsynced write: the disk comes back as of the last Sync.
func (d *Disk) crash() {
	for _, k := range d.dirty {
		d.lost++
		if v, ok := d.synced[k]; ok {
			d.cur[k] = v
		} else {
			delete(d.cur, k)
		}
	}
	d.dirty = d.dirty[:0]
}

// DiskStats counts what happened to a disk during a run.
type DiskStats struct {
	Writes int // Write and Delete calls
	Syncs  int // Sync calls
	Lost   int // keys whose unsynced writes were dropped by crashes
}

// Stats returns the disk's counters.
func (d *Disk) Stats() DiskStats { return DiskStats{Writes: d.writes, Syncs: d.syncs, Lost: d.lost} }
