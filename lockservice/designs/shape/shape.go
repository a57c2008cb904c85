// Package shape holds the built-in designs' shapes: each design's name,
// how the harness judges it (lockservice.DesignInfo) and its nodes' names
// (lockservice.DesignShape) — data only, so that a plan is drawn and
// checked without linking any design's processes (scenarios/spec, the
// live runner). The designs themselves (lockservice/designs,
// lockservice/redlock) embed these shapes and add their processes.
package shape

import (
	"fmt"

	"github.com/fencesim/fencesim/lockservice"
)

// Names of the built-in designs.
const (
	DesignReplicated = "replicated"
	DesignSingleNode = "single-node"
	DesignLeaseOnly  = "lease-only"
	DesignRedlock    = "redlock"
	DesignLockd      = "lockd"
)

// Builtin returns the shapes of the designs shipped with the harness, in
// the order lockservice/designs.BuiltinDesigns lists the designs.
func Builtin() []lockservice.DesignShape {
	return []lockservice.DesignShape{Replicated, SingleNode{}, LeaseOnly, Redlock{}, Lockd{}}
}

// Reference is the shape of the reference service: replicas n1…nN (3 or
// 5), a leader; Unfenced, the store ignores tokens (lease-only).
type Reference struct {
	Name, Description string
	Unfenced          bool
}

// Replicated and LeaseOnly are the reference and its unfenced contrast.
var (
	Replicated = Reference{Name: DesignReplicated,
		Description: "the reference: a lock state machine replicated over Raft, fencing token = the granting entry's log index, fenced store"}
	LeaseOnly = Reference{Name: DesignLeaseOnly, Unfenced: true,
		Description: "contrast: the reference service, but the store ignores tokens — leases alone protect it"}
)

// Info describes the reference (or lease-only) to the harness.
func (d Reference) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: d.Name, Description: d.Description, UnfencedStore: d.Unfenced, Leader: true}
}

// Nodes names the replicas n1…nN (N is 3 or 5).
func (d Reference) Nodes(replicas int) ([]string, error) {
	if replicas != 3 && replicas != 5 {
		return nil, fmt.Errorf("replicas must be 3 or 5 for the %s design, got %d", d.Name, replicas)
	}
	return lockservice.NumberedNodes(replicas), nil
}

// SingleNode is the shape of one synced lock server, "lock".
type SingleNode struct{}

// Info describes the single node to the harness.
func (SingleNode) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: DesignSingleNode, SyncedDecisions: true,
		Description: "contrast: one lock server that syncs every decision; nobody gets a lock while it is down"}
}

// Nodes names the one server; replicas must be absent.
func (SingleNode) Nodes(replicas int) ([]string, error) {
	if replicas != 0 {
		return nil, fmt.Errorf("replicas is only for the replicated design")
	}
	return []string{"lock"}, nil
}

// Redlock is the shape of Redlock: independent nodes n1…nN (N odd, 1 to
// 9) and clients that decide grants themselves, with random values for
// tokens.
type Redlock struct{}

// Info describes Redlock to the harness.
func (Redlock) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: DesignRedlock,
		Description:   "contrast: Redlock — N independent nodes, a majority of SET NX PX within validity = TTL − elapsed − drift, random values that no store can fence",
		UnfencedStore: true, UnorderedTokens: true, ClientGrants: true}
}

// Nodes names the independent nodes n1…nN.
func (Redlock) Nodes(replicas int) ([]string, error) {
	if replicas < 1 || replicas > 9 || replicas%2 == 0 {
		return nil, fmt.Errorf("replicas (the number of independent nodes) must be odd, 1 to 9, for the redlock design, got %d", replicas)
	}
	return lockservice.NumberedNodes(replicas), nil
}

// Lockd is the shape of seed 000's lockd: stateless instances n1…nN (2
// by default) and one Redis, "redis", last.
type Lockd struct{}

// Info describes lockd to the harness.
func (Lockd) Info() lockservice.DesignInfo {
	return lockservice.DesignInfo{Name: DesignLockd, SyncedDecisions: true, ResourceTokens: true, WallClockLeases: true, BackEnds: 1,
		Description: "seed 000's lockd: stateless instances running Lua scripts on one Redis (AOF fsync always), token = a per-resource counter in Redis"}
}

// Nodes names the instances n1…nN, then the Redis.
func (Lockd) Nodes(replicas int) ([]string, error) {
	if replicas == 0 {
		replicas = 2
	}
	if replicas < 1 || replicas > 9 {
		return nil, fmt.Errorf("replicas (the number of lockd instances) must be 1 to 9 for the lockd design, got %d", replicas)
	}
	return append(lockservice.NumberedNodes(replicas), "redis"), nil
}
