package filedisk

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// crashHere is what a simulated crash panics with.
type crashHere string

// TestCrashAtEveryStepOfCompactionAndRoll crashes a disk at each step of
// a compaction and of a segment roll (and at each removal of an old
// segment), then reopens the directory: the state is what was synced —
// the Sync that triggered the step had made its batch durable first — no
// temp file or superseded segment is left, and the disk goes on working.
func TestCrashAtEveryStepOfCompactionAndRoll(t *testing.T) {
	steps := []struct {
		name string
		nth  int // crash at the nth time the step is reached
	}{
		{"roll-created", 1}, {"roll-dir-synced", 1},
		{"snapshot-created", 1}, {"snapshot-written", 1}, {"snapshot-synced", 1},
		{"renamed", 1}, {"renamed-dir-synced", 1},
		{"removed", 1}, {"removed", 2}, {"removed-dir-synced", 1},
	}
	opts := Options{SegmentBytes: 200, CompactBytes: 700}
	for _, st := range steps {
		t.Run(fmt.Sprint(st.name, "#", st.nth), func(t *testing.T) {
			d := open(t, t.TempDir(), opts)
			reached := 0
			d.crashAt = func(step string) {
				if step == st.name {
					if reached++; reached == st.nth {
						panic(crashHere(step))
					}
				}
			}
			want, synced := map[string]string{}, map[string]string{}
			crashed := false
			for i := 0; i < 200 && !crashed; i++ {
				k, v := fmt.Sprint("k", i%4), strings.Repeat(fmt.Sprint(i), 20)
				d.Write(k, []byte(v))
				want[k] = v
				d.Append("log", []byte{byte(i)})
				want["log"] += string([]byte{byte(i)})
				if _, ok := recovered(d.Sync).(crashHere); ok {
					crashed = true
				} else {
					synced = maps.Clone(want)
				}
			}
			if strings.HasPrefix(st.name, "roll-") {
				want = synced // a roll comes before the batch is written
			}
			if !crashed {
				t.Fatalf("step %s was never reached %d times", st.name, st.nth)
			}
			d = crash(t, d, opts)
			checkState(t, d, want, "after the crash")
			files := dirFiles(t, d.dir)
			for _, f := range files {
				if strings.HasSuffix(f, tmpSuffix) {
					t.Errorf("temp file %s left after Open", f)
				}
			}
			if snaps := slices.IndexFunc(files, func(f string) bool { return strings.HasPrefix(f, snapPrefix) }); snaps > 0 {
				t.Errorf("segments older than the snapshot left after Open: %v", files)
			}
			d.Write("after", []byte("crash"))
			d.Sync()
			want["after"] = "crash"
			d = crash(t, d, opts)
			checkState(t, d, want, "after writing on and reopening")
		})
	}
}

// dirFiles lists the log's files in dir, sorted by seq.
func dirFiles(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != lockName {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		sa, _, _ := parseSegmentName(strings.TrimSuffix(a, tmpSuffix))
		sb, _, _ := parseSegmentName(strings.TrimSuffix(b, tmpSuffix))
		return cmpUint(sa, sb)
	})
	return names
}

// TestCompactionKeepsTheLogProportionalToLiveData: overwriting a few keys
// forever keeps the directory small.
func TestCompactionKeepsTheLogProportionalToLiveData(t *testing.T) {
	opts := Options{SegmentBytes: 1 << 10, CompactBytes: 4 << 10}
	d := open(t, t.TempDir(), opts)
	for i := range 500 {
		d.Write(fmt.Sprint("k", i%8), []byte(strings.Repeat("x", 100)))
		d.Sync()
	}
	var total int64
	for _, f := range dirFiles(t, d.dir) {
		info, _ := os.Stat(d.dir + "/" + f)
		total += info.Size()
	}
	if limit := opts.CompactBytes + opts.SegmentBytes; total > limit {
		t.Errorf("after 500 overwrites of 8 keys the log is %d bytes, want at most %d", total, limit)
	}
}
