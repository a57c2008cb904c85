package coverage

import (
	"regexp"
	"testing"
)

// TestMarkNamesAreStableAndComplete: every mark has a unique name of the
// documented form, a component and a line of doc, and Parse finds it.
func TestMarkNamesAreStableAndComplete(t *testing.T) {
	form := regexp.MustCompile(`^(raft|replica|lock|lockd|frontend|token|store|client|nemesis)\.[a-z0-9^-]+$`)
	seen := map[string]bool{}
	for _, m := range All() {
		name := m.String()
		if !form.MatchString(name) {
			t.Errorf("mark %d: name %q is not component.kebab-case", m, name)
		}
		if seen[name] {
			t.Errorf("mark name %q used twice", name)
		}
		seen[name] = true
		if m.Where() == "" || m.Doc() == "" {
			t.Errorf("mark %s: where %q, doc %q; both are required", name, m.Where(), m.Doc())
		}
		if got, err := Parse(name); err != nil || got != m {
			t.Errorf("Parse(%q) = %v, %v; want %v", name, got, err, m)
		}
	}
	if _, err := Parse("raft.nonsense"); err == nil {
		t.Error("Parse accepted an unknown name")
	}
}

// TestCountsAndTally: a nil *Counts counts nothing; Map, CountsFromMap and
// Tally agree on what was hit.
func TestCountsAndTally(t *testing.T) {
	var none *Counts
	none.Hit(RaftVoteSplit) // must not panic
	if none.Get(RaftVoteSplit) != 0 {
		t.Error("a nil Counts counted")
	}
	a := &Counts{}
	a.Hit(RaftVoteSplit)
	a.Hit(RaftVoteSplit)
	a.Hit(CrashLeader)
	m := a.Map()
	if len(m) != 2 || m["raft.vote-split"] != 2 || m["nemesis.crash-leader"] != 1 {
		t.Errorf("Map() = %v", m)
	}
	b, err := CountsFromMap(m)
	if err != nil || *b != *a {
		t.Errorf("CountsFromMap(Map()) = %v, %v; want %v", b, err, a)
	}
	if _, err := CountsFromMap(map[string]uint64{"nope": 1}); err == nil {
		t.Error("CountsFromMap accepted an unknown name")
	}
	var tl Tally
	tl.Add(a)
	tl.Add(&Counts{})
	tl.Add(nil)
	if tl.Runs != 3 || tl.Hits(RaftVoteSplit) != 2 || tl.RunsHit(RaftVoteSplit) != 1 || tl.RunsHit(RaftElectionLost) != 0 {
		t.Errorf("tally: runs %d, hits %d, runs hit %d", tl.Runs, tl.Hits(RaftVoteSplit), tl.RunsHit(RaftVoteSplit))
	}
	if f := tl.Fraction(CrashLeader); f != 1.0/3 {
		t.Errorf("Fraction = %v, want 1/3", f)
	}
}

// BenchmarkHit is the cost of one mark: what every protocol corner adds
// to a run (a standard run hits a few thousand, against ~170,000 events).
func BenchmarkHit(b *testing.B) {
	c := &Counts{}
	for i := 0; b.Loop(); i++ {
		c.Hit(Mark(1 + i%int(numMarks-1)))
	}
}

// BenchmarkHitNil is the cost of a mark where nothing counts (a unit test,
// the real runtime).
func BenchmarkHitNil(b *testing.B) {
	var c *Counts
	for i := 0; b.Loop(); i++ {
		c.Hit(Mark(1 + i%int(numMarks-1)))
	}
}
