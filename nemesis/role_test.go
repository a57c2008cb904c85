package nemesis

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	threeReplicas = Cluster{Servers: []string{"n1", "n2", "n3"}, Store: []string{"store"}, Clients: []string{"a", "b"}, LeaderSelector: true}
	oneLockServer = Cluster{Servers: []string{"lock"}, Store: []string{"store"}, Clients: []string{"a", "b"}}
)

// TestBindRoles: each fixed role names its node in each cluster; node names
// and the fire-time selectors come back unchanged.
func TestBindRoles(t *testing.T) {
	for _, c := range []struct {
		cluster Cluster
		role    string
		want    string
	}{
		{threeReplicas, Replica(1), "n1"},
		{threeReplicas, "@replica:3", "n3"},
		{oneLockServer, Replica(1), "lock"},
		{threeReplicas, StoreNode, "store"},
		{oneLockServer, "@store", "store"},
		{threeReplicas, Client("b"), "b"},
		{threeReplicas, "n2", "n2"},
		{threeReplicas, Leader, Leader},
		{oneLockServer, Crashed, Crashed},
	} {
		t.Run(fmt.Sprintf("%s on %v", c.role, c.cluster.Servers), func(t *testing.T) {
			got, err := c.cluster.Bind(c.role)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestBindRoleErrors: a role the cluster lacks, or a malformed one, is an
// error that says what the cluster has and what to write instead.
func TestBindRoleErrors(t *testing.T) {
	for _, c := range []struct {
		cluster Cluster
		role    string
		want    []string
	}{
		{threeReplicas, "@replica:4", []string{"@replica:4", "3 replicas (n1, n2, n3)", "@replica:1 to @replica:3"}},
		{oneLockServer, "@replica:2", []string{"1 replica (lock)", "aim at @replica:1"}},
		{threeReplicas, "@replica:0", []string{"a number from 1"}},
		{threeReplicas, "@replica:01", []string{"a number from 1"}},
		{threeReplicas, "@replica:", []string{"a number from 1"}},
		{threeReplicas, "@replica:x", []string{"a number from 1"}},
		{threeReplicas, "@client:c", []string{`no client is named "c"`, "clients: a, b"}},
		{Cluster{Servers: []string{"n1"}}, StoreNode, []string{"0 stores"}},
	} {
		t.Run(fmt.Sprintf("%s on %v", c.role, c.cluster.Servers), func(t *testing.T) {
			_, err := c.cluster.Bind(c.role)
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// TestScheduleBind: Bind replaces fixed roles in every field that names a
// node, leaves the rest (times, fire-time selectors, node names) alone, and
// does not touch the schedule it was given.
func TestScheduleBind(t *testing.T) {
	written := Schedule{
		{At: 1, Kind: Crash, Node: "@replica:2"},
		{At: 2, Kind: Restart, Node: Crashed},
		{At: 3, Kind: Block, Node: "@client:a", To: "@replica:3"},
		{At: 4, Kind: Partition, Group: []string{"@replica:1", "@store"}},
		{At: 5, Kind: Isolate, Node: Leader},
		{At: 6, Kind: Pause, Node: "b", Duration: 7},
	}
	orig := slices.Clone(written)
	orig[3].Group = slices.Clone(written[3].Group)
	got, err := written.Bind(threeReplicas)
	require.NoError(t, err)
	want := Schedule{
		{At: 1, Kind: Crash, Node: "n2"},
		{At: 2, Kind: Restart, Node: Crashed},
		{At: 3, Kind: Block, Node: "a", To: "n3"},
		{At: 4, Kind: Partition, Group: []string{"n1", "store"}},
		{At: 5, Kind: Isolate, Node: Leader},
		{At: 6, Kind: Pause, Node: "b", Duration: 7},
	}
	require.Equal(t, want, got)
	require.Equal(t, orig, written, "Bind changed the schedule it was given")
}

// TestValidateFor: a schedule of roles is valid on every cluster that has
// them; a role or a selector a cluster lacks is an error naming the fault
// and what to aim at instead, and plain node names are still accepted.
func TestValidateFor(t *testing.T) {
	portable := Schedule{
		{At: 1, Kind: Crash, Node: Replica(1)},
		{At: 2, Kind: Restart, Node: Crashed},
		{At: 3, Kind: Pause, Node: Client("a"), Duration: 5},
		{At: 4, Kind: Crash, Node: StoreNode},
		{At: 5, Kind: Partition, Group: []string{Replica(1), Client("b")}},
	}
	for _, c := range []Cluster{threeReplicas, oneLockServer} {
		require.NoError(t, portable.ValidateFor(c), "on %v", c.Servers)
	}
	require.NoError(t, (Schedule{{At: 1, Kind: Crash, Node: "n1"}}).ValidateFor(threeReplicas), "a node name")
	for _, c := range []struct {
		cluster Cluster
		s       Schedule
		want    []string
	}{
		{threeReplicas, Schedule{{At: 1, Kind: Pause, Node: "a", Duration: 1}, {At: 2, Kind: Crash, Node: "@replica:4"}},
			[]string{"fault 1 (crash @replica:4)", "@replica:1 to @replica:3"}},
		{oneLockServer, Schedule{{At: 1, Kind: Isolate, Node: Leader}},
			[]string{"fault 0 (isolate @leader)", "elects no leader", "@replica:1"}},
		{oneLockServer, Schedule{{At: 1, Kind: Block, Node: "a", To: Leader}}, []string{"elects no leader"}},
		{oneLockServer, Schedule{{At: 1, Kind: Crash, Node: "n1"}}, []string{`unknown node "n1"`, "@replica:1"}},
		{threeReplicas, Schedule{{At: 1, Kind: Partition, Group: []string{"@replica:1", "@replica:2", "@replica:3", "@store", "@client:a", "@client:b"}}},
			[]string{"holds every node"}},
		{threeReplicas, Schedule{{At: 1, Kind: Crash, Node: "@client:zz"}}, []string{"fault 0 (crash @client:zz)", `no client is named "zz"`}},
	} {
		t.Run(fmt.Sprintf("%v on %v", c.s, c.cluster.Servers), func(t *testing.T) {
			err := c.s.ValidateFor(c.cluster)
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
