package realrt_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/internal/freeport"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/realrt"
	"github.com/fencesim/fencesim/wire"
)

// lockClient is a test-only client process: it sends one request at a
// time, follows NotLeader hints, and resends the same request (same id, so
// the service applies it at most once) to the next replica when a reply is
// slow, the leader unknown or the replica overloaded. The test waits on
// done for the final answer.
type lockClient struct {
	replicas []process.NodeID
	next     int
	msg      process.Message
	request  uint64
	to       process.NodeID
	retry    clockwork.Timer
	done     chan answer
}

type answer struct {
	rep  lockservice.LockReply
	from process.NodeID
}

func (c *lockClient) Start(process.Env) {}

func (c *lockClient) submit(env process.Env, request uint64, m process.Message) {
	c.msg, c.request = m, request
	c.sendTo(env, c.replicas[c.next%len(c.replicas)])
}

func (c *lockClient) sendTo(env process.Env, to process.NodeID) {
	c.to = to
	env.Send(to, c.msg)
	if c.retry == nil {
		c.retry = env.Clock().AfterFunc(0, func() { c.resend(env) })
	}
	c.retry.Reset(300 * time.Millisecond)
}

// resend tries the next replica: the one asked is down, slow or leaderless.
func (c *lockClient) resend(env process.Env) {
	if c.msg == nil {
		return
	}
	c.next++
	c.sendTo(env, c.replicas[c.next%len(c.replicas)])
}

func (c *lockClient) Receive(env process.Env, from process.NodeID, m process.Message) {
	rep, ok := m.(lockservice.LockReply)
	if !ok || c.msg == nil || rep.Request != c.request {
		return // a duplicate or a late answer to an earlier request
	}
	switch rep.Status {
	case lockservice.NotLeader:
		if rep.Leader != lockservice.NoLeader && rep.Leader != from {
			c.sendTo(env, rep.Leader)
			return
		}
		c.retry.Reset(20 * time.Millisecond) // an election is under way
	case lockservice.Overloaded:
		c.retry.Reset(20 * time.Millisecond)
	default:
		c.msg = nil
		c.retry.Stop()
		c.done <- answer{rep, from}
	}
}

// lockCluster is three reference.Replica nodes and a client node on
// loopback, over the TCP transport and the wire codec.
type lockCluster struct {
	t        testing.TB
	addrs    map[process.NodeID]string
	dirs     map[process.NodeID]string
	nodes    map[process.NodeID]*realrt.Node
	replicas []process.NodeID
	client   *lockClient
	request  uint64
	// node and replica, if set, tune every node's and replica's config.
	node    func(*realrt.Config)
	replica func(*reference.ReplicaConfig)
	procs   map[process.NodeID]*reference.Replica // the latest process of each replica
}

const clientID process.NodeID = 3

func newLockCluster(t testing.TB) *lockCluster { return newTunedLockCluster(t, nil, nil) }

func newTunedLockCluster(t testing.TB, node func(*realrt.Config), replica func(*reference.ReplicaConfig)) *lockCluster {
	lc := &lockCluster{t: t, addrs: map[process.NodeID]string{}, dirs: map[process.NodeID]string{},
		nodes: map[process.NodeID]*realrt.Node{}, replicas: []process.NodeID{0, 1, 2}, node: node, replica: replica,
		procs: map[process.NodeID]*reference.Replica{}}
	for _, id := range []process.NodeID{0, 1, 2, clientID} {
		// Drawn where no connection is given a local port: a replica
		// stopped and restarted must bind its address again.
		a, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		lc.addrs[id] = a
		lc.dirs[id] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, n := range lc.nodes {
			n.Close()
		}
	})
	for _, id := range lc.replicas {
		lc.startReplica(id)
	}
	lc.client = &lockClient{replicas: lc.replicas, done: make(chan answer, 1)}
	lc.start(clientID, lc.client)
	return lc
}

func (lc *lockCluster) start(id process.NodeID, p process.Process) {
	lc.t.Helper()
	cfg := realrt.Config{ID: id, DataDir: lc.dirs[id], Listen: lc.addrs[id], Peers: lc.addrs, Codec: wire.Codec{},
		Logger: slog.New(slog.DiscardHandler), MinBackoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if lc.node != nil {
		lc.node(&cfg)
	}
	var err error
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n *realrt.Node
		if n, err = realrt.Start(cfg, p); err == nil {
			lc.nodes[id] = n
			return
		}
		if time.Now().After(end) {
			lc.t.Fatal(err)
		}
	}
}

// startReplica boots (or reboots, on its data directory) a replica.
func (lc *lockCluster) startReplica(id process.NodeID) {
	rc := reference.DefaultReplicaConfig(lc.replicas)
	if lc.replica != nil {
		lc.replica(&rc)
	}
	lc.procs[id] = reference.NewReplica(rc)
	lc.start(id, lc.procs[id])
}

func (lc *lockCluster) stop(id process.NodeID) {
	lc.t.Helper()
	if err := lc.nodes[id].Close(); err != nil {
		lc.t.Fatal(err)
	}
	delete(lc.nodes, id)
}

// ask submits m (built with a fresh request id) through the client process
// and waits at most 5s for the service's final answer.
func (lc *lockCluster) ask(build func(request uint64) process.Message) answer {
	lc.t.Helper()
	lc.request++
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := lc.request
	if err := lc.nodes[clientID].Do(ctx, func(env process.Env) { lc.client.submit(env, req, build(req)) }); err != nil {
		lc.t.Fatal(err)
	}
	select {
	case a := <-lc.client.done:
		return a
	case <-ctx.Done():
		lc.t.Fatalf("request %d: no answer within 5s", req)
		return answer{}
	}
}

func (lc *lockCluster) acquire(client, resource string) answer {
	return lc.ask(func(r uint64) process.Message {
		return lockservice.AcquireRequest{Resource: resource, Client: client, TTL: 5 * time.Second, Request: r}
	})
}

func expect(t testing.TB, what string, a answer, want lockservice.Status) {
	t.Helper()
	if a.rep.Status != want {
		t.Fatalf("%s: got %v from node %d, want %v", what, a.rep, a.from, want)
	}
}

// TestReplicatedLockOverTCP runs the reference lock service — three
// reference.Replica processes, the code the simulator checks — on the
// real runtime: they elect a leader and grant a lock; the leader is
// stopped and the survivors keep the grant (a rival is refused), release
// it and grant again with a larger token; the old leader restarts from its
// data directory and, with another replica down, is needed for the quorum
// that grants a third lock.
func TestReplicatedLockOverTCP(t *testing.T) {
	lc := newLockCluster(t)
	a := lc.acquire("a", "r")
	expect(t, "a acquires r", a, lockservice.Granted)
	leader := a.from

	lc.stop(leader)
	expect(t, "b acquires r while a holds it, the old leader down", lc.acquire("b", "r"), lockservice.Busy)
	rel := lc.ask(func(r uint64) process.Message {
		return lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: a.rep.Token, Request: r}
	})
	expect(t, "a releases r", rel, lockservice.Released)
	b := lc.acquire("b", "r")
	expect(t, "b acquires r after a released it", b, lockservice.Granted)
	if b.rep.Token <= a.rep.Token {
		t.Fatalf("b's token %d is not above a's %d", b.rep.Token, a.rep.Token)
	}

	lc.startReplica(leader)
	other := b.from // the new leader
	lc.stop(other)
	c := lc.acquire("c", "s")
	expect(t, "c acquires s with the restarted replica in the quorum", c, lockservice.Granted)
	if c.rep.Token <= b.rep.Token {
		t.Fatalf("c's token %d is not above b's %d", c.rep.Token, b.rep.Token)
	}
	expect(t, "a acquires r, still b's", lc.acquire("a", "r"), lockservice.Busy)
}

// TestSnapshotLargerThanAFrame: a follower that was down while the group
// snapshotted and compacted its log past it catches up by a snapshot ten
// times the transport's frame limit, which crosses in continued frames
// (the frame limit used to drop it: the follower could never catch up).
func TestSnapshotLargerThanAFrame(t *testing.T) {
	const maxFrame, resources = 1 << 10, 100
	lc := newTunedLockCluster(t, func(cfg *realrt.Config) { cfg.MaxFrame = maxFrame },
		func(rc *reference.ReplicaConfig) { rc.SnapshotEntries, rc.SnapshotKeep, rc.SegmentEntries = 20, 0, 8 })
	leader := lc.acquire("warm", "warm").from
	down := (leader + 1) % 3
	lc.stop(down)
	var last uint64
	for i := range resources {
		// Names of 100 bytes: the snapshot's table holds over 10 KB of them.
		name := fmt.Sprintf("%0100d", i)
		a := lc.acquire(name, name)
		expect(t, "acquire "+name[90:], a, lockservice.Granted)
		last = a.rep.Token
	}
	var snapBytes int
	if err := lc.nodes[runningBut(lc, down)].Do(context.Background(), func(env process.Env) {
		for _, k := range env.Disk().Keys("raft/snapshot") {
			v, _ := env.Disk().Read(k)
			snapBytes = max(snapBytes, len(v))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if snapBytes < 8*maxFrame {
		t.Fatalf("the group's snapshot is %d bytes, not several frames of %d: the test tests nothing", snapBytes, maxFrame)
	}
	lc.startReplica(down)
	rep := lc.procs[down]
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var applied uint64
		if err := lc.nodes[down].Do(context.Background(), func(process.Env) { applied = rep.Table().LastToken() }); err != nil {
			t.Fatal(err)
		}
		if applied >= last {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("node %d did not catch up past the group's snapshot of %d bytes: its last token %d, the group's %d", down, snapBytes, applied, last)
		}
	}
}

// runningBut is a replica of lc other than down that is running.
func runningBut(lc *lockCluster, down process.NodeID) process.NodeID {
	for _, id := range lc.replicas {
		if _, ok := lc.nodes[id]; ok && id != down {
			return id
		}
	}
	lc.t.Fatal("no replica running")
	return 0
}

// BenchmarkLockCycle measures one client's acquire→release cycle against
// the three-replica service on loopback: two Raft commits, each fsynced by
// a majority's filedisk before the leader answers.
func BenchmarkLockCycle(b *testing.B) {
	lc := newLockCluster(b)
	expect(b, "warm-up acquire", lc.acquire("w", "warm"), lockservice.Granted)
	b.ResetTimer()
	for b.Loop() {
		a := lc.acquire("a", "r")
		expect(b, "acquire", a, lockservice.Granted)
		expect(b, "release", lc.ask(func(r uint64) process.Message {
			return lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: a.rep.Token, Request: r}
		}), lockservice.Released)
	}
}
