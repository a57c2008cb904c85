package filedisk

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The crash-consistency test runs a writer in a child process (this test
// binary again, with crashDirEnv set), kills it with SIGKILL at a random
// moment, reopens its directory and checks that every Sync the child
// acknowledged is there, whole, and at most the one Sync in flight beyond.
// Every other round the child syncs with SyncThen instead, acknowledging
// from its done, with up to crashAhead syncs in flight: then everything
// acknowledged is there, and at most crashAhead syncs beyond.

const (
	crashDirEnv   = "FILEDISK_CRASH_DIR"
	crashAsyncEnv = "FILEDISK_CRASH_ASYNC"
	crashKeep     = 20 // the child keeps the last crashKeep values
	crashAhead    = 8  // SyncThen's in flight in an async child
)

// crashOptions are small enough that the child rolls segments and
// compacts often, so kills land in those too.
var crashOptions = Options{SegmentBytes: 32 << 10, CompactBytes: 128 << 10}

// crashValue is the value of iteration n: its size and bytes follow from
// n, so the parent can check it without being told.
func crashValue(n uint64) []byte {
	v := make([]byte, 1+n*7919%8192)
	for i := range v {
		v[i] = byte(n + uint64(i)*31)
	}
	return v
}

func crashKey(n uint64) string { return fmt.Sprintf("v/%08d", n) }

// TestCrashChild is the writer; it does nothing unless run as the child.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestSIGKILLKeepsEverythingAcknowledged")
	}
	ack := os.NewFile(3, "ack")
	d, err := Open(dir, crashOptions)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	if b, ok := d.Read("seq"); ok {
		n = binary.BigEndian.Uint64(b)
	}
	async := os.Getenv(crashAsyncEnv) == "1"
	inflight := make(chan struct{}, crashAhead)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); { // the parent kills it long before
		n++
		d.Write("seq", binary.BigEndian.AppendUint64(nil, n))
		d.Write(crashKey(n), crashValue(n))
		d.Append("log", binary.BigEndian.AppendUint64(nil, n))
		if n > crashKeep {
			d.Delete(crashKey(n - crashKeep))
		}
		if async {
			inflight <- struct{}{}
			seq := n
			acked := func() {
				<-inflight
				if _, err := fmt.Fprintf(ack, "%d\n", seq); err != nil {
					panic(err)
				}
			}
			if d.SyncThen(acked) {
				acked()
			}
			continue
		}
		d.Sync()
		if _, err := fmt.Fprintf(ack, "%d\n", n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSIGKILLKeepsEverythingAcknowledged(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	var acked uint64 // the last Sync any child acknowledged
	torn, compacted := 0, 0
	for round := range 6 {
		delay := time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
		async := round%2 == 1
		last, durable := crashRound(t, dir, delay, async)
		if last > acked {
			acked = last
		}
		d := open(t, dir, crashOptions)
		rec := d.Recovery()
		if rec.TornBytes > 0 {
			torn++
		}
		if strings.HasPrefix(d.segments[0], snapPrefix) {
			compacted++
		}
		ahead := uint64(1)
		if async {
			ahead = crashAhead
		}
		n := checkCrashState(t, d, acked, ahead)
		t.Logf("round %d (async %v): killed %v after the first ack; %d acknowledged, %d durable, %d torn bytes cut (%s)",
			round, async, delay, acked, n, rec.TornBytes, durable)
		acked = n // what the next child goes on from
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 6 kills left a torn tail; %d reopened a compacted log", torn, compacted)
}

// crashRound runs a child on dir, kills it delay after its first ack, and
// returns the last seq it acknowledged.
func crashRound(t *testing.T, dir string, delay time.Duration, async bool) (uint64, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	if async {
		cmd.Env = append(cmd.Env, crashAsyncEnv+"=1")
	}
	cmd.ExtraFiles = []*os.File{w}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var last atomic.Uint64
	first, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			n, err := strconv.ParseUint(sc.Text(), 10, 64)
			if err != nil {
				return // a line cut by the kill is not an ack
			}
			if last.Swap(n) == 0 {
				close(first)
			}
		}
	}()
	select {
	case <-first:
	case <-done:
		cmd.Wait()
		t.Fatalf("the child exited before acknowledging anything:\n%s", stderr.String())
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the child acknowledged nothing in 20 s:\n%s", stderr.String())
	}
	time.Sleep(delay)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	err = cmd.Wait()
	<-done // every ack the child wrote before it died has been read
	if cmd.ProcessState.Exited() {
		t.Fatalf("the child exited (%v) instead of being killed:\n%s", err, stderr.String())
	}
	return last.Load(), cmd.ProcessState.String()
}

// checkCrashState checks d against the child's writes: seq n is acked or
// up to ahead after it (the syncs in flight), values n−crashKeep+1 … n
// are whole and no others exist, and the log holds 1 … n in order. It
// returns n.
func checkCrashState(t *testing.T, d *Disk, acked, ahead uint64) uint64 {
	t.Helper()
	b, ok := d.Read("seq")
	if !ok {
		t.Fatalf("seq missing after the kill; %d Syncs were acknowledged", acked)
	}
	n := binary.BigEndian.Uint64(b)
	if n < acked || n > acked+ahead {
		t.Fatalf("seq %d durable, %d acknowledged: want %d to %d", n, acked, acked, acked+ahead)
	}
	from := uint64(1)
	if n > crashKeep {
		from = n - crashKeep + 1
	}
	keys := d.Keys("v/")
	if uint64(len(keys)) != n-from+1 {
		t.Errorf("%d values present, want %d (%d … %d)", len(keys), n-from+1, from, n)
	}
	for i := from; i <= n; i++ {
		if v, ok := d.Read(crashKey(i)); !ok || !bytes.Equal(v, crashValue(i)) {
			t.Errorf("value %d: present %v, intact %v", i, ok, bytes.Equal(v, crashValue(i)))
		}
	}
	log, _ := d.Read("log")
	if uint64(len(log)) != 8*n {
		t.Fatalf("log holds %d bytes, want %d", len(log), 8*n)
	}
	for i := range n {
		if got := binary.BigEndian.Uint64(log[8*i:]); got != i+1 {
			t.Fatalf("log entry %d is %d", i+1, got)
		}
	}
	return n
}
