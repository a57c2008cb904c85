package process

// Disk is a node's durable key-value storage, as a process sees it, with an
// explicit sync barrier modelled on write(2) + fsync(2): a write is visible
// to Read at once but survives a crash only once Sync has returned. A crash
// keeps every write synced before it; of the writes after the last Sync it
// may keep some, none, or the last one torn (a prefix of what it wrote; a
// Truncate or Delete never tears). A process that must not forget a
// decision syncs before it acts on it, and one that appends records seals
// them so that it can tell a torn tail — and cuts that tail with Truncate.
//
// The simulator's sim.Disk implements it, with crash, tear and slow-disk
// faults in reach of the harness only; a file-backed disk implements it for
// real. The method set is exactly sim.Disk's, so that either can stand in.
type Disk interface {
	// Write stores a copy of value under key, replacing what was there.
	Write(key string, value []byte)
	// Append adds data to the end of key's value, creating it if missing,
	// as write(2) does on a file opened with O_APPEND.
	Append(key string, data []byte)
	// Truncate cuts key's value to its first size bytes, as ftruncate(2)
	// does to a file; a missing key or a size at or past the value's
	// length leaves it as it is. Like a write it is durable once Sync
	// returns, but it cannot tear: a crash keeps key as of the last Sync
	// or cut to size, never shorter. It is how a process drops a torn tail
	// without putting what it keeps at risk — rewriting the kept prefix
	// with Write would let a torn crash during that rewrite keep only a
	// prefix of the prefix, losing records that were synced.
	Truncate(key string, size int)
	// Delete removes key.
	Delete(key string)
	// Read returns the current value of key, synced or not, and whether it
	// exists. The caller must not modify the returned slice.
	Read(key string) ([]byte, bool)
	// Keys returns the keys that start with prefix, sorted, so that a
	// process restoring its state walks them in the same order every run.
	Keys(prefix string) []string
	// Sync makes every write so far durable.
	Sync()
}

// SyncNotifier is a Disk that can also sync without making the process
// wait (etcd raft's asynchronous storage writes): a process keeps handling
// messages while its writes reach the disk, and acts on what depends on
// them once told they did. Both of the project's disks implement it.
type SyncNotifier interface {
	// SyncThen makes every write so far durable, as Sync does, without
	// waiting for it. It reports true when they are durable already (done
	// is then never called). Otherwise it reports false, and done runs
	// once they are durable — unless the process crashed or stopped
	// first. The Env's disk runs it as an event of the process, never
	// during another of its events (filedisk.Disk itself calls it on its
	// writer goroutine; realrt posts it to the node's executor). Syncs
	// complete in the order they were asked for, and a Sync makes the
	// writes of every SyncThen before it durable too (their done still
	// runs, later).
	SyncThen(done func()) bool
}
