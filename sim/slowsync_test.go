package sim

import (
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
)

// syncer writes key=v1, syncs, and writes key=v2 and syncs one millisecond
// later.
type syncer struct{}

func (syncer) Start(env Env) {
	if _, ok := env.Disk().Read("k"); ok {
		return // restarted: leave the disk as the crash left it
	}
	env.Disk().Write("k", []byte("v1"))
	env.Disk().Sync()
	env.Clock().AfterFunc(time.Millisecond, func() {
		env.Disk().Write("k", []byte("v2-longer"))
		env.Disk().Sync()
	})
}
func (syncer) Receive(Env, NodeID, Message) {}

// TestSlowSyncIsDurableOnlyWhenItCompletes: on a slow disk, a crash during
// the stall loses (or tears) what the sync covered; a crash after it keeps it.
func TestSlowSyncIsDurableOnlyWhenItCompletes(t *testing.T) {
	cases := []struct {
		name    string
		crashAt time.Duration
		torn    bool
		want    string
	}{
		{"crash during the second sync loses it", 2 * time.Millisecond, false, "v1"},
		{"torn crash during the second sync keeps a prefix", 2 * time.Millisecond, true, "v2-l"},
		{"crash after the second sync keeps it", 5 * time.Millisecond, false, "v2-longer"},
		{"crash during the first sync loses everything", 500 * time.Microsecond, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, _ := New(Config{Seed: 1, Network: DefaultNetwork()})
			id, _ := w.AddNode("p", func() Process { return syncer{} }, fakeclock.Config{})
			w.SetSyncDelay(id, 3*time.Millisecond/2) // the first sync ends at 1.5 ms, the second at 4 ms
			w.Run(c.crashAt, 100)
			if c.torn {
				w.CrashTorn(id, 0.5)
			} else {
				w.Crash(id)
			}
			got, _ := w.Disk(id).Read("k")
			if string(got) != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
