package checker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLeaseSafetyCanary: the Kleppmann history with a fenced store passes
// S1–S10 (fencing did its job), yet A believed in its lease for 5.1s after
// the service expired it. Without the pause that explains it, that is a
// lease-safety violation, L1's alone; with the pause excused, L1 holds.
func TestLeaseSafetyCanary(t *testing.T) {
	h := kleppmann(false)
	v := Check(h, Options{})
	require.Equal(t, VerdictPass, v.Kind, "the canary must fail L1 only: %+v", v.Violations)
	vs := CheckLeaseSafety(h, nil)
	require.Len(t, vs, 1, "one L1 violation of A's belief, 5.1s past the expiry at 10s")
	require.Equal(t, propLeaseSafety, vs[0].Property)
	require.Equal(t, ms(10000), vs[0].At)
	require.Contains(t, vs[0].Detail, `Client "A"`)
	require.Contains(t, vs[0].Detail, "5.1s after")
	for _, tc := range []struct {
		name    string
		excused []LeaseExcuse
		want    int
	}{
		{"A's pause", []LeaseExcuse{{Client: "A", From: ms(640), To: ms(15000), Fault: "pause of A"}}, 0},
		{"the leader's clock", []LeaseExcuse{{From: ms(2000), To: ms(3000), Fault: "drift"}}, 0},
		{"a fault on B", []LeaseExcuse{{Client: "B", From: ms(640), To: ms(15000), Fault: "pause of B"}}, 1},
		{"a fault after the belief", []LeaseExcuse{{Client: "A", From: ms(15200), To: ms(16000), Fault: "pause of A"}}, 1},
		{"a fault before the grant", []LeaseExcuse{{Client: "A", From: -ms(5), To: -ms(1), Fault: "pause of A"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Len(t, CheckLeaseSafety(h, tc.excused), tc.want)
		})
	}
}

// TestLeaseSafetyJudgesOnlyWhatItCan: beliefs within their grant, empty
// beliefs (a late grant the watchdog refused at once), beliefs ended by a
// restart (the crash instant is unknown), beliefs in tokens never granted
// (S5's) and grants still open pass; an open belief past its grant fails.
func TestLeaseSafetyJudgesOnlyWhatItCan(t *testing.T) {
	g := grant("r", "A", 1, ms(10), ms(500), 1)
	g.Reason = EndExpired
	base := History{Grants: []Grant{g, openGrant("r", "B", 2, ms(600), 2)}, End: ms(1000)}
	for _, tc := range []struct {
		name string
		b    Belief
		want int
	}{
		{"inside", Belief{Client: "A", Resource: "r", Token: 1, From: ms(12), To: ms(480), Reason: "releasing"}, 0},
		{"ends with the grant", Belief{Client: "A", Resource: "r", Token: 1, From: ms(12), To: ms(500), Reason: "watchdog"}, 0},
		{"empty, after the grant", Belief{Client: "A", Resource: "r", Token: 1, From: ms(700), To: ms(700), Reason: "watchdog"}, 0},
		{"ended by a restart", Belief{Client: "A", Resource: "r", Token: 1, From: ms(12), To: ms(800), Reason: "restarted"}, 0},
		{"token never granted", Belief{Client: "A", Resource: "r", Token: 7, From: ms(12), To: ms(800), Reason: "watchdog"}, 0},
		{"open grant", Belief{Client: "B", Resource: "r", Token: 2, From: ms(610), Open: true}, 0},
		{"past the grant", Belief{Client: "A", Resource: "r", Token: 1, From: ms(12), To: ms(501), Reason: "watchdog"}, 1},
		{"starts after the grant", Belief{Client: "A", Resource: "r", Token: 1, From: ms(700), To: ms(710), Reason: "fenced-out"}, 1},
		{"open past the grant", Belief{Client: "A", Resource: "r", Token: 1, From: ms(12), Open: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base
			h.Beliefs = []Belief{tc.b}
			require.Len(t, CheckLeaseSafety(h, nil), tc.want)
		})
	}
	lost := base
	lost.Grants = []Grant{g}
	lost.Grants[0].Lost = true // a crash took it back: not a fact
	lost.Beliefs = []Belief{{Client: "A", Resource: "r", Token: 1, From: ms(12), To: ms(800)}}
	require.Empty(t, CheckLeaseSafety(lost, nil), "lost grant: nothing judged")
}
