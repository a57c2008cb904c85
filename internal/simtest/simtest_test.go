package simtest

import (
	"fmt"
	"testing"
)

// errors is a testing.TB that records Errorf instead of failing, so that
// the canaries can check CheckGrantOrder reports what it must.
type errors struct {
	testing.TB
	msgs []string
}

func (e *errors) Helper()                        {}
func (e *errors) Errorf(format string, a ...any) { e.msgs = append(e.msgs, fmt.Sprintf(format, a...)) }

// TestCheckGrantOrder: a clean history passes with its counts and open
// grants; each S1 breach in it — an overlapping grant, a token that does
// not grow, an end of a grant that is not active, a write accepted under
// another grant — is reported.
func TestCheckGrantOrder(t *testing.T) {
	clean := []ObsCall{
		{Kind: "granted", Resource: "r", Client: "a", Token: 1},
		{Kind: "applied", Resource: "r", Client: "a", Token: 1, Accepted: true},
		{Kind: "applied", Resource: "r", Client: "b", Token: 0}, // rejected: not checked
		{Kind: "ended", Resource: "r", Token: 1},
		{Kind: "granted", Resource: "r", Client: "b", Token: 2},
		{Kind: "granted", Resource: "s", Client: "a", Token: 3},
		{Kind: "ended", Resource: "s", Token: 3},
	}
	e := &errors{TB: t}
	grants, accepted, open := CheckGrantOrder(e, clean)
	if len(e.msgs) != 0 || grants != 3 || accepted != 1 || len(open) != 1 || open["r"].Token != 2 {
		t.Fatalf("clean history: errors %q, %d grants, %d accepted, open %+v; want none, 3, 1, r with token 2", e.msgs, grants, accepted, open)
	}
	for name, calls := range map[string][]ObsCall{
		"overlap":         {{Kind: "granted", Resource: "r", Client: "a", Token: 1}, {Kind: "granted", Resource: "r", Client: "b", Token: 2}},
		"token-not-grown": {{Kind: "granted", Resource: "r", Client: "a", Token: 2}, {Kind: "granted", Resource: "s", Client: "b", Token: 2}},
		"stray-end":       {{Kind: "granted", Resource: "r", Client: "a", Token: 1}, {Kind: "ended", Resource: "r", Token: 7}},
		"write-under-other": {{Kind: "granted", Resource: "r", Client: "a", Token: 1},
			{Kind: "applied", Resource: "r", Client: "b", Token: 1, Accepted: true}},
	} {
		e := &errors{TB: t}
		CheckGrantOrder(e, calls)
		if len(e.msgs) != 1 {
			t.Errorf("%s: errors %q, want one", name, e.msgs)
		}
	}
}
