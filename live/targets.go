package live

import (
	"context"
	"embed"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// The built-in targets that a target file describes (targets/*.json):
// the reference (three fencesim-node replicas, each Raft link through
// its own proxy: realrt's transport sends a node's frames only on
// connections it dialled, so the link from→to is the proxy from dials for
// to's Raft port) and lockd (two fencesim-lockd instances over one
// redis-server that keeps an fsynced append-only file, so that a crash
// and restart keep the fencing counter; each instance's Redis connection
// through its own proxy; no clock faults: lockd's leases live on Redis's
// clock, which no endpoint can skew) and redlock (redsync,
// github.com/go-redsync/redsync/v4, in each client process,
// fencesim-live-redlock, over five independent redis-servers, each
// client's connection to each node through its own proxy; Redlock issues
// no fencing token, so the harness numbers grants and the store runs
// unfenced; the nodes keep an fsynced append-only file, the persistence
// Redlock's description asks for so that a crashed node does not forget a
// key it granted; Redis takes no clock endpoint, so clock and disk faults
// are not applicable). etcd's target is Go (etcd.go): its members' flags
// and its leader come from internal/etcdcluster and etcd's status API.
//
//go:embed targets/*.json
var builtinFiles embed.FS

func init() {
	entries, err := builtinFiles.ReadDir("targets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := builtinFiles.ReadFile("targets/" + e.Name())
		if err != nil {
			panic(err)
		}
		f, err := parseTargetFile(b, "")
		if err != nil {
			panic(fmt.Sprintf("built-in target %s: %v", e.Name(), err))
		}
		if err := Register(f); err != nil {
			panic(err)
		}
	}
}

// apiLeader asks every server of the lock API for a lock directly (not
// through a proxy): the leader answers it, a follower redirects.
func apiLeader(ctx context.Context, servers []Server) (string, bool) {
	c := &http.Client{Timeout: 500 * time.Millisecond,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, s := range servers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/v1/locks/leader-probe", nil)
		if err != nil {
			continue
		}
		resp, err := c.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return s.Name, true
		}
	}
	return "", false
}

// redisPing is redis-server's ready check: PING answered +PONG.
func redisPing(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	b := make([]byte, 64)
	k, err := c.Read(b)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(b[:k]), "+PONG") {
		return fmt.Errorf("redis answered %q to PING", b[:k])
	}
	return nil
}
