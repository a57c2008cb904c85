package live

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/fencesim/fencesim/internal/etcdcluster"
)

func init() {
	for _, t := range []Target{etcdTarget{fenced: false}, etcdTarget{fenced: true}} {
		if err := Register(t); err != nil {
			panic(err)
		}
	}
}

// etcdMembers is the cluster size: three, as Jepsen tested etcd 3.4.3.
const etcdMembers = 3

// etcdTarget is etcd's concurrency.Mutex (client v3, in the client
// binary fencesim-live-etcd, its own module) on a real three-member
// etcd-server cluster (Debian's etcd 3.4): a session lease per hold, kept
// alive by the client in the background. Unfenced (etcd-mutex), the
// client uses the lock as a mutex, the way Jepsen found unsafe under
// pauses; fenced (etcd-mutex-fenced), it sends the lock key's create
// revision as the fencing token and the store enforces it.
//
// TTL: an etcd lease has whole seconds, so the client rounds the
// scenario's TTL up (a lease never ends before the scenario's TTL;
// 1500ms holds 2s). etcd's shortest lease is 1.5 election timeouts
// rounded up to a second, so the members run a 500ms election timeout
// (50ms heartbeats) and a 1s TTL stays 1s; a lease ends on the leader's
// clock, checked every 500ms, so it can outlive its TTL by that much.
//
// Faults: client↔member links go through the harness's proxies; the
// members' own links do not, since a member dials each peer at one
// advertised URL, the same for every dialer, so a proxy cannot stand for
// one directed link. Pauses and crashes reach the members; clock faults
// cannot (etcd has no clock endpoint and reads time from the vDSO), nor
// disk faults.
type etcdTarget struct{ fenced bool }

func (t etcdTarget) Info() TargetInfo {
	info := TargetInfo{Name: "etcd-mutex", Fenced: t.fenced,
		Doc:      "etcd's concurrency.Mutex on 3 etcd-server members, used as a plain mutex (the store runs unfenced)",
		Binaries: []string{"etcd", "fencesim-store", "fencesim-live-etcd"}, Options: []string{"prefix"},
		Servers: []string{"etcd1", "etcd2", "etcd3"}, LeaseLife: etcdLeaseLife, SpuriousBusy: etcdSpuriousBusy}
	if t.fenced {
		info.Name = "etcd-mutex-fenced"
		info.Doc = "etcd's concurrency.Mutex on 3 etcd-server members, the lock key's create revision as the fencing token"
	}
	return info
}

// etcdSpuriousBusy is why etcd's mutex may refuse a lock nobody holds:
// TryLock creates the session's key and answers ErrLocked if any key
// under the mutex's prefix is older — including the key of another
// TryLock that is failing itself and has not yet deleted it, or of an
// acquire whose answer was lost, until its lease ends. The mutex is
// still safe (the oldest key holds it); its refusals are not evidence of
// a holder.
const etcdSpuriousBusy = "etcd's TryLock answers ErrLocked for any older key under the lock's prefix, including a failing TryLock's own key or a lost acquire's, so a refusal does not prove that anyone holds the lock"

// etcdLeaseCheck is how often etcd's leader looks for expired leases: a
// lease ends up to this long after its TTL.
const etcdLeaseCheck = 500 * time.Millisecond

// etcdLeaseLife is the longest a lease the client asks for ttl lives: the
// client's whole seconds (etcdclient.LeaseSeconds: ttl rounded up, at
// least one), and one expiry check.
func etcdLeaseLife(ttl time.Duration) time.Duration {
	secs := max((ttl+time.Second-1)/time.Second, 1)
	return secs*time.Second + etcdLeaseCheck
}

func (t etcdTarget) Layout(s *Setup) (Layout, error) {
	bin, err := s.Bin("etcd")
	if err != nil {
		return Layout{}, fmt.Errorf("%w (etcd is Debian's etcd-server: apt-get install etcd-server)", err)
	}
	client, err := s.Bin("fencesim-live-etcd")
	if err != nil {
		return Layout{}, err
	}
	name := func(i int) string { return fmt.Sprintf("etcd%d", i+1) }
	var clientPorts, peerPorts []int
	dirs := make([]string, etcdMembers)
	for i := range etcdMembers {
		for _, ports := range []*[]int{&clientPorts, &peerPorts} {
			addr, err := s.Free()
			if err != nil {
				return Layout{}, err
			}
			_, p, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(p)
			*ports = append(*ports, port)
		}
		if dirs[i], err = s.Dir(name(i)); err != nil {
			return Layout{}, err
		}
	}
	plan, err := etcdcluster.Plan(func(i int) string { return dirs[i] }, clientPorts, peerPorts, etcdcluster.Options{
		Token: "fencesim-live", HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond})
	if err != nil {
		return Layout{}, err
	}
	hc := &http.Client{Timeout: time.Second}
	var l Layout
	for i, m := range plan {
		url := m.ClientURL
		l.Servers = append(l.Servers, Server{
			Name: name(i), Replica: true, Dir: m.DataDir,
			Argv:           append([]string{bin}, m.Args...),
			Ready:          func(ctx context.Context) error { return etcdcluster.Healthy(ctx, hc, url) },
			Endpoint:       url,
			UnproxiedPeers: true,
			// A member's data is fsynced; a graceful stop would only
			// wait for a leadership hand-over to peers stopping too.
			StopSignal: syscall.SIGKILL,
		})
	}
	l.Client = ClientProgram{Argv: []string{client}, Options: map[string]string{"fenced": strconv.FormatBool(t.fenced)}}
	l.Leader = func(ctx context.Context) (string, bool) { return etcdLeader(ctx, hc, l.Servers) }
	return l, nil
}

// etcdLeader asks each member's status (the JSON gateway's
// /v3/maintenance/status) and names the member whose id is the leader
// it reports.
func etcdLeader(ctx context.Context, hc *http.Client, servers []Server) (string, bool) {
	for _, s := range servers {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/v3/maintenance/status", bytes.NewReader([]byte("{}")))
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.Leader != "" && st.Leader == st.Header.MemberID {
			return s.Name, true
		}
	}
	return "", false
}
