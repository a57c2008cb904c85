package filedisk

import (
	"fmt"
	"sync"
	"testing"
	"time"
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

// BenchmarkAppendSyncDisks is BenchmarkAppendSync on 1, 2 and 3 disks
// (directories) of one file system at once, as the benchmark's three
// replicas share this machine's one disk: ns/op is each disk's time per
// Sync while the others sync too, and syncs/s is all disks' together. If
// the device completes flushes one at a time, syncs/s stays where one disk
// has it and ns/op grows with the disks.
//
//	go test -run '^$' -bench AppendSyncDisks -benchtime 3s ./filedisk
func BenchmarkAppendSyncDisks(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			disks := make([]*Disk, n)
			for i := range disks {
				disks[i] = benchDisk(b)
			}
			rec := make([]byte, 200)
			var wg sync.WaitGroup
			start := time.Now()
			b.ResetTimer()
			for _, d := range disks {
				wg.Go(func() {
					for i := range b.N {
						d.Append("log", rec)
						d.Sync()
						if i%4096 == 4095 {
							d.Delete("log")
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "syncs/s")
		})
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
