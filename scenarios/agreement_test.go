package scenarios

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/mutants"
	"github.com/fencesim/fencesim/sim"
)

// TestRecorderKeysDecisions feeds the recorder a replicated service's
// reports and checks that it keys them by decision: several replicas'
// reports of one entry are one grant or end, however late; one token
// granted by two entries is two grants, which S1 then reports as issued
// twice; each distinct entry a replica applies at an index is recorded
// once, restarts' replays adding nothing; each (replica, term) won is one
// election. A service without a log (index 0) reissuing a token after the
// first grant ended makes two grants too.
func TestRecorderKeysDecisions(t *testing.T) {
	w, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(w, map[string]sim.NodeID{}, false)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	at := func(n int, e lockservice.Event) { w.At(ms(n), "script", func() { rec.Observe(e) }) }
	grant := func(res, client string, tok, index uint64) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvGranted, Resource: res, Client: client, Token: tok, Index: index}
	}
	end := func(res, client string, tok, index uint64) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvEnded, Resource: res, Client: client, Token: tok, Index: index, Reason: checker.EndReleased}
	}
	applied := func(node string, index, term, digest uint64) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvEntryApplied, Node: node, Index: index, Term: term, Digest: digest}
	}
	elected := func(node string, term uint64) lockservice.Event {
		return lockservice.Event{Kind: lockservice.EvElected, Node: node, Term: term}
	}

	at(1, elected("n1", 1))
	at(2, grant("r", "a", 5, 5)) // n1
	at(3, grant("r", "a", 5, 5)) // n2
	at(4, end("r", "a", 5, 6))   // n1
	at(5, end("r", "a", 5, 6))   // n2
	at(6, grant("r", "b", 5, 9)) // n1: token 5 again, for b (a planted bug)
	at(7, grant("r", "a", 5, 5)) // n3, late: entry 5 again, not a new grant
	at(8, end("r", "a", 5, 6))   // n3, late: must not end b's grant
	at(9, grant("r", "b", 5, 9)) // n2
	at(10, elected("n1", 1))     // n1 restarted and leads term 1 again: recorded (S9)
	at(11, elected("n2", 1))     // a second leader of term 1
	at(12, applied("n1", 1, 1, 0))
	at(13, applied("n2", 1, 1, 0))
	at(14, applied("n1", 2, 1, 0xaa))
	at(15, applied("n1", 1, 1, 0)) // n1's replay after a restart
	at(16, applied("n2", 2, 1, 0xbb))
	at(17, applied("n3", 2, 1, 0xbb))
	at(18, applied("n3", 2, 1, 0xaa))
	at(20, grant("x", "c", 7, 0)) // a service without a log
	at(21, grant("x", "c", 7, 0)) // reported again while open: the same grant
	at(22, end("x", "c", 7, 0))
	at(23, grant("x", "c", 7, 0)) // issued again after it ended
	w.Run(ms(50), 1000)
	h := rec.history()

	wantGrants := []checker.Grant{
		{Resource: "r", Client: "a", Token: 5, Start: ms(2), End: ms(4), Reason: checker.EndReleased, Step: 2},
		{Resource: "r", Client: "b", Token: 5, Start: ms(6), Open: true, Step: 6},
		{Resource: "x", Client: "c", Token: 7, Start: ms(20), End: ms(22), Reason: checker.EndReleased, Step: 19},
		{Resource: "x", Client: "c", Token: 7, Start: ms(23), Open: true, Step: 22},
	}
	wantEnds := []checker.GrantEnd{
		{Resource: "r", Client: "a", Token: 5, Reason: checker.EndReleased, At: ms(4), Step: 4},
		{Resource: "x", Client: "c", Token: 7, Reason: checker.EndReleased, At: ms(22), Step: 21},
	}
	wantElections := []checker.Election{{Node: "n1", Term: 1, At: ms(1), Step: 1}, {Node: "n1", Term: 1, At: ms(10), Step: 10}, {Node: "n2", Term: 1, At: ms(11), Step: 11}}
	wantApplies := []checker.EntryApply{
		{Node: "n1", Index: 1, Term: 1, Command: 0, At: ms(12), Step: 12},
		{Node: "n1", Index: 2, Term: 1, Command: 0xaa, At: ms(14), Step: 14},
		{Node: "n2", Index: 2, Term: 1, Command: 0xbb, At: ms(16), Step: 16},
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"grants", h.Grants, wantGrants},
		{"ends", h.Ends, wantEnds},
		{"elections", h.Elections, wantElections},
		{"entry applies", h.EntryApplies, wantApplies},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, c.got, c.want)
		}
	}

	v := checker.Check(h, checker.Options{})
	var s1 []string
	for _, x := range v.Violations {
		if x.Property == "S1" {
			s1 = append(s1, x.Detail)
		}
	}
	if len(s1) != 2 || !strings.Contains(s1[0], "Token 5 was issued twice") || !strings.Contains(s1[1], "Token 7 was issued twice") {
		t.Errorf("got S1 %q, want token 5 and token 7 each issued twice", s1)
	}
	for _, p := range []string{"S9", "S10"} {
		if !slices.Contains(propertiesOf(v), p) {
			t.Errorf("got %v, want %s", propertiesOf(v), p)
		}
	}
	if !slices.ContainsFunc(v.Violations, func(x checker.Violation) bool { return strings.Contains(x.Detail, `Replica "n1" won term 1 twice`) }) {
		t.Errorf("n1's second win of term 1 is not an S9 violation: %+v", v.Violations)
	}
}

// propertiesOf lists the properties v's violations refute, in order.
func propertiesOf(v checker.Verdict) []string {
	var ps []string
	for _, x := range v.Violations {
		if !slices.Contains(ps, x.Property) {
			ps = append(ps, x.Property)
		}
	}
	return ps
}

// TestTokenReuseIsDiagnosedAsReissue: the token-reuse-on-reacquire mutant
// hands a resource's last token to its next holder; S1 now says so — the
// token was issued twice — where it used to be invisible to S1 (the
// recorder kept a token's first grant only) and show up as S4, a write by a
// client the token was not granted to.
func TestTokenReuseIsDiagnosedAsReissue(t *testing.T) {
	spec := huntScenario("swarm")
	spec.Mutant = string(mutants.MutTokenReuseOnReacquire)
	for seed := uint64(1); seed <= 3; seed++ {
		res, err := Run(spec, seed, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v := res.Verdict.Violations
		if len(v) == 0 || v[0].Property != "S1" || !strings.Contains(v[0].Detail, "was issued twice") {
			t.Fatalf("seed %d: got %v, want first S1: a token issued twice", seed, propertiesOf(res.Verdict))
		}
	}
}

// TestReplicaAgreementCatchesMutants: planted bugs that break Raft — a
// majority of n/2, term, vote and log not synced before the replies that
// depend on them — are caught by S9 (two leaders of one term) and S10
// (replicas applied different entries at one index), which no client has
// to notice; the reference, on the same seeds, records every replica's
// entries and elections and breaks neither.
func TestReplicaAgreementCatchesMutants(t *testing.T) {
	for _, c := range []struct {
		mutant   lockservice.Mutant
		scenario string
		seed     uint64
	}{
		{mutants.MutQuorumOffByOne, "swarm", 2},
		{mutants.MutTokenUnsynced, "restart-all-replicas", 1},
	} {
		t.Run(string(c.mutant), func(t *testing.T) {
			spec := huntScenario(c.scenario)
			ref, err := Run(spec, c.seed, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ref.History.Elections) == 0 || len(ref.History.EntryApplies) == 0 || !ref.Met(spec) {
				t.Fatalf("reference: %d elections, %d entries, verdict %v %v: want records and the expectation met",
					len(ref.History.Elections), len(ref.History.EntryApplies), ref.Verdict.Kind, propertiesOf(ref.Verdict))
			}
			spec.Mutant = string(c.mutant)
			res, err := Run(spec, c.seed, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := propertiesOf(res.Verdict)
			if !slices.Contains(got, "S9") || !slices.Contains(got, "S10") {
				t.Fatalf("%s seed %d: got %v, want S9 and S10", c.scenario, c.seed, got)
			}
		})
	}
}

// TestReplicaRecordsOnlyWithRaft: a replicated run records one entry per
// log index from 1 with no gap, and its elections; the designs without Raft
// record neither, so S9 and S10 judge nothing there.
func TestReplicaRecordsOnlyWithRaft(t *testing.T) {
	for _, name := range []string{"kleppmann-gc-pause", "lock-server-restart", "redlock-gc-pause"} {
		spec := huntScenario(name)
		res, err := Run(spec, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := res.History
		if !designOf(spec).Info().Leader {
			if len(h.Elections) != 0 || len(h.EntryApplies) != 0 {
				t.Errorf("%s (%s): got %d elections and %d entries, want none", name, spec.Design, len(h.Elections), len(h.EntryApplies))
			}
			continue
		}
		if len(h.Elections) == 0 || len(h.EntryApplies) == 0 {
			t.Fatalf("%s: got %d elections and %d entries, want both", name, len(h.Elections), len(h.EntryApplies))
		}
		for i, a := range h.EntryApplies {
			if a.Index != uint64(i+1) {
				t.Fatalf("%s: record %d is index %d, want %d (one per index, in order)", name, i, a.Index, i+1)
			}
		}
	}
}

// TestRecorderFarLogIndexes: a design may start its log, and so its
// tokens, anywhere up to 2^64−1. The recorder's table of entries by index
// must not be sized by the index (a dense table reached 2^62 entries'
// worth of memory), and replicas that disagree far out are still recorded
// for S10, and replicas that agree once.
func TestRecorderFarLogIndexes(t *testing.T) {
	w, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(w, map[string]sim.NodeID{}, false)
	far := uint64(1) << 62
	for i, e := range []lockservice.Event{
		{Kind: lockservice.EvEntryApplied, Node: "n1", Index: 1, Term: 1, Digest: 1},
		{Kind: lockservice.EvEntryApplied, Node: "n1", Index: far, Term: 2, Digest: 0xaa},
		{Kind: lockservice.EvEntryApplied, Node: "n2", Index: far, Term: 2, Digest: 0xaa},
		{Kind: lockservice.EvEntryApplied, Node: "n3", Index: far, Term: 2, Digest: 0xbb},
		{Kind: lockservice.EvEntryApplied, Node: "n1", Index: math.MaxUint64, Term: 3, Digest: 7},
	} {
		w.At(time.Duration(i+1)*time.Millisecond, "script", func() { rec.Observe(e) })
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	w.Run(time.Second, 1000)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("recording five applies allocated %d MB", grew>>20)
	}
	h := rec.history()
	if len(h.EntryApplies) != 4 {
		t.Fatalf("recorded %d entries, want 4 (index 1, two different entries at 2^62, 2^64−1): %+v", len(h.EntryApplies), h.EntryApplies)
	}
	v := checker.Check(h, checker.Options{})
	if !slices.ContainsFunc(v.Violations, func(x checker.Violation) bool { return x.Property == "S10" }) {
		t.Fatalf("no S10 for replicas that disagree at index 2^62: %+v", v)
	}
}
