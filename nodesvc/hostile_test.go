package nodesvc_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// peerConn is a forger on a node's Raft port: it says hello as member
// `as` (the transport's hello: magic, version, from, to) and then writes
// frames the node's codec decodes — well formed, hostile in content.
type peerConn struct {
	c      net.Conn
	as, to process.NodeID
}

func dialPeer(t *testing.T, addr string, as, to process.NodeID) *peerConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hello := append([]byte("FSRT\x01"), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(as)), uint64(to))...)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	return &peerConn{c: c, as: as, to: to}
}

// send writes m as one frame; false once the node closed the connection.
func (p *peerConn) send(m raft.Message) bool {
	b, err := wire.Codec{}.AppendMessage(make([]byte, 4), reference.RaftMessage{M: m})
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	p.c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err = p.c.Write(b)
	return err == nil
}

// hostileFrame draws a well-formed forged Raft message from p's member to
// its node: any type, terms around the attack's (1000) and near 2^64,
// indexes and commits far past any log, entries whose data is a command,
// garbage or nothing.
func hostileFrame(rnd *rand.Rand, p *peerConn) raft.Message {
	pick := func(vs ...uint64) uint64 { return vs[rnd.IntN(len(vs))] }
	m := raft.Message{
		Type:       raft.MessageType(1 + rnd.IntN(9)),
		From:       raft.ID(p.as) + 1, // Raft ids are node ids + 1
		To:         raft.ID(p.to) + 1,
		Term:       pick(1, 2, 3, 1000, 1001, raft.MaxTerm, math.MaxUint64, rnd.Uint64N(20)+1),
		Index:      pick(0, 1, 5, 50, 1<<40, math.MaxUint64, rnd.Uint64N(100)),
		Commit:     pick(0, 1, 8, 100, 1<<40, math.MaxUint64, rnd.Uint64N(100)),
		Reject:     rnd.IntN(2) == 0,
		RejectHint: pick(0, 3, math.MaxUint64),
		Transfer:   rnd.IntN(4) == 0,
	}
	m.LogTerm = min(m.Term, pick(0, 1, 2, 1000, m.Term))
	if m.Type == raft.MsgApp {
		for i := range rnd.IntN(4) {
			e := raft.Entry{Term: m.LogTerm, Index: m.Index + uint64(i) + 1}
			switch rnd.IntN(3) {
			case 0:
				e.Data = []byte{byte(rnd.Uint32()), 0xff, 0x13}
			case 1:
				e.Data = forgedAcquire
			}
			m.Entries = append(m.Entries, e)
		}
	}
	return m
}

// forgedAcquire is a log entry as the replica encodes one (codec version
// 1, CmdAcquire, no flags, resource "forged", client "mallory", TTL 1h,
// token, request and since 0): a forger that speaks for a member can
// make it commit, which is why the peers authenticate.
var forgedAcquire = binary.AppendUvarint(append([]byte{1, byte(reference.CmdAcquire), 0, 6}, "forged\x07mallory"...), uint64(time.Hour))

func init() { forgedAcquire = append(forgedAcquire, 0, 0, 0) }

// appliedIndex reads node i's fencesim_node_raft_applied_index gauge.
func appliedIndex(t *testing.T, c *nodesvctest.Cluster, i int) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Nodes[i].Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fencesim_node_raft_applied_index" {
			return uint64(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatal("no fencesim_node_raft_applied_index")
	return 0
}

// acquireAny acquires resource at whichever node leads, for up to 10s.
func acquireAny(t *testing.T, c *nodesvctest.Cluster, resource string) (uint64, bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := c.Nodes[c.Leader()].Acquire(ctx, resource, "owner-"+resource, time.Minute, 0, "req-"+resource)
		cancel()
		if err == nil {
			return l.Token, true
		}
	}
	return 0, false
}

// TestHostilePeerFrames replays the forged-frame attack against a running
// three-node cluster with no peer authentication (the insecure setting),
// then drives every node's peer transport with forged well-formed frames
// while clients acquire; no node panics (a panic on a replica's executor
// ends the test binary), and after a restart of all three every replica
// has applied at least what it had applied before and the leader's table
// holds every acknowledged grant with its token.
func TestHostilePeerFrames(t *testing.T) {
	c := nodesvctest.New(t, 0)
	lead := c.Leader()
	follower := process.NodeID((lead + 1) % 3)
	granted := map[string]uint64{}
	grant := func(r string) {
		tok, ok := acquireAny(t, c, r)
		if !ok {
			t.Fatalf("acquire %s: no grant within 10s", r)
		}
		granted[r] = tok
	}
	for i := range 5 {
		grant(fmt.Sprintf("before-%d", i))
	}

	// The two frames, as a follower, to the leader.
	p := dialPeer(t, c.Peers[lead].Raft, follower, process.NodeID(lead))
	p.send(raft.Message{Type: raft.MsgAppResp, From: raft.ID(follower) + 1, To: raft.ID(lead) + 1, Term: 1000, Index: 1})
	p.send(raft.Message{Type: raft.MsgAppResp, From: raft.ID(follower) + 1, To: raft.ID(lead) + 1, Term: math.MaxUint64, Index: 1})
	p.c.Close()
	grant("after-attack")

	// Forged frames to every node from every other member, between grants.
	rnd := rand.New(rand.NewPCG(22, uint64(time.Now().UnixNano())))
	var conns []*peerConn
	for to := range 3 {
		for as := range 3 {
			if as != to {
				conns = append(conns, dialPeer(t, c.Peers[to].Raft, process.NodeID(as), process.NodeID(to)))
			}
		}
	}
	sent := 0
	for round := range 8 {
		for range 200 {
			p := conns[rnd.IntN(len(conns))]
			if !p.send(hostileFrame(rnd, p)) {
				// The node closed a connection it could not trust: dial again.
				p.c.Close()
				*p = *dialPeer(t, c.Peers[p.to].Raft, p.as, p.to)
			}
			sent++
		}
		grant(fmt.Sprintf("during-%d", round))
	}
	for _, p := range conns {
		p.c.Close()
	}
	t.Logf("%d forged frames sent, %d grants acknowledged", sent, len(granted))

	lead = c.Leader()
	time.Sleep(200 * time.Millisecond) // heartbeats carry the commit to the followers
	var before [3]uint64
	for i := range 3 {
		before[i] = appliedIndex(t, c, i)
	}
	for i := range 3 {
		c.Stop(i)
	}
	for i := range 3 {
		c.Start(i)
	}
	lead = c.Leader()
	for i := range 3 {
		end := time.Now().Add(10 * time.Second)
		for appliedIndex(t, c, i) < before[i] && time.Now().Before(end) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := appliedIndex(t, c, i); got < before[i] {
			t.Errorf("replica %d applied %d entries after the restart, %d before: committed entries lost", i, got, before[i])
		}
	}
	for r, tok := range granted {
		st, err := c.Nodes[lead].Get(context.Background(), r)
		if err != nil {
			t.Fatalf("get %s: %v", r, err)
		}
		if !st.Held || st.Token != tok || st.Holder != "owner-"+r {
			t.Errorf("%s after the restart: %+v, want held by owner-%s with token %d", r, st, r, tok)
		}
	}
	if st, _ := c.Nodes[lead].Get(context.Background(), "forged"); st.Held && strings.HasPrefix(st.Holder, "mallory") {
		t.Logf("note: a forged entry reached the log (the insecure setting trusts members)")
	}
}
