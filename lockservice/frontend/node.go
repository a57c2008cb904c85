package frontend

import (
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/process"
)

// Node is the process of one node of the reference service: its replica,
// and the front end its clients' lock requests go through. Raft traffic
// goes to the replica; the replica's answers to the front end stay on the
// node. Every restart needs a new one (NewNode).
type Node struct {
	fe  *FrontEnd
	rep *reference.Replica
}

var (
	_ process.Process    = (*Node)(nil)
	_ process.Batcher    = (*Node)(nil)
	_ lockservice.Leader = (*Node)(nil)
)

// NewNode returns a node running a replica of rc behind a front end of
// fc. The replica's observer sees every event as before; the front end
// sees them too.
func NewNode(rc reference.ReplicaConfig, fc Config) *Node {
	f := &FrontEnd{cfg: fc, pending: map[uint64]*call{}, released: map[string]releaseInfo{}}
	if fc.UnsafeKeyNotInLog {
		f.keys = map[keyID]lockservice.LockReply{}
	}
	f.holdFn = f.holdDue
	obs := rc.Observer
	if obs == nil {
		obs = lockservice.NopObserver{}
	}
	rc.Observer = tee{obs, f}
	f.rep = reference.NewReplica(rc)
	return &Node{fe: f, rep: f.rep}
}

// tee shows every event to two observers, the run's first.
type tee struct{ a, b lockservice.Observer }

func (t tee) Observe(e lockservice.Event) { t.a.Observe(e); t.b.Observe(e) }

// Replica is the node's replica (on the node's thread only).
func (n *Node) Replica() *reference.Replica { return n.rep }

// FrontEnd is the node's front end (on the node's thread only).
func (n *Node) FrontEnd() *FrontEnd { return n.fe }

// Start starts the replica from its disk; the front end starts empty.
func (n *Node) Start(env process.Env) {
	n.fe.env = env
	n.fe.renv = &replicaEnv{Env: env, fe: n.fe, clock: replicaClock{Clock: env.Clock(), fe: n.fe}}
	n.rep.Start(n.fe.renv)
	n.fe.after()
}

// Receive routes Raft traffic to the replica and lock requests to the
// front end.
func (n *Node) Receive(env process.Env, from process.NodeID, msg process.Message) {
	if !n.fe.Receive(from, msg) {
		n.rep.Receive(n.fe.renv, from, msg)
	}
	n.fe.after()
}

// EndBatch implements process.Batcher (the replica's group commit).
func (n *Node) EndBatch(process.Env) {
	n.rep.EndBatch(n.fe.renv)
	n.fe.after()
}

// IsLeader implements lockservice.Leader.
func (n *Node) IsLeader() (bool, uint64) { return n.rep.IsLeader() }

// LastPersist is the replica's (the nemesis aims crashes with it).
func (n *Node) LastPersist() (vote, entries time.Duration) { return n.rep.LastPersist() }

// LastSnapshot is the replica's.
func (n *Node) LastSnapshot() time.Duration { return n.rep.LastSnapshot() }

// replicaEnv is the replica's view of the node: its answers to LocalID go
// to the front end, and its timers end with the front end's after.
type replicaEnv struct {
	process.Env
	fe *FrontEnd
	// clock is a replicaClock, boxed once: the replica asks for its
	// clock on every Ready, and boxing the struct each time allocated.
	clock process.Clock
}

func (e *replicaEnv) Send(to process.NodeID, m process.Message) {
	if to == LocalID {
		e.fe.reply(m)
		return
	}
	e.Env.Send(to, m)
}

func (e *replicaEnv) Clock() process.Clock { return e.clock }

// replicaClock is the node's clock, with the replica's timer callbacks
// followed by the front end's after (a replica that steps down on a tick
// drops its requests; the front end answers them at once).
type replicaClock struct {
	process.Clock
	fe *FrontEnd
}

func (c replicaClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return c.Clock.AfterFunc(d, func() { f(); c.fe.after() })
}
