package live

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

func init() {
	for _, t := range []Target{referenceTarget{}, lockdTarget{}} {
		if err := Register(t); err != nil {
			panic(err)
		}
	}
}

// referenceTarget is the reference lock service for real: three
// fencesim-node replicas (Raft + lock table, tokens are log indexes),
// each Raft link through its own proxy. realrt's transport sends a
// node's frames only on connections it dialled, so the link from→to is
// the proxy from dials for to's Raft port.
type referenceTarget struct{}

func (referenceTarget) Info() TargetInfo {
	return TargetInfo{Name: "reference", Doc: "the reference lock service: 3 fencesim-node replicas (Raft), fencing tokens = log indexes",
		Fenced: true, ClockFaults: true, DiskFaults: true, Binaries: []string{"fencesim-node", "fencesim-store", "fencesim-liveclient"}}
}

func (referenceTarget) Layout(s *Setup) (Layout, error) {
	const n = 3
	node, err := s.Bin("fencesim-node")
	if err != nil {
		return Layout{}, err
	}
	client, err := s.Bin("fencesim-liveclient")
	if err != nil {
		return Layout{}, err
	}
	raft := make([]string, n)
	httpAddr := make([]string, n)
	for i := range n {
		if raft[i], err = s.Free(); err != nil {
			return Layout{}, err
		}
		if httpAddr[i], err = s.Free(); err != nil {
			return Layout{}, err
		}
	}
	name := func(i int) string { return fmt.Sprintf("n%d", i+1) }
	var l Layout
	for i := range n {
		var peers []string
		for j := range n {
			addr := raft[j]
			if j != i {
				if addr, err = s.Link(name(i), name(j), raft[j]); err != nil {
					return Layout{}, err
				}
			}
			peers = append(peers, fmt.Sprintf("%d=%s=%s", j, addr, httpAddr[j]))
		}
		dir, err := s.Dir(name(i))
		if err != nil {
			return Layout{}, err
		}
		base := "http://" + httpAddr[i]
		l.Servers = append(l.Servers, Server{
			Name: name(i), Replica: true, Dir: dir,
			Argv: []string{node, "-id", fmt.Sprint(i), "-data", dir, "-listen", httpAddr[i], "-peer-listen", raft[i],
				"-peers", strings.Join(peers, ","), "-drain-timeout", "1s", "-handover-timeout", "0s",
				"-peer-insecure", "true"}, // the runner's link proxies are on loopback; certificates would only cost time
			Env:      []string{"FENCESIM_TEST_HOOKS=1"},
			ReadyURL: base + "/readyz", Endpoint: base, TestURL: base,
		})
	}
	l.Client = ClientProgram{Argv: []string{client}}
	l.Leader = func(ctx context.Context) (string, bool) { return apiLeader(ctx, l.Servers) }
	return l, nil
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

// lockdTarget is the Redis-backed lock API (seed 000's design): two
// fencesim-lockd instances over one real redis-server, which keeps an
// fsynced append-only file so that a crash and restart keep the fencing
// counter. Each instance's Redis connection goes through its own proxy.
type lockdTarget struct{}

func (lockdTarget) Info() TargetInfo {
	// No clock faults: lockd's leases live on Redis's clock (PEXPIRE),
	// which no endpoint can skew; its own test clock moves only its
	// admission windows.
	return TargetInfo{Name: "lockd", Doc: "the Redis lock API: 2 fencesim-lockd instances over one redis-server (appendfsync always), tokens from a Redis counter per resource",
		Fenced: true, TokensPerResource: true, Binaries: []string{"fencesim-lockd", "redis-server", "fencesim-store", "fencesim-liveclient"}}
}

func (lockdTarget) Layout(s *Setup) (Layout, error) {
	const n = 2
	lockd, err := s.Bin("fencesim-lockd")
	if err != nil {
		return Layout{}, err
	}
	redis, err := s.Bin("redis-server")
	if err != nil {
		return Layout{}, err
	}
	client, err := s.Bin("fencesim-liveclient")
	if err != nil {
		return Layout{}, err
	}
	raddr, err := s.Free()
	if err != nil {
		return Layout{}, err
	}
	rdir, err := s.Dir("redis")
	if err != nil {
		return Layout{}, err
	}
	_, rport, _ := net.SplitHostPort(raddr)
	var l Layout
	for i := range n {
		name := fmt.Sprintf("l%d", i+1)
		addr, err := s.Free()
		if err != nil {
			return Layout{}, err
		}
		via, err := s.Link(name, "redis", raddr)
		if err != nil {
			return Layout{}, err
		}
		base := "http://" + addr
		l.Servers = append(l.Servers, Server{
			Name: name, Replica: true, Argv: []string{lockd},
			Env: []string{"FENCESIM_LISTEN=" + addr, "FENCESIM_REDIS_ADDR=" + via,
				"FENCESIM_DRAIN_TIMEOUT=1s"},
			ReadyURL: base + "/readyz", Endpoint: base,
		})
	}
	redisSrv := Server{Name: "redis", Dir: rdir,
		Argv: []string{redis, "--bind", "127.0.0.1", "--port", rport, "--dir", rdir, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"},
		Ready: func(ctx context.Context) error { return redisPing(ctx, raddr) },
	}
	l.Servers = append([]Server{redisSrv}, l.Servers...)
	l.Client = ClientProgram{Argv: []string{client}}
	return l, nil
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
