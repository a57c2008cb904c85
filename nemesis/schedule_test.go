package nemesis

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

func TestScheduleJSONRoundTrip(t *testing.T) {
	in := Schedule{
		{At: Duration(30 * time.Millisecond), Kind: Pause, Node: "a", Duration: Duration(3 * time.Second)},
		{At: Duration(time.Second), Kind: Heal},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"at":"30ms","kind":"pause","node":"a","duration":"3s"},{"at":"1s","kind":"heal"}]`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var out Schedule
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("got %v (%v), want %v", out, err, in)
	}
}

func TestDurationRejectsNonStrings(t *testing.T) {
	for _, bad := range []string{`5`, `"5 seconds"`, `null`, `""`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: got nil error, want one", bad)
		}
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
		err := Schedule{c.op}.Validate(nodes)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: got %v, want %q", c.op, err, c.want)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	rx, _ := w.AddNode("rx", func() sim.Process { return recorder{&got} }, fakeclock.Config{})
	w.AddNode("tx", func() sim.Process { return sender{rx} }, fakeclock.Config{})
	s := Schedule{
		{At: Duration(650 * time.Millisecond), Kind: Heal}, // out of order on purpose: Install sorts
		{At: Duration(250 * time.Millisecond), Kind: Isolate, Node: "rx"},
	}
	if err := s.Validate([]string{"rx", "tx"}); err != nil {
		t.Fatal(err)
	}
	s.Install(w, func(n string) (sim.NodeID, bool) { id, ok := map[string]sim.NodeID{"rx": 0, "tx": 1}[n]; return id, ok })
	w.Run(2*time.Second, 1000)
	want := []int{0, 1, 2, 7, 8, 9}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
