package nemesis

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

func TestScheduleJSONRoundTrip(t *testing.T) {
	in := Schedule{
		{At: Duration(30 * time.Millisecond), Kind: Pause, Node: "a", Duration: Duration(3 * time.Second)},
		{At: Duration(time.Second), Kind: Heal},
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, `[{"at":"30ms","kind":"pause","node":"a","duration":"3s"},{"at":"1s","kind":"heal"}]`, string(b))
	var out Schedule
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, in, out)
}

func TestDurationRejectsNonStrings(t *testing.T) {
	for _, bad := range []string{`5`, `"5 seconds"`, `null`, `""`} {
		var d Duration
		require.Error(t, json.Unmarshal([]byte(bad), &d), bad)
	}
}

func TestValidate(t *testing.T) {
	nodes := []string{"lock", "a"}
	cases := []struct {
		op   Op
		want string // "" = valid
	}{
		{Op{Kind: Pause, Node: "a", Duration: Duration(time.Second)}, ""},
		{Op{Kind: Heal}, ""},
		{Op{Kind: Crash, Node: "lock"}, ""},
		{Op{Kind: Pause, Node: "a"}, "duration must be positive"},
		{Op{Kind: "nap", Node: "a"}, `unknown kind "nap"`},
		{Op{Kind: Crash, Node: "b"}, `unknown node "b"`},
		{Op{At: -1, Kind: Heal}, "negative"},
	}
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			requireErr(t, Schedule{c.op}.Validate(nodes), c.want)
		})
	}
}

// requireErr requires no error when want is empty, else an error saying want.
func requireErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		require.NoError(t, err)
	} else {
		require.ErrorContains(t, err, want)
	}
}

// recorder counts what a node receives.
type recorder struct{ got *[]int }

type ping struct{ n int }

func (p ping) Fingerprint() uint64 { return uint64(p.n) }

func (r recorder) Start(env sim.Env) {}
func (r recorder) Receive(env sim.Env, _ sim.NodeID, m sim.Message) {
	*r.got = append(*r.got, m.(ping).n)
}

type sender struct{ to sim.NodeID }

func (s sender) Start(env sim.Env) {
	for i := range 10 {
		env.Clock().AfterFunc(time.Duration(i)*100*time.Millisecond, func() { env.Send(s.to, ping{i}) })
	}
}
func (s sender) Receive(sim.Env, sim.NodeID, sim.Message) {}

// TestInstallAppliesFaultsAtTheirTimes: isolating the receiver between 250 ms
// and 650 ms drops exactly the pings sent in that window.
func TestInstallAppliesFaultsAtTheirTimes(t *testing.T) {
	w, err := sim.New(sim.Config{Seed: 1, Network: sim.NetworkConfig{Latency: sim.Latency{Min: time.Millisecond, Max: time.Millisecond}}})
	require.NoError(t, err)
	var got []int
	rx, _ := w.AddNode("rx", func() sim.Process { return recorder{&got} }, fakeclock.Config{})
	w.AddNode("tx", func() sim.Process { return sender{rx} }, fakeclock.Config{})
	s := Schedule{
		{At: Duration(650 * time.Millisecond), Kind: Heal}, // out of order on purpose: Install sorts
		{At: Duration(250 * time.Millisecond), Kind: Isolate, Node: "rx"},
	}
	require.NoError(t, s.Validate([]string{"rx", "tx"}))
	s.Install(w, func(n string) (sim.NodeID, bool) { id, ok := map[string]sim.NodeID{"rx": 0, "tx": 1}[n]; return id, ok })
	w.Run(2*time.Second, 1000)
	require.Equal(t, []int{0, 1, 2, 7, 8, 9}, got)
}
