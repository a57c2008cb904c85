package live

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOutDirLocked: a second run given an -out directory another run
// holds is refused, naming the holder; once released, it is free again.
func TestOutDirLocked(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockOut(dir); !errors.Is(err, ErrOutInUse) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second lock: %v, want ErrOutInUse naming the pid", err)
	}
	unlock()
	unlock2, err := LockOut(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}

// TestInterruptDuringStartUp: a run interrupted while its servers start
// ends at once with ErrInterrupted (simrun live: exit 130), not a start
// failure, and leaves nothing running.
func TestInterruptDuringStartUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Options{Target: fakeTarget{script: "exec sleep 60"}, Plan: shortPlan(t), BinDirs: []string{binDir},
		Dir: t.TempDir(), StartTimeout: 20 * time.Second, StopGrace: 5 * time.Second})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
	// Not a speed test: the run must not wait out its 20 s start
	// timeout nor the 5 s grace after SIGTERM.
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the interrupted run took %v to end: it waited for the start timeout or the stop grace", d)
	}
	noLeftovers(t, res.PIDs)
}
