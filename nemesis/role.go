package nemesis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A schedule names the node a fault hits either by its name ("n1", "lock",
// "a") or by its role in the cluster, a selector starting with "@". Names
// belong to one design (the reference's replicas are n1…nN, the single
// node is "lock"); roles let one schedule serve every design that has the
// role:
//
//	@leader        the replica that leads when the fault fires (Leader)
//	@crashed       every node crashed when a restart fires (Crashed)
//	@replica:N     the design's N-th service node, 1-based (Replica)
//	@store         the fenced store (StoreNode)
//	@client:NAME   the client NAME (Client)
//
// @leader and @crashed depend on the run and are resolved when the fault
// fires, through the Resolver. The others are fixed roles: they name the
// same node for the whole run, so Bind replaces them by that node before
// the schedule is installed. The schedule as written (roles and all) is
// what a replay file keeps, while the trace, its hash and the report name
// the node the role stood for, exactly as if the schedule had named it.

// StoreNode is the fixed role of the fenced store.
const StoreNode = "@store"

// Prefixes of the fixed roles that take an argument.
const (
	replicaPrefix = "@replica:"
	clientPrefix  = "@client:"
)

// Replica returns the fixed role of the cluster's n-th service node,
// counted from 1: "@replica:n".
func Replica(n int) string { return replicaPrefix + strconv.Itoa(n) }

// Client returns the fixed role of the client named name: "@client:name".
func Client(name string) string { return clientPrefix + name }

// IsFixedRole reports whether name is a fixed role (well formed or not),
// which Bind resolves: @store, @replica:…, @client:….
func IsFixedRole(name string) bool {
	return name == StoreNode || strings.HasPrefix(name, replicaPrefix) || strings.HasPrefix(name, clientPrefix)
}

// Bind returns the node a fixed role names in c. Any other name — a node's
// own name, Leader, Crashed — comes back unchanged: node names are checked
// by ValidateFor, and the selectors resolve when the fault fires. The error
// says what the role asks for that c lacks, and what to write instead.
func (c Cluster) Bind(name string) (string, error) {
	switch {
	case name == StoreNode:
		if len(c.Store) != 1 {
			return "", fmt.Errorf("%s: the cluster has %d stores, not one", name, len(c.Store))
		}
		return c.Store[0], nil
	case strings.HasPrefix(name, replicaPrefix):
		arg := strings.TrimPrefix(name, replicaPrefix)
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || strconv.Itoa(n) != arg {
			return "", fmt.Errorf("%s: the replica must be a number from 1, as in %s", name, Replica(1))
		}
		if n > len(c.Servers) {
			return "", fmt.Errorf("%s: the design has %s (%s): aim at %s", name, countOf(len(c.Servers), "replica"),
				strings.Join(c.Servers, ", "), replicaRange(len(c.Servers)))
		}
		return c.Servers[n-1], nil
	case strings.HasPrefix(name, clientPrefix):
		client := strings.TrimPrefix(name, clientPrefix)
		if !slices.Contains(c.Clients, client) {
			return "", fmt.Errorf("%s: no client is named %q (clients: %s)", name, client, strings.Join(c.Clients, ", "))
		}
		return client, nil
	}
	return name, nil
}

// replicaRange says which @replica roles a cluster of n service nodes has.
func replicaRange(n int) string {
	switch n {
	case 0:
		return "a node of another role (it has no service nodes)"
	case 1:
		return Replica(1)
	}
	return Replica(1) + " to " + Replica(n)
}

// countOf is "1 replica", "3 replicas".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Bind returns a copy of s with every fixed role (Node, To, Group) replaced
// by the node it names in c; the selectors resolved at fire time (Leader,
// Crashed) and node names stay as written. The operations keep their order
// and times, so the bound schedule fires exactly as the written one would
// if it had named the nodes. The error names the first operation whose role
// c lacks. A schedule that names no fixed role comes back as itself, not a
// copy (a swarm's thousands of drawn operations name nodes): do not modify
// the result in place.
func (s Schedule) Bind(c Cluster) (Schedule, error) {
	if !slices.ContainsFunc(s, Op.namesFixedRole) {
		return s, nil
	}
	out := slices.Clone(s)
	for i := range out {
		op := &out[i]
		if !op.namesFixedRole() {
			continue
		}
		fail := func(err error) (Schedule, error) {
			return nil, fmt.Errorf("nemesis: fault %d (%s): %v", i, s[i].label(), err)
		}
		var err error
		if op.Node, err = c.Bind(op.Node); err != nil {
			return fail(err)
		}
		if op.To, err = c.Bind(op.To); err != nil {
			return fail(err)
		}
		if op.Group != nil {
			op.Group = slices.Clone(op.Group)
			for j := range op.Group {
				if op.Group[j], err = c.Bind(op.Group[j]); err != nil {
					return fail(err)
				}
			}
		}
	}
	return out, nil
}

// namesFixedRole reports whether op aims at a fixed role anywhere.
func (op Op) namesFixedRole() bool {
	return IsFixedRole(op.Node) || IsFixedRole(op.To) || slices.ContainsFunc(op.Group, IsFixedRole)
}

// ValidateFor is Validate against c: every name an operation uses must be
// one of c's nodes or a role c has — a fixed role Bind resolves, Leader if
// c elects a leader, Crashed as the node of a restart. A role c lacks is an
// error saying what to aim at instead.
func (s Schedule) ValidateFor(c Cluster) error {
	if err := s.Check(); err != nil {
		return err
	}
	bound, err := s.Bind(c)
	if err != nil {
		return err
	}
	nodes := c.Names()
	for i, op := range bound {
		if !c.LeaderSelector && (op.Node == Leader || op.To == Leader || slices.Contains(op.Group, Leader)) {
			return fmt.Errorf("nemesis: fault %d (%s): %s: the design elects no leader; aim at a node by its role, such as %s",
				i, s[i].label(), Leader, replicaRange(len(c.Servers)))
		}
		if err := op.checkNames(nodes); err != nil {
			return fmt.Errorf("nemesis: fault %d (%s): %v", i, s[i].label(), err)
		}
	}
	return nil
}
