package filedisk_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/sim"
)

// Both disks implement the process contract, so the same service code runs
// on either.
var (
	_ process.Disk         = (*sim.Disk)(nil)
	_ process.Disk         = (*filedisk.Disk)(nil)
	_ process.SyncNotifier = (*sim.Disk)(nil)
	_ process.SyncNotifier = (*filedisk.Disk)(nil)
)

// harnessOnly are sim.Disk's methods for the simulator's harness, which a
// process never calls and a real disk does not have.
var harnessOnly = map[string]bool{"SyncDone": true, "Dirty": true, "Stats": true, "Bytes": true}

// TestDiskHasEverySimDiskMethod fails when a method is added to sim.Disk
// (or changed) without its twin here: the compile-time assertions above
// only check the methods already listed.
func TestDiskHasEverySimDiskMethod(t *testing.T) {
	simT, fileT := reflect.TypeFor[*sim.Disk](), reflect.TypeFor[*filedisk.Disk]()
	listed, notifier := reflect.TypeFor[process.Disk](), reflect.TypeFor[process.SyncNotifier]()
	for m := range simT.Methods() {
		if harnessOnly[m.Name] {
			continue
		}
		f, ok := fileT.MethodByName(m.Name)
		if !ok {
			t.Errorf("sim.Disk has %s%v, filedisk.Disk does not", m.Name, m.Type)
			continue
		}
		if got, want := signature(f.Type), signature(m.Type); got != want {
			t.Errorf("%s: sim.Disk's takes and returns %s, filedisk.Disk's %s", m.Name, want, got)
		}
		_, inDisk := listed.MethodByName(m.Name)
		_, inNotifier := notifier.MethodByName(m.Name)
		if !inDisk && !inNotifier {
			t.Errorf("sim.Disk.%s is not in process.Disk nor process.SyncNotifier: add it there, or to harnessOnly", m.Name)
		}
	}
}

// signature is a method's parameters and results without its receiver.
func signature(fn reflect.Type) string {
	var in, out []reflect.Type
	for i := 1; i < fn.NumIn(); i++ {
		in = append(in, fn.In(i))
	}
	for i := range fn.NumOut() {
		out = append(out, fn.Out(i))
	}
	return fmt.Sprint(in, out)
}
