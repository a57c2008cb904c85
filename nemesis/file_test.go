package nemesis

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// everyKind holds one operation of every kind, with every field it takes.
var everyKind = Schedule{
	{At: Duration(10 * ms), Kind: Pause, Node: "a", Duration: Duration(3 * time.Second)},
	{At: Duration(20 * ms), Kind: Crash, Node: "n1"},
	{At: Duration(20 * ms), Kind: Crash, Node: "n2", Mode: CrashTorn, Keep: 0.25},
	{At: Duration(20 * ms), Kind: Crash, Node: "n3", Mode: CrashLose},
	{At: Duration(30 * ms), Kind: Restart, Node: Crashed},
	{At: Duration(40 * ms), Kind: Isolate, Node: Leader},
	{At: Duration(40 * ms), Kind: Partition, Group: []string{"n1", "a"}},
	{At: Duration(40 * ms), Kind: Block, Node: "n1", To: "store"},
	{At: Duration(50 * ms), Kind: Heal},
	{At: Duration(60 * ms), Kind: Loss, Probability: 0.3, Duration: Duration(time.Second)},
	{At: Duration(60 * ms), Kind: Duplicate, Probability: 0.1},
	{At: Duration(60 * ms), Kind: Delay, Delay: Duration(time.Second), Mean: Duration(200 * ms), Duration: Duration(time.Second)},
	{At: Duration(60 * ms), Kind: Reorder, Probability: 1, Delay: Duration(20 * ms), Duration: Duration(time.Second)},
	{At: Duration(70 * ms), Kind: NetworkReset},
	{At: Duration(80 * ms), Kind: Drift, Node: "b", PPM: -2500, Duration: Duration(time.Second)},
	{At: Duration(80 * ms), Kind: Jump, Node: "b", By: Duration(-1500 * ms), Duration: Duration(time.Second)},
	{At: Duration(90 * ms), Kind: ClockReset, Node: "b"},
	{At: Duration(90 * ms), Kind: SlowDisk, Node: "store", Delay: Duration(40 * ms), Duration: Duration(time.Second)},
}

var everyNode = []string{"n1", "n2", "n3", "store", "a", "b", Leader}

func TestEveryKindRoundTrips(t *testing.T) {
	require.NoError(t, everyKind.Validate(everyNode))
	covered := map[Kind]bool{}
	for _, op := range everyKind {
		covered[op.Kind] = true
	}
	for _, k := range Kinds() {
		require.True(t, covered[k], "everyKind lacks %s", k)
	}
	b, err := json.Marshal(everyKind)
	require.NoError(t, err)
	back, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, everyKind, back, "Parse(Marshal)")
	for _, want := range []string{
		`{"at":"20ms","kind":"crash","node":"n2","mode":"torn","keep":0.25}`,
		`{"at":"40ms","kind":"partition","group":["n1","a"]}`,
		`{"at":"40ms","kind":"block","node":"n1","to":"store"}`,
		`{"at":"60ms","kind":"delay","duration":"1s","delay":"1s","mean":"200ms"}`,
		`{"at":"80ms","kind":"drift","node":"b","duration":"1s","ppm":-2500}`,
		`{"at":"80ms","kind":"jump","node":"b","duration":"1s","by":"-1.5s"}`,
	} {
		require.Contains(t, string(b), want)
	}
}

func TestOpString(t *testing.T) {
	for i, want := range []string{
		"pause a for 3s", "crash n1", "crash n2 torn keep=0.25", "crash n3 lose", "restart @crashed", "isolate @leader",
		"partition [n1 a] | rest", "block n1 -> store", "heal", "loss p=0.3 for 1s", "duplicate p=0.1",
		"delay delay=1s mean=200ms for 1s", "reorder p=1 delay=20ms for 1s", "network-reset",
		"drift b -2500ppm for 1s", "jump b by -1.5s for 1s", "clock-reset b", "slow-disk store delay=40ms for 1s",
	} {
		require.Equal(t, want, everyKind[i].String(), "op %d", i)
	}
}

func TestFileRoundTrip(t *testing.T) {
	o := DrawOptions(rng(9), replicated)
	f := File{Version: FileVersion, Seed: 9, Safety: Duration(safety), Options: o, Ops: Generate(rng(9), o, replicated, safety)}
	b, err := f.Marshal()
	require.NoError(t, err)
	back, err := ParseFile(b)
	require.NoError(t, err, "%s", b)
	require.Equal(t, f, back, "round trip")
	var viaJSON File
	require.NoError(t, json.Unmarshal(b, &viaJSON))
	require.Equal(t, f, viaJSON, "encoding/json reads Marshal's output differently")
	require.Equal(t, len(f.Ops), strings.Count(string(b), "\n    {\"at\""), "lines holding an op: want one per op")
	empty, err := File{Version: FileVersion}.Marshal()
	require.NoError(t, err)
	back, err = ParseFile(empty)
	require.NoError(t, err, "empty file:\n%s", empty)
	require.Empty(t, back.Ops)
}

func TestParseFileErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"version": 2, "seed": 1, "options": {}, "ops": []}`, "version 2 is not supported"},
		{`{"version": 1, "seed": 1, "options": {"step": "0s", "pause": {"enabled": true}}, "ops": []}`, "pause: probability 0"},
		{`{"version": 1, "seed": 1, "options": {}, "ops": [{"at": "1s", "kind": "pause", "node": "a"}]}`, "duration must be positive"},
		{`{"version": 1, "seed": 1, "options": {}, "ops": [], "extra": 1}`, `unknown field "extra"`},
		{`{"version": 1, "seed": -1}`, "seed"},
		{`{"version": 1, "safety": "-1s"}`, "safety -1s is negative"},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := ParseFile([]byte(c.in))
			require.ErrorContains(t, err, c.want, "%s", c.in)
		})
	}
}

// TestParseErrorsNameTheProblem: each bad schedule is rejected with a
// message that says which fault and what to fix.
func TestParseErrorsNameTheProblem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[{"at":"1s","kind":"pause","nod":"a","duration":"1s"}]`, `unknown field "nod"`},
		{`[{"at":"1s","kind":"nap","node":"a"}]`, `fault 0 (nap a): unknown kind "nap"`},
		{`[{"at":"-1s","kind":"heal"}]`, "time -1s is negative"},
		{`[{"at":"1s","kind":"heal"},{"at":"1s","kind":"pause","node":"a"}]`, "fault 1 (pause a): duration must be positive"},
		{`[{"at":"1s","kind":"pause","duration":"1s"}]`, "pause needs a node"},
		{`[{"at":"1s","kind":"pause","node":"a","duration":"-1s"}]`, "duration -1s is negative"},
		{`[{"at":"1s","kind":"heal","duration":"1s"}]`, "duration does not apply to heal"},
		{`[{"at":"1s","kind":"heal","node":"a"}]`, "node does not apply to heal (it takes: nothing)"},
		{`[{"at":"1s","kind":"pause","node":"a","duration":"1s","ppm":5}]`, "ppm does not apply to pause (it takes: node, duration, when, within, after)"},
		{`[{"at":"1s","kind":"crash","node":"a","mode":"melt"}]`, `unknown mode "melt"`},
		{`[{"at":"1s","kind":"crash","node":"a","mode":"torn","keep":1}]`, "keep 1 must lie in [0, 1)"},
		{`[{"at":"1s","kind":"crash","node":"a","keep":0.5}]`, `keep only applies with mode "torn"`},
		{`[{"at":"1s","kind":"partition","group":[]}]`, "group is empty"},
		{`[{"at":"1s","kind":"partition","group":["a","a"]}]`, `group names "a" twice`},
		{`[{"at":"1s","kind":"block","node":"a"}]`, "block needs to"},
		{`[{"at":"1s","kind":"block","node":"a","to":"a"}]`, "to itself"},
		{`[{"at":"1s","kind":"loss"}]`, "probability 0 must lie in (0, 1]"},
		{`[{"at":"1s","kind":"duplicate","probability":1.5}]`, "probability 1.5 must lie in (0, 1]"},
		{`[{"at":"1s","kind":"delay","delay":"1s"}]`, "mean 0s must lie in (0, delay 1s]"},
		{`[{"at":"1s","kind":"delay","mean":"1s"}]`, "delay must be positive"},
		{`[{"at":"1s","kind":"reorder","probability":0.5}]`, "longest a reordered message is held back"},
		{`[{"at":"1s","kind":"drift","node":"a","ppm":1000000}]`, "ppm 1000000 must lie strictly between"},
		{`[{"at":"1s","kind":"jump","node":"a"}]`, "by must be a non-zero step"},
		{`[{"at":"1s","kind":"slow-disk","node":"a","delay":"-1ms"}]`, "delay -1ms is negative"},
		{`[{"at":"1s","kind":"heal"}] []`, "trailing data"},
		{`[{"at":"1s","kind":"heal"}]]`, "trailing data"},
		{`[{"at":1,"kind":"heal"}]`, `duration must be a string such as "250ms"`},
		{`[{"at":"soon","kind":"heal"}]`, `bad duration "soon"`},
		{`{"at":"1s","kind":"heal"}`, "cannot unmarshal object"},
		{`[{"at":"2562047h","kind":"loss","probability":1,"duration":"2562047h"}]`, "overflows"},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			require.ErrorContains(t, err, c.want, "%s", c.in)
		})
	}
}

func TestValidateNames(t *testing.T) {
	for _, c := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: Block, Node: "a", To: "zz"}, `unknown node "zz"`},
		{Op{Kind: Partition, Group: []string{"a", "zz"}}, `unknown node "zz"`},
		{Op{Kind: Partition, Group: []string{"n1", "n2", "n3", "store", "a", "b"}}, "holds every node"},
		{Op{Kind: Crash, Node: Crashed}, "only works as the node of a restart"},
		{Op{Kind: Partition, Group: []string{Crashed}}, "only works as the node of a restart"},
		{Op{Kind: Isolate, Node: Leader}, ""},
		{Op{Kind: Partition, Group: []string{Leader}}, ""},
	} {
		t.Run(c.op.String(), func(t *testing.T) {
			requireErr(t, Schedule{c.op}.Validate(everyNode), c.want)
		})
	}
	require.Error(t, (Schedule{{Kind: Isolate, Node: Leader}}).Validate([]string{"lock"}), "@leader without the selector listed")
}
