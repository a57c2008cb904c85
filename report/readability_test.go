package report

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// pausedHolder is kleppmann-gc-pause as the simulator runs it: a's belief
// starts 50 ms before a 3 s pause that covers the rest of it, and b's two
// holds (and the grants behind them) last 20 ms each, a few pixels wide on
// a 10 s timeline.
func pausedHolder() Input {
	h := checker.History{
		Beliefs: []checker.Belief{
			{Client: "a", Resource: "r", Token: 2, From: 600 * ms, To: 3650 * ms, Reason: "fenced-out"},
			{Client: "b", Resource: "r", Token: 16, From: 1610 * ms, To: 1630 * ms},
			{Client: "b", Resource: "r", Token: 18, From: 1715 * ms, To: 1735 * ms},
		},
		Grants: []checker.Grant{
			{Resource: "r", Client: "a", Token: 2, Start: 600 * ms, End: 1600 * ms, Reason: checker.EndExpired},
			{Resource: "r", Client: "b", Token: 16, Start: 1610 * ms, End: 1630 * ms, Reason: checker.EndReleased},
			{Resource: "r", Client: "b", Token: 18, Start: 1715 * ms, End: 1735 * ms, Reason: checker.EndReleased},
		},
		End: 10 * time.Second,
	}
	return Input{Scenario: "paused", History: h, SimEnd: 10 * time.Second, Nodes: []string{"n1", "n2", "n3", "store", "a", "b"},
		Faults: nemesis.Schedule{{At: nemesis.Duration(650 * ms), Kind: nemesis.Pause, Node: "a", Duration: nemesis.Duration(3 * time.Second)}}}
}

func rowNamed(t *testing.T, tl *timeline, label string) *row {
	t.Helper()
	for _, r := range tl.rows {
		if r.label == label && !r.header {
			return r
		}
	}
	t.Fatalf("no row %q", label)
	return nil
}

func intersect(a, b [4]float64) bool { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3] }

// TestLabelsClearOfPauses: a belief's token label is not drawn under the
// pause that covers most of the belief; it is drawn, somewhere clear.
func TestLabelsClearOfPauses(t *testing.T) {
	tl := buildTimeline(pausedHolder())
	a := rowNamed(t, tl, "a")
	if len(a.over) != 1 || len(a.bars) != 1 {
		t.Fatalf("row a: %d overlays, %d bars", len(a.over), len(a.bars))
	}
	if a.bars[0].lmode == labelNone {
		t.Fatal("a's belief has no label")
	}
	for _, r := range tl.rows {
		for _, b := range r.bars {
			if b.lmode == labelNone {
				continue
			}
			_, _, box := tl.labelBox(r, b)
			for _, o := range r.over {
				if intersect(box, tl.overlayBox(r, o)) {
					t.Errorf("row %s: label %q at %v lies under %q at %v", r.label, b.label, box, o.label, tl.overlayBox(r, o))
				}
			}
		}
	}
}

// TestShortGrantsLabelled: a 20 ms grant (3 px) still shows its token and
// holder, and keeps its tooltip.
func TestShortGrantsLabelled(t *testing.T) {
	in := pausedHolder()
	page := render1(t, in)
	for _, want := range []string{">t16 b</text>", ">t18 b</text>", ">t16 r</text>", ">t18 r</text>", "<title>grant of r to b, token 16"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Labels of one row do not overlap one another.
	tl := buildTimeline(in)
	for _, r := range tl.rows {
		var boxes [][4]float64
		for _, b := range r.bars {
			if b.lmode != labelNone {
				_, _, box := tl.labelBox(r, b)
				for _, o := range boxes {
					if intersect(box, o) {
						t.Errorf("row %s: label %q overlaps another", r.label, b.label)
					}
				}
				boxes = append(boxes, box)
			}
		}
	}
}

// TestLeaderFaultOnItsRow: a fault aimed at @leader is drawn on the row of
// the node that led when it fired, and says so; without a pick it stays on
// the fault row.
func TestLeaderFaultOnItsRow(t *testing.T) {
	in := pausedHolder()
	in.Faults = nemesis.Schedule{
		{At: nemesis.Duration(700 * ms), Kind: nemesis.Isolate, Node: nemesis.Leader},
		{At: nemesis.Duration(2500 * ms), Kind: nemesis.Heal},
		{At: nemesis.Duration(3 * time.Second), Kind: nemesis.Crash, Node: nemesis.Leader},
		{At: nemesis.Duration(4 * time.Second), Kind: nemesis.Restart, Node: nemesis.Crashed},
	}
	in.Picks = []Pick{{At: 700 * ms, Selector: nemesis.Leader, Node: "n2"}, {At: 3 * time.Second, Selector: nemesis.Leader, Node: "n3"}}
	tl := buildTimeline(in)
	n2, n3 := rowNamed(t, tl, "n2"), rowNamed(t, tl, "n3")
	if len(n2.over) != 1 || !strings.Contains(n2.over[0].title, "isolate @leader (@leader was n2 when it fired)") {
		t.Errorf("n2 overlays: %+v", n2.over)
	}
	if len(n3.over) != 1 || n3.over[0].fill != bandCrash || n3.over[0].to != 4*time.Second || len(n3.points) != 1 {
		t.Errorf("n3: overlays %+v, points %+v; want the crash until the restart at 4s and its ring", n3.over, n3.points)
	}
	for _, r := range tl.rows {
		if r.label == "faults" && len(r.bars) > 0 {
			t.Errorf("the fault row still draws %q", r.bars[0].label)
		}
		if r.label == "n1" {
			t.Error("n1 has a row, though no fault touched it")
		}
	}
	in.Picks = nil
	if f := rowNamed(t, buildTimeline(in), "faults"); len(f.bars) != 2 || f.bars[0].label != "isolate @leader" {
		t.Errorf("without picks: fault row bars %+v", f.bars)
	}
}

// TestLegendCoversColours: every colour the timeline draws has an entry in
// the legend.
func TestLegendCoversColours(t *testing.T) {
	in := kleppmann(t)
	var faults nemesis.Schedule
	at := func(s float64) nemesis.Duration { return nemesis.Duration(time.Duration(s * float64(time.Second))) }
	for i, k := range nemesis.Kinds() {
		op := nemesis.Op{At: at(0.1 + 0.4*float64(i)), Kind: k, Node: "bob"}
		switch k {
		case nemesis.Pause, nemesis.Loss, nemesis.Duplicate, nemesis.Delay, nemesis.Reorder, nemesis.Drift, nemesis.Jump, nemesis.SlowDisk:
			op.Duration = at(0.3)
		}
		switch k {
		case nemesis.Block:
			op.To = "lock"
		case nemesis.Partition:
			op.Node, op.Group = "", []string{"bob"}
		case nemesis.Heal, nemesis.NetworkReset, nemesis.Loss, nemesis.Duplicate, nemesis.Delay, nemesis.Reorder:
			op.Node = ""
		case nemesis.Jump:
			op.By = at(-1)
		case nemesis.SlowDisk:
			op.Delay = at(0.05)
		case nemesis.Drift:
			op.PPM = 500
		}
		faults = append(faults, op)
	}
	faults = append(faults, nemesis.Op{At: at(7.5), Kind: nemesis.SlowDisk, Node: "bob"})
	in.Faults = faults.Sorted()
	in.Verdict.Violations = []checker.Violation{{Property: "S3", At: 4 * time.Second, Ops: []int{2}}}
	page := render1(t, in)
	plot := page[strings.Index(page, `<svg class="tl-plot"`):]
	plot = plot[:strings.Index(plot, "</svg>")]
	structural := []string{"#fafafa", "#eeeeee", "#e0e0e0", "#999", "#555", "#444", "#fff", "#ffffff", "#424242"}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:fill|stroke)="(#[0-9a-fA-F]+)"`).FindAllStringSubmatch(plot, -1) {
		c := strings.ToLower(m[1])
		if !slices.Contains(structural, c) && !slices.Contains(tokenPalette, c) {
			used[c] = true
		}
	}
	for _, want := range []string{bandNetwork, bandPartition, bandCrash, colClock, bandDisk, colStore, colViol} {
		if !used[want] {
			t.Errorf("the test page does not draw %s: it tests less than it claims", want)
		}
	}
	for c := range used {
		if !strings.Contains(legend, `"`+c+`"`) {
			t.Errorf("the timeline draws %s, which the legend does not explain", c)
		}
	}
}

// TestTokenColoursByRank: Redlock's tokens are ranks 1000 apart; each
// grant still gets its own colour.
func TestTokenColoursByRank(t *testing.T) {
	in := pausedHolder()
	for i := range in.History.Grants {
		in.History.Grants[i].Token = uint64(i+1) * 1000
	}
	tl := buildTimeline(in)
	g := rowNamed(t, tl, "grants · r")
	if a, b, c := g.bars[0].fill, g.bars[1].fill, g.bars[2].fill; a == b || b == c || a == c {
		t.Errorf("grants 1000, 2000, 3000 coloured %s, %s, %s", a, b, c)
	}
}

// TestNoOpHealsLeftOut: the final heal of a liveness phase resets every
// node's clock and disk; a reset with nothing to reset draws nothing.
func TestNoOpHealsLeftOut(t *testing.T) {
	in := pausedHolder()
	in.Faults = nemesis.Schedule{
		{At: nemesis.Duration(time.Second), Kind: nemesis.Drift, Node: "n1", PPM: 300},
		{At: nemesis.Duration(8 * time.Second), Kind: nemesis.Heal},
		{At: nemesis.Duration(8 * time.Second), Kind: nemesis.NetworkReset},
		{At: nemesis.Duration(8 * time.Second), Kind: nemesis.ClockReset, Node: "n1"},
		{At: nemesis.Duration(8 * time.Second), Kind: nemesis.ClockReset, Node: "n2"},
		{At: nemesis.Duration(8 * time.Second), Kind: nemesis.SlowDisk, Node: "n2"},
	}
	tl := buildTimeline(in)
	for _, r := range tl.rows {
		switch r.label {
		case "n2", "faults", "network":
			t.Errorf("row %s drawn for resets with nothing to reset", r.label)
		}
	}
	if n1 := rowNamed(t, tl, "n1"); len(n1.points) != 1 {
		t.Errorf("n1's clock reset after its drift: %d points", len(n1.points))
	}
	if page := render1(t, in); !strings.Contains(page, "Fault schedule (6 ops)") {
		t.Error("fault schedule count")
	}
	in.Faults = in.Faults[:1]
	if page := render1(t, in); !strings.Contains(page, "Fault schedule (1 op)") || !strings.Contains(page, "1 fault op</td>") {
		t.Error("one fault op is not \"1 op\"")
	}
}

// TestFaultsThatUndoThemselves: a crash or an isolation with a duration
// (as a trigger fires them) ends at its duration, with no restart or heal
// in the schedule.
func TestFaultsThatUndoThemselves(t *testing.T) {
	in := pausedHolder()
	in.Faults = nemesis.Schedule{
		{At: nemesis.Duration(time.Second), Kind: nemesis.Crash, Node: "n1", Duration: nemesis.Duration(200 * time.Millisecond)},
		{At: nemesis.Duration(2 * time.Second), Kind: nemesis.Isolate, Node: "n2", Duration: nemesis.Duration(300 * time.Millisecond)},
	}
	page := render1(t, in)
	for _, want := range []string{"restarted at 1.2s", "its links reopened at 2.3s"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}
