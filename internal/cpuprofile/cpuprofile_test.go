package cpuprofile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartWritesAProfileAndRefusesASecond: a profile goes to the file
// once stopped; a second one while it runs is refused, as is a file that
// cannot be made; stopping twice does nothing more.
func TestStartWritesAProfileAndRefusesASecond(t *testing.T) {
	if _, err := Start(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil {
		t.Fatal("a profile into a directory that does not exist started")
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(filepath.Join(t.TempDir(), "second.pprof")); err == nil {
		t.Error("a second profile started while one runs")
	}
	stop()
	stop()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("the profile: %v, %v", st, err)
	}
}
