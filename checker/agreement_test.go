package checker

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// entry is a replica's apply of the entry (term, command) at index.
func entry(node string, index, term, command uint64, at int, step uint64) EntryApply {
	return EntryApply{Node: node, Index: index, Term: term, Command: command, At: ms(at), Step: step}
}

// TestAgreementCanaries checks that each hand-built history fails S9 or S10
// and no other property, with one violation per disagreement.
func TestAgreementCanaries(t *testing.T) {
	tests := []struct {
		name string
		h    History
		want string
		n    int // violations
		in   string
	}{
		{"S9 two leaders of one term", History{Elections: []Election{
			{Node: "n1", Term: 2, At: ms(1), Step: 1},
			{Node: "n2", Term: 2, At: ms(3), Step: 5},
		}}, "S9", 1, `Term 2 had two leaders: replica "n1" won it at 1ms (step 1) and replica "n2" also won it at 3ms (step 5).`},
		{"S9 three leaders of one term, listed out of order", History{Elections: []Election{
			{Node: "n3", Term: 4, At: ms(9), Step: 9},
			{Node: "n1", Term: 3, At: ms(1), Step: 1},
			{Node: "n2", Term: 4, At: ms(5), Step: 5},
			{Node: "n1", Term: 4, At: ms(7), Step: 7},
		}}, "S9", 2, `replica "n2" won it at 5ms`},
		{"S9 one replica leads a term twice (a restart that lost its term or vote)", History{Elections: []Election{
			{Node: "n1", Term: 2, At: ms(1), Step: 1},
			{Node: "n2", Term: 3, At: ms(5), Step: 5},
			{Node: "n2", Term: 3, At: ms(9), Step: 9},
		}}, "S9", 1, `Replica "n2" won term 3 twice: at 5ms (step 5) and again at 9ms (step 9); a replica reports a won term once, so it restarted and led the same term again instead of campaigning in a new one.`},
		{"S9 another leader, then the first again", History{Elections: []Election{
			{Node: "n1", Term: 2, At: ms(1), Step: 1},
			{Node: "n2", Term: 2, At: ms(3), Step: 3},
			{Node: "n1", Term: 2, At: ms(5), Step: 5},
		}}, "S9", 2, `Term 2 had two leaders`},
		{"S10 two commands at one index", History{EntryApplies: []EntryApply{
			entry("n1", 1, 1, 0, 1, 1),
			entry("n1", 2, 1, 0xaa, 2, 2),
			entry("n2", 2, 1, 0xbb, 3, 3),
		}}, "S10", 1, `Replicas applied different entries at log index 2: replica "n1" applied term 1, command 00000000000000aa at 2ms (step 2), and replica "n2" applied term 1, command 00000000000000bb at 3ms (step 3).`},
		{"S10 same command, different term", History{EntryApplies: []EntryApply{
			entry("n1", 5, 2, 0xaa, 2, 2),
			entry("n3", 5, 3, 0xaa, 3, 3),
		}}, "S10", 1, `term 3`},
		{"S10 an empty entry against a command", History{EntryApplies: []EntryApply{
			entry("n2", 5, 2, 0, 2, 2),
			entry("n1", 5, 2, 0xaa, 3, 3),
		}}, "S10", 1, `command (empty)`},
		{"S10 a restart re-applies a different command", History{EntryApplies: []EntryApply{
			entry("n1", 7, 2, 0xaa, 2, 2),
			entry("n1", 7, 3, 0xcc, 9, 9),
		}}, "S10", 1, `replica "n1" applied term 3`},
		{"S10 one violation per run of diverging indexes", History{EntryApplies: []EntryApply{
			entry("n1", 1, 1, 0x1, 1, 1),
			entry("n1", 2, 1, 0x2, 2, 2),
			entry("n1", 3, 1, 0x3, 3, 3),
			entry("n1", 4, 1, 0x4, 4, 4),
			entry("n1", 5, 1, 0x5, 5, 5),
			entry("n2", 1, 1, 0x1, 6, 6),
			entry("n2", 2, 2, 0x12, 7, 7), // 2..3 diverge
			entry("n2", 3, 2, 0x13, 8, 8),
			entry("n2", 4, 1, 0x4, 9, 9),
			entry("n2", 5, 2, 0x15, 10, 10), // and 5
		}}, "S10", 2, `log index 2 (and at every index after it up to 3)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.h, Options{})
			if got, want := properties(v), []string{tt.want}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v (verdict %+v)", got, want, v)
			}
			if got, want := len(v.Violations), tt.n; got != want {
				t.Errorf("got %d violations, want %d: %+v", got, want, v.Violations)
			}
			if !strings.Contains(v.Violations[0].Detail, tt.in) {
				t.Errorf("got detail %q, want it to contain %q", v.Violations[0].Detail, tt.in)
			}
			for _, x := range v.Violations {
				if !strings.HasSuffix(x.Detail, ".") || strings.ToUpper(x.Detail[:1]) != x.Detail[:1] {
					t.Errorf("got detail %q, want one full sentence", x.Detail)
				}
			}
		})
	}
}

// TestAgreementPasses checks what replicas may do: lead one term after
// another (the same replica too) and apply the same entry at an index
// however often and late.
func TestAgreementPasses(t *testing.T) {
	h := History{
		Elections: []Election{
			{Node: "n1", Term: 2, At: ms(1), Step: 1},
			{Node: "n2", Term: 3, At: ms(5), Step: 5},
			{Node: "n2", Term: 4, At: ms(9), Step: 9}, // restarted, led the next term
		},
		EntryApplies: []EntryApply{
			entry("n1", 1, 2, 0, 2, 2),
			entry("n1", 2, 2, 0xaa, 3, 3),
			entry("n2", 1, 2, 0, 4, 4),
			entry("n2", 2, 2, 0xaa, 5, 5),
			entry("n2", 2, 2, 0xaa, 9, 9), // the restart's replay
			entry("n3", 2, 2, 0xaa, 20, 20),
		},
	}
	if v := Check(h, Options{}); v.Kind != VerdictPass {
		t.Fatalf("got %v, want pass: %+v", v.Kind, v.Violations)
	}
}

// TestAgreementJSON checks that the replicas' records round-trip through
// JSON, and that a history without them (a design without Raft) says
// nothing about them.
func TestAgreementJSON(t *testing.T) {
	h := History{Elections: []Election{{Node: "n1", Term: 2, At: ms(1), Step: 1}},
		EntryApplies: []EntryApply{entry("n1", 1, 2, 0xfedcba9876543210, 2, 2)}}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Errorf("got %+v, want %+v", back, h)
	}
	b, _ = json.Marshal(History{})
	if s := string(b); strings.Contains(s, "elections") || strings.Contains(s, "entry_applies") {
		t.Errorf("got %s, want no replica records in a history without them", s)
	}
}
