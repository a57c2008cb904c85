package live

import (
	"context"
	"fmt"
	"net"
)

func init() {
	if err := Register(redlockTarget{}); err != nil {
		panic(err)
	}
}

// redlockNodes is Redlock's node count: a majority of five, as
// redlock-gc-pause simulates and the Redis documentation deploys it.
const redlockNodes = 5

// redlockTarget is Redlock as people run it: redsync
// (github.com/go-redsync/redsync/v4) in each client process over five
// independent redis-servers, each client's connection to each node
// through its own proxy. Redlock issues no fencing token, so the harness
// numbers grants and the store runs unfenced. The nodes keep an fsynced
// append-only file, the persistence Redlock's description asks for so
// that a crashed node does not forget a key it granted. Redis takes no
// clock endpoint (its expiry clock is the machine's), so clock faults
// are skipped; disk faults too.
type redlockTarget struct{}

func (redlockTarget) Info() TargetInfo {
	return TargetInfo{Name: "redlock", Doc: "Redlock: redsync over 5 redis-servers (appendfsync always), no fencing tokens (the store runs unfenced)",
		Binaries: []string{"redis-server", "fencesim-store", "fencesim-live-redlock"}, Options: []string{"prefix"},
		Servers: []string{"redis1", "redis2", "redis3", "redis4", "redis5"}}
}

func (redlockTarget) Layout(s *Setup) (Layout, error) {
	redis, err := s.Bin("redis-server")
	if err != nil {
		return Layout{}, err
	}
	client, err := s.Bin("fencesim-live-redlock")
	if err != nil {
		return Layout{}, err
	}
	var l Layout
	for i := range redlockNodes {
		name := fmt.Sprintf("redis%d", i+1)
		addr, err := s.Free()
		if err != nil {
			return Layout{}, err
		}
		dir, err := s.Dir(name)
		if err != nil {
			return Layout{}, err
		}
		_, port, _ := net.SplitHostPort(addr)
		l.Servers = append(l.Servers, Server{
			Name: name, Replica: true, Dir: dir,
			Argv: []string{redis, "--bind", "127.0.0.1", "--port", port, "--dir", dir, "--save", "",
				"--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"},
			Ready:    func(ctx context.Context) error { return redisPing(ctx, addr) },
			Endpoint: addr,
		})
	}
	l.Client = ClientProgram{Argv: []string{client}}
	return l, nil
}
