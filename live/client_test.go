package live

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencesim/fencesim/live/liveclient"
)

// TestCallEndsWhenTheClientExits: a call to a client incarnation that
// exits without answering ends at once, unknown, instead of waiting out
// its timeout (a crashed client's workload goes on with the restarted
// incarnation, as the simulator's does), and so does a call made after
// it exited; a call to one that answers returns the reply.
func TestCallEndsWhenTheClientExits(t *testing.T) {
	dir := t.TempDir()
	mute := newClientProc(&proc{name: "mute", argv: []string{"sh", "-c", "read line; exit 0"}, log: filepath.Join(dir, "mute.log")})
	if err := mute.launch(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, _, ok := mute.call(context.Background(), liveclient.Command{Op: liveclient.OpRead, Key: "r"}, 30*time.Second)
	if ok || time.Since(start) > 10*time.Second {
		t.Fatalf("call to an exited client: ok %v after %v, want unknown at once", ok, time.Since(start))
	}
	start = time.Now()
	if _, _, _, ok := mute.call(context.Background(), liveclient.Command{Op: liveclient.OpRead, Key: "r"}, 30*time.Second); ok || time.Since(start) > time.Second {
		t.Fatalf("a call after the client exited: ok %v after %v, want unknown at once", ok, time.Since(start))
	}
	mute.mu.Lock()
	left := len(mute.pending)
	mute.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls still pending after the client exited", left)
	}

	echo := newClientProc(&proc{name: "echo", argv: []string{"sh", "-c", `read line; echo '{"id":1,"ok":true}'; read line`}, log: filepath.Join(dir, "echo.log")})
	if err := echo.launch(); err != nil {
		t.Fatal(err)
	}
	defer echo.closeStdin()
	rep, _, _, ok := echo.call(context.Background(), liveclient.Command{Op: liveclient.OpRead, Key: "r"}, 30*time.Second)
	if !ok || !rep.OK {
		t.Fatalf("call to an answering client: %+v, ok %v", rep, ok)
	}
}
