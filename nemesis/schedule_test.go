package nemesis

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
