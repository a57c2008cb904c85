package filedisk

import (
	"fmt"
	"testing"
)

// The benchmarks measure what a replica pays: a Write or an Append made
// durable by its own Sync (one fsync each), a batch of writes under one
// Sync (group commit), and a Read. Run with -benchmem.

func benchDisk(b *testing.B) *Disk {
	d, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func BenchmarkWriteSync(b *testing.B) {
	d := benchDisk(b)
	keys := benchKeys(64)
	val := make([]byte, 128)
	b.SetBytes(int64(len(val)))
	for i := 0; b.Loop(); i++ {
		d.Write(keys[i%len(keys)], val)
		d.Sync()
	}
}

// BenchmarkAppendSync appends Raft-entry-sized records to a segment key,
// starting a new key every 4096 appends as lockservice does.
func BenchmarkAppendSync(b *testing.B) {
	d := benchDisk(b)
	keys := benchKeys(64)
	rec := make([]byte, 64)
	b.SetBytes(int64(len(rec)))
	for i := 0; b.Loop(); i++ {
		k := keys[i/4096%len(keys)]
		if i%4096 == 0 {
			d.Delete(k)
		}
		d.Append(k, rec)
		d.Sync()
	}
}

// BenchmarkWrite100Sync is group commit: 100 writes, one fsync.
func BenchmarkWrite100Sync(b *testing.B) {
	d := benchDisk(b)
	keys := benchKeys(1000)
	val := make([]byte, 128)
	b.SetBytes(100 * int64(len(val)))
	for i := 0; b.Loop(); i++ {
		for j := range 100 {
			d.Write(keys[(i*100+j)%len(keys)], val)
		}
		d.Sync()
	}
}

func BenchmarkRead(b *testing.B) {
	d := benchDisk(b)
	keys := benchKeys(1000)
	for _, k := range keys {
		d.Write(k, make([]byte, 128))
	}
	d.Sync()
	for i := 0; b.Loop(); i++ {
		if _, ok := d.Read(keys[i%len(keys)]); !ok {
			b.Fatal("missing key")
		}
	}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/%06d", i)
	}
	return keys
}
