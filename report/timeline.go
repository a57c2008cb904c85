package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// Layout of the timeline, in pixels.
const (
	labelW    = 200.0  // the fixed label column
	axisH     = 28.0   // the time axis at the top
	pxPerSec  = 150.0  // horizontal scale, within the bounds below
	minPlotW  = 900.0  // narrowest plot
	maxPlotW  = 8000.0 // widest plot
	rightPad  = 40.0   // room after SimEnd for labels
	laneH     = 15.0   // one lane of bars or markers
	stripH    = 8.0    // the strip of call..return lines under a row
	headerH   = 20.0   // a section header row
	maxLanes  = 6      // bars beyond this many overlapping share the last lane
	charW     = 6.2    // estimated width of one character of 11px text
	thinLimit = 5000   // more records than this of one kind are thinned
)

// tokenPalette colours beliefs and grants by token, so that a belief and
// the grant it came from share a colour.
var tokenPalette = []string{
	"#8fb3d9", "#f5b971", "#9fd08f", "#f09a9b", "#a3d5d0",
	"#f1dc86", "#cda6c5", "#ffc4cb", "#c2a796", "#cfc9c5",
}

// tokenColor colours a token by its rank among the run's tokens, not by its
// value: Redlock's tokens are ranks spaced 1000 apart, and colouring them
// by value modulo the palette painted every grant of a run alike.
func (t *timeline) tokenColor(token uint64) string {
	return tokenPalette[t.tokenRank[token]%len(tokenPalette)]
}

// rankTokens numbers the distinct tokens of the history's beliefs and
// grants in ascending order.
func rankTokens(h checker.History) map[uint64]int {
	var ts []uint64
	for _, b := range h.Beliefs {
		ts = append(ts, b.Token)
	}
	for _, g := range h.Grants {
		ts = append(ts, g.Token)
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	rank := make(map[uint64]int, len(ts))
	for i, tk := range ts {
		rank[tk] = i
	}
	return rank
}

// Marker colours.
const (
	colAccepted = "#2e7d32"
	colRejected = "#c62828"
	colUnknown  = "#8a8a8a"
	colRead     = "#1565c0"
	colReleased = "#1565c0"
	colExpired  = "#ef6c00"
	colRenewal  = "#333333"
	colRestart  = "#2e7d32"
	colStore    = "#6a1b9a"
	colClock    = "#0277bd"
	colViol     = "#d50000"
)

// Fault band colours.
const (
	bandPartition = "#7e57c2"
	bandCrash     = "#b71c1c"
	bandPause     = "#616161"
	bandClock     = "#0277bd"
	bandDisk      = "#795548"
	bandNetwork   = "#00897b"
)

// bar is an interval drawn in a row's lanes, or over the whole row (an
// overlay).
type bar struct {
	from, to time.Duration
	fill     string // a colour, or "hatch" for the pause pattern
	opacity  float64
	stroke   string
	dashed   bool
	label    string
	title    string
	lane     int
	// Where the label goes, decided by placeLabels: lx is its left edge.
	lmode labelMode
	lx    float64
}

// labelMode says where a bar's label is drawn.
type labelMode int

const (
	labelNone   labelMode = iota // no room: the bar's tooltip carries it
	labelInside                  // inside the bar, where no overlay covers it
	labelRight                   // just right of the bar
	labelAbove                   // on the label line above the row's lanes
)

// Shapes of point markers.
const (
	shDot = iota
	shCross
	shTick
	shSquare
	shDiamond
	shRing
	shTriUp
	shTriDown
)

// point is a marker at an instant in one lane of a row.
type point struct {
	at     time.Duration
	shape  int
	color  string
	hollow bool
	lane   int
	label  string
	below  bool // label under the marker instead of above
	title  string
}

// span is a call..return line in a row's strip.
type span struct {
	from, to  time.Duration
	color     string
	dashed    bool
	highlight bool
	title     string
}

// row is one horizontal band of the timeline.
type row struct {
	label   string
	title   string
	header  bool // a section header: label only
	lanes   int  // lanes of bars and points (at least 1)
	topPad  float64
	botPad  float64
	strip   bool
	bars    []bar
	over    []bar
	points  []point
	spans   []span
	y, h    float64
	fixedLn bool // lanes fixed by the row kind, not by bar overlap
}

// band is a shaded vertical band over every row (or a line if from == to).
type band struct {
	from, to time.Duration
	color    string
	title    string
}

// vline is a vertical line over every row, with a short label in the axis.
type vline struct {
	at    time.Duration
	color string
	label string
	title string
}

// timeline is everything the SVG shows, laid out.
type timeline struct {
	tokenRank map[uint64]int // see tokenColor
	end       time.Duration
	plotW     float64
	height    float64
	rows      []*row
	bands     []band
	vlines    []vline
	notes     []string
}

// x maps a true time to the plot's x coordinate, clamping to 0..end.
func (t *timeline) x(d time.Duration) float64 {
	d = max(0, min(d, t.end))
	return float64(d) / float64(t.end) * t.plotW
}

// stub is the end of the short dashed line drawn for an op that never
// returned: drawing it to the end of the run would bury the strip.
func (t *timeline) stub(from time.Duration) time.Duration {
	return from + time.Duration(14/t.plotW*float64(t.end))
}

// timeEnd is the right edge of the timeline: SimEnd, or else the latest time
// in the history, or else one second.
func timeEnd(in Input) time.Duration {
	if in.SimEnd > 0 {
		return in.SimEnd
	}
	h := in.History
	end := h.End
	for _, o := range h.Ops {
		end = max(end, o.Call, o.Return)
	}
	for _, o := range h.LockOps {
		end = max(end, o.Call, o.Return)
	}
	for _, g := range h.Grants {
		end = max(end, g.Start, g.End)
	}
	for _, a := range h.Applies {
		end = max(end, a.At)
	}
	for _, b := range h.Beliefs {
		end = max(end, b.From, b.To)
	}
	for _, r := range h.Renewals {
		end = max(end, r.At)
	}
	for _, e := range h.Ends {
		end = max(end, e.At)
	}
	for _, op := range in.Faults {
		end = max(end, time.Duration(op.At))
	}
	if end <= 0 {
		end = time.Second
	}
	return end
}

// thin keeps at most about thinLimit of xs, evenly spread, and notes it.
func thin[T any](t *timeline, kind string, xs []T) []T {
	if len(xs) <= thinLimit {
		return xs
	}
	stride := (len(xs) + thinLimit - 1) / thinLimit
	out := make([]T, 0, len(xs)/stride+1)
	for i := 0; i < len(xs); i += stride {
		out = append(out, xs[i])
	}
	t.notes = append(t.notes, fmt.Sprintf("%s: %d records, every %s drawn (%d); history.json has them all.",
		kind, len(xs), ordinal(stride), len(out)))
	return out
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// openEnd is the end of an interval that may be open.
func openEnd(to time.Duration, open bool, end time.Duration) time.Duration {
	if open {
		return end
	}
	return to
}

// buildTimeline turns the run's records into rows, bands and lines.
func buildTimeline(in Input) *timeline {
	h := in.History
	t := &timeline{end: timeEnd(in), tokenRank: rankTokens(h)}
	t.plotW = max(minPlotW, min(maxPlotW, t.end.Seconds()*pxPerSec))

	// Who has a row. Clients are the names the history's client fields use;
	// every other node (from Nodes, then from the faults) gets a node row.
	var clientNames, resNames []string
	seen := func(client, resource string) {
		clientNames = append(clientNames, client)
		resNames = append(resNames, resource)
	}
	for _, o := range h.Ops {
		seen(o.Client, o.Resource)
	}
	for _, o := range h.LockOps {
		seen(o.Client, o.Resource)
	}
	for _, b := range h.Beliefs {
		seen(b.Client, b.Resource)
	}
	for _, r := range h.Renewals {
		seen(r.Client, r.Resource)
	}
	for _, g := range h.Grants {
		seen(g.Client, g.Resource)
	}
	for _, a := range h.Applies {
		seen(a.Client, a.Resource)
	}
	for _, e := range h.Ends {
		seen(e.Client, e.Resource)
	}
	clients := byOrder(sortedUnique(clientNames), in.Nodes)
	resources := sortedUnique(resNames)

	faults := in.Faults.Sorted()
	var nodes []string
	for _, n := range in.Nodes {
		if !slices.Contains(clients, n) && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	for _, op := range faults {
		for _, n := range append([]string{op.Node, op.To}, op.Group...) {
			if n != "" && !strings.HasPrefix(n, "@") && !slices.Contains(clients, n) && !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}

	faultRow := &row{label: "faults", title: "partitions, isolations and blocks (until the next heal), and faults on nodes without a row of their own; each also shades the whole timeline"}
	netRow := &row{label: "network", title: "network-wide faults: loss, duplication, delay spikes, reordering, resets"}
	clientRows := make(map[string]*row, len(clients))
	grantRows := make(map[string]*row, len(resources))
	storeRows := make(map[string]*row, len(resources))
	nodeRows := make(map[string]*row, len(clients)+len(nodes))
	for _, c := range clients {
		r := &row{label: c, title: "client " + c + ": lease beliefs (coloured by token), renewals (ticks), faults on this node; the strip below: its store ops, call to return", strip: true}
		clientRows[c] = r
		nodeRows[c] = r
	}
	for _, res := range resources {
		grantRows[res] = &row{label: "grants · " + res, title: "the lock service's grants of " + res + " (start to end, labelled token and holder) and lease ends (released/expired)"}
		storeRows[res] = &row{label: "store · " + res, title: "the store's decisions on " + res + ": accepted writes (upper line) and rejected writes (lower line), by token; the strip below: reads, call to return",
			lanes: 2, fixedLn: true, topPad: 12, botPad: 12, strip: true}
	}
	for _, n := range nodes {
		nodeRows[n] = &row{label: n, title: "node " + n + ": faults"}
	}

	violOps := map[int]bool{}
	for _, v := range in.Verdict.Violations {
		for _, id := range v.Ops {
			violOps[id] = true
		}
	}
	if l := in.Verdict.Liveness; l != nil {
		for _, id := range l.Ops {
			violOps[id] = true
		}
	}

	// Clients: beliefs, renewals, store ops.
	for _, b := range thin(t, "beliefs", h.Beliefs) {
		to := openEnd(b.To, b.Open, t.end)
		state := "ended " + dur(b.To)
		if b.Open {
			state = "still believed at the end of the run"
		}
		if b.Reason != "" {
			state += " (" + b.Reason + ")"
		}
		clientRows[b.Client].bars = append(clientRows[b.Client].bars, bar{
			from: b.From, to: max(b.From, to), fill: t.tokenColor(b.Token), opacity: 0.9, stroke: "#555", dashed: b.Open,
			label: fmt.Sprintf("t%d %s", b.Token, b.Resource),
			title: fmt.Sprintf("%s believed it held %s with token %d from %s; %s", b.Client, b.Resource, b.Token, dur(b.From), state),
		})
	}
	for _, r := range thin(t, "renewals", h.Renewals) {
		clientRows[r.Client].points = append(clientRows[r.Client].points, point{
			at: r.At, shape: shTick, color: colRenewal,
			title: fmt.Sprintf("the service renewed token %d of %s for %s at %s (request %d, step %d)", r.Token, r.Resource, r.Client, dur(r.At), r.Request, r.Step),
		})
	}
	for _, o := range thin(t, "client store ops", h.Ops) {
		s := span{from: o.Call, to: max(o.Call, o.Return), highlight: violOps[o.ID]}
		switch o.Outcome {
		case checker.OutcomeAccepted:
			s.color = colAccepted
			if o.Kind == checker.OpRead {
				s.color = colRead
			}
		case checker.OutcomeRejected:
			s.color = colRejected
		default:
			s.color, s.dashed, s.to = colUnknown, true, t.stub(o.Call)
		}
		s.title = describeStoreOp(o)
		if s.highlight {
			s.title += " — involved in a violation"
		}
		clientRows[o.Client].spans = append(clientRows[o.Client].spans, s)
	}

	// Lock service: grants and lease ends.
	for _, g := range thin(t, "grants", h.Grants) {
		to := openEnd(g.End, g.Open, t.end)
		state := "ended " + dur(g.End)
		if g.Reason != "" {
			state += " (" + g.Reason + ")"
		}
		if g.Open {
			state = "still held at the end of the run"
		}
		b := bar{from: g.Start, to: max(g.Start, to), fill: t.tokenColor(g.Token), opacity: 0.9, stroke: "#444", dashed: g.Open,
			label: fmt.Sprintf("t%d %s", g.Token, g.Client),
			title: fmt.Sprintf("grant of %s to %s, token %d, at %s (step %d); %s", g.Resource, g.Client, g.Token, dur(g.Start), g.Step, state)}
		if g.Lost {
			b.fill, b.opacity, b.dashed = "none", 1, true
			b.title += "; lost: a crash took it back before it was durable"
		}
		grantRows[g.Resource].bars = append(grantRows[g.Resource].bars, b)
	}
	for _, e := range thin(t, "lease ends", h.Ends) {
		p := point{at: e.At, shape: shSquare, color: colReleased, hollow: e.Lost,
			title: fmt.Sprintf("lease end: token %d of %s held by %s %s at %s (step %d)", e.Token, e.Resource, e.Client, orDash(e.Reason), dur(e.At), e.Step)}
		if e.Reason == checker.EndExpired {
			p.shape, p.color = shDiamond, colExpired
		}
		if e.Lost {
			p.title += "; lost: a crash took it back before it was durable"
		}
		grantRows[e.Resource].points = append(grantRows[e.Resource].points, p)
	}

	// Store: applies, reads, restarts.
	var accepted, rejected []checker.StoreApply
	for _, a := range h.Applies {
		if a.Accepted {
			accepted = append(accepted, a)
		} else {
			rejected = append(rejected, a)
		}
	}
	for _, a := range append(thin(t, "accepted writes", accepted), thin(t, "rejected writes", rejected)...) {
		p := point{at: a.At, shape: shDot, color: colAccepted, hollow: a.Lost, label: fmt.Sprintf("t%d", a.Token)}
		what := "accepted"
		if !a.Accepted {
			p.shape, p.color, p.lane, p.below, what = shCross, colRejected, 1, true, "rejected"
		}
		p.title = fmt.Sprintf("store %s write of %s by %s, token %d, value %d, at %s (step %d)", what, a.Resource, a.Client, a.Token, a.Value, dur(a.At), a.Step)
		if a.Lost {
			p.title += "; lost: a crash took the decision back before it was durable"
		}
		storeRows[a.Resource].points = append(storeRows[a.Resource].points, p)
	}
	var reads []checker.StoreOp
	for _, o := range h.Ops {
		if o.Kind == checker.OpRead {
			reads = append(reads, o)
		}
	}
	for _, o := range thin(t, "reads", reads) {
		s := span{from: o.Call, to: max(o.Call, o.Return), color: colRead, title: describeStoreOp(o), highlight: violOps[o.ID]}
		if o.Outcome == checker.OutcomeUnknown {
			s.color, s.dashed, s.to = colUnknown, true, t.stub(o.Call)
		}
		storeRows[o.Resource].spans = append(storeRows[o.Resource].spans, s)
	}
	for _, sr := range h.StoreRestarts {
		for _, res := range resources {
			storeRows[res].points = append(storeRows[res].points, point{at: sr.At, shape: shRing, color: colStore, lane: 0,
				title: fmt.Sprintf("the store restarted at %s (step %d): it decides from what it had made durable", dur(sr.At), sr.Step)})
		}
	}

	// Faults.
	t.addFaults(faults, in.Picks, nodeRows, faultRow, netRow)

	// Violations.
	for _, v := range in.Verdict.Violations {
		t.vlines = append(t.vlines, violationLine(v))
	}
	if l := in.Verdict.Liveness; l != nil {
		t.vlines = append(t.vlines, violationLine(*l))
	}

	// Assemble the rows in order.
	if len(faultRow.bars)+len(faultRow.points) > 0 {
		t.rows = append(t.rows, faultRow)
	}
	if len(netRow.bars)+len(netRow.points) > 0 {
		t.rows = append(t.rows, netRow)
	}
	if len(clients) > 0 {
		t.rows = append(t.rows, &row{header: true, label: "clients (beliefs)"})
		for _, c := range clients {
			t.rows = append(t.rows, clientRows[c])
		}
	}
	if len(resources) > 0 {
		t.rows = append(t.rows, &row{header: true, label: "lock service (grants)"})
		for _, res := range resources {
			t.rows = append(t.rows, grantRows[res])
		}
		t.rows = append(t.rows, &row{header: true, label: "store (applies)"})
		for _, res := range resources {
			t.rows = append(t.rows, storeRows[res])
		}
	}
	// Nodes without a fault get no row: the header lists every node.
	nodes = slices.DeleteFunc(nodes, func(n string) bool {
		r := nodeRows[n]
		return len(r.bars)+len(r.over)+len(r.points) == 0
	})
	if len(nodes) > 0 {
		t.rows = append(t.rows, &row{header: true, label: "nodes (faults)"})
		for _, n := range nodes {
			t.rows = append(t.rows, nodeRows[n])
		}
	}
	t.layout()
	return t
}

func violationLine(v checker.Violation) vline {
	return vline{at: v.At, color: colViol, label: v.Property,
		title: fmt.Sprintf("%s violated at %s (step %d): %s", v.Property, dur(v.At), v.Step, v.Detail)}
}

// describeStoreOp renders a client's store op for hover titles.
func describeStoreOp(o checker.StoreOp) string {
	var what string
	switch {
	case o.Kind == checker.OpWrite:
		what = fmt.Sprintf("write of %s, token %d, value %d → %s", o.Resource, o.Token, o.Value, o.Outcome)
	case o.Outcome == checker.OutcomeAccepted:
		what = fmt.Sprintf("read of %s → value %d from token %d", o.Resource, o.ReadValue, o.ReadToken)
	default:
		what = fmt.Sprintf("read of %s → %s", o.Resource, o.Outcome)
	}
	ret := "never returned"
	if o.Outcome != checker.OutcomeUnknown {
		ret = "returned " + dur(o.Return)
	}
	return fmt.Sprintf("op %d by %s: %s; called %s, %s", o.ID, o.Client, what, dur(o.Call), ret)
}

// addFaults turns the schedule into overlays and markers on node rows, bars
// on the fault and network rows, and shaded bands.
func (t *timeline) addFaults(ops nemesis.Schedule, picks []Pick, nodeRows map[string]*row, faultRow, netRow *row) {
	ops, names := resolveSelectors(ops, picks)
	// earlier reports whether an op before i matches: a heal or reset with
	// nothing to heal (the final heal of a liveness phase resets every
	// node) is left out rather than drawn as if it did something.
	earlier := func(i int, match func(nemesis.Op) bool) bool {
		return slices.ContainsFunc(ops[:i], match)
	}
	kindIs := func(kinds ...nemesis.Kind) func(nemesis.Op) bool {
		return func(o nemesis.Op) bool { return slices.Contains(kinds, o.Kind) }
	}
	// next returns the time of the first op after i that match accepts, and
	// whether there is one.
	next := func(i int, match func(nemesis.Op) bool) (time.Duration, bool) {
		for _, op := range ops[i+1:] {
			if match(op) {
				return time.Duration(op.At), true
			}
		}
		return 0, false
	}
	until := func(from time.Duration, d nemesis.Duration, cut time.Duration, cutOK bool) (time.Duration, string) {
		to, how := t.end, "until the end of the run"
		if d > 0 {
			to, how = from+time.Duration(d), "until "+dur(from+time.Duration(d))
		}
		if cutOK && cut < to {
			to, how = cut, "until "+dur(cut)+" (ended by a later op)"
		}
		return max(from, to), how
	}
	// onNode draws an interval fault on the node's row, or as a band.
	// Faults on a node without a row (a selector such as @leader) become
	// bands, labelled with the whole op on the fault row.
	onNode := func(op nemesis.Op, b bar, color string) {
		if r := nodeRows[op.Node]; r != nil {
			r.over = append(r.over, b)
			return
		}
		t.bands = append(t.bands, band{from: b.from, to: b.to, color: color, title: b.title})
		faultRow.bars = append(faultRow.bars, bar{from: b.from, to: b.to, fill: color, opacity: 0.35, stroke: color, label: op.String(), title: b.title})
	}
	pointOnNode := func(node string, p point, color string) {
		if r := nodeRows[node]; r != nil {
			r.points = append(r.points, p)
			return
		}
		t.bands = append(t.bands, band{from: p.at, to: p.at, color: color, title: p.title})
		p.lane = 0
		if p.label != "" {
			p.label = node + " " + p.label
		}
		faultRow.points = append(faultRow.points, p)
	}
	// sameNode matches the later ops on op's node of the given kinds.
	sameNode := func(op nemesis.Op, kinds ...nemesis.Kind) func(nemesis.Op) bool {
		return func(o nemesis.Op) bool { return o.Node == op.Node && slices.Contains(kinds, o.Kind) }
	}
	for i, op := range ops {
		at := time.Duration(op.At)
		name := names[i]
		switch op.Kind {
		case nemesis.Pause:
			to := at + time.Duration(op.Duration)
			onNode(op, bar{from: at, to: to, fill: "hatch", opacity: 1, stroke: bandPause,
				label: "pause " + dur(time.Duration(op.Duration)),
				title: fmt.Sprintf("%s: %s paused from %s to %s", name, op.Node, dur(at), dur(to))}, bandPause)
		case nemesis.Crash:
			rt, ok := next(i, func(o nemesis.Op) bool {
				return o.Kind == nemesis.Restart && (o.Node == op.Node || o.Node == nemesis.Crashed)
			})
			to, how := t.end, "not restarted before the end of the run"
			if d := time.Duration(op.Duration); d > 0 && (!ok || at+d < rt) { // it restarts itself
				rt, ok = at+d, true
			}
			if ok {
				to, how = rt, "restarted at "+dur(rt)
			}
			onNode(op, bar{from: at, to: max(at, to), fill: bandCrash, opacity: 0.3, stroke: bandCrash,
				label: "crashed", title: fmt.Sprintf("%s at %s; %s", name, dur(at), how)}, bandCrash)
			if ok {
				pointOnNode(op.Node, point{at: rt, shape: shRing, color: colRestart,
					title: fmt.Sprintf("%s restarted at %s from its disk", op.Node, dur(rt))}, colRestart)
			}
		case nemesis.Restart:
			// Drawn with the crash it ends.
		case nemesis.Isolate, nemesis.Partition, nemesis.Block:
			ht, ok := next(i, func(o nemesis.Op) bool { return o.Kind == nemesis.Heal })
			to, how := t.end, "never healed"
			if ok {
				to, how = ht, "healed at "+dur(ht)
			}
			if d := time.Duration(op.Duration); d > 0 && at+d < to { // an isolation that ends by itself
				to, how = at+d, "its links reopened at "+dur(at+d)
			}
			title := fmt.Sprintf("%s at %s; %s", name, dur(at), how)
			t.bands = append(t.bands, band{from: at, to: max(at, to), color: bandPartition, title: title})
			b := bar{from: at, to: max(at, to), fill: bandPartition, opacity: 0.35, stroke: bandPartition, label: shortLabel(op), title: title}
			if r := nodeRows[op.Node]; op.Kind == nemesis.Isolate && r != nil {
				b.label = "isolated"
				r.over = append(r.over, b)
				break
			}
			faultRow.bars = append(faultRow.bars, b)
		case nemesis.Heal:
			if !earlier(i, kindIs(nemesis.Isolate, nemesis.Partition, nemesis.Block)) {
				break
			}
			faultRow.points = append(faultRow.points, point{at: at, shape: shTick, color: "#2e7d32",
				title: fmt.Sprintf("heal at %s: every link reopened", dur(at))})
		case nemesis.Loss, nemesis.Duplicate, nemesis.Delay, nemesis.Reorder:
			rt, ok := next(i, func(o nemesis.Op) bool { return o.Kind == nemesis.NetworkReset })
			to, how := until(at, op.Duration, rt, ok)
			netRow.bars = append(netRow.bars, bar{from: at, to: to, fill: bandNetwork, opacity: 0.35, stroke: bandNetwork,
				label: string(op.Kind), title: fmt.Sprintf("%s from %s %s", name, dur(at), how)})
		case nemesis.NetworkReset:
			if !earlier(i, kindIs(nemesis.Loss, nemesis.Duplicate, nemesis.Delay, nemesis.Reorder)) {
				break
			}
			netRow.points = append(netRow.points, point{at: at, shape: shTick, color: bandNetwork,
				title: fmt.Sprintf("network-reset at %s: every network fault ended", dur(at))})
		case nemesis.Drift:
			rt, ok := next(i, sameNode(op, nemesis.ClockReset, nemesis.Drift))
			to, how := until(at, op.Duration, rt, ok)
			onNode(op, bar{from: at, to: to, fill: bandClock, opacity: 0.25, stroke: bandClock,
				label: fmt.Sprintf("%+dppm", op.PPM), title: fmt.Sprintf("%s from %s %s", name, dur(at), how)}, bandClock)
		case nemesis.Jump:
			shape := shTriUp
			if op.By < 0 {
				shape = shTriDown
			}
			pointOnNode(op.Node, point{at: at, shape: shape, color: colClock, label: "jump " + dur(time.Duration(op.By)),
				title: fmt.Sprintf("%s at %s: wall clock stepped by %s", name, dur(at), dur(time.Duration(op.By)))}, bandClock)
			if op.Duration > 0 {
				back := at + time.Duration(op.Duration)
				rt, ok := next(i, func(o nemesis.Op) bool { return o.Kind == nemesis.ClockReset && o.Node == op.Node })
				if !ok || rt > back {
					bs := shTriDown
					if op.By < 0 {
						bs = shTriUp
					}
					pointOnNode(op.Node, point{at: back, shape: bs, color: colClock,
						title: fmt.Sprintf("end of %s at %s: wall clock stepped back by %s", name, dur(back), dur(-time.Duration(op.By)))}, bandClock)
				}
			}
		case nemesis.ClockReset:
			if !earlier(i, sameNode(op, nemesis.Drift, nemesis.Jump)) {
				break
			}
			pointOnNode(op.Node, point{at: at, shape: shRing, color: colClock,
				title: fmt.Sprintf("clock-reset %s at %s: drift 0, wall offset 0", op.Node, dur(at))}, bandClock)
		case nemesis.SlowDisk:
			if op.Delay <= 0 { // a fast disk again: what HealAll issues
				if !earlier(i, sameNode(op, nemesis.SlowDisk)) {
					break
				}
				pointOnNode(op.Node, point{at: at, shape: shRing, color: bandDisk,
					title: fmt.Sprintf("%s at %s: syncs are fast again", name, dur(at))}, bandDisk)
				break
			}
			rt, ok := next(i, sameNode(op, nemesis.SlowDisk))
			to, how := until(at, op.Duration, rt, ok)
			onNode(op, bar{from: at, to: to, fill: bandDisk, opacity: 0.25, stroke: bandDisk,
				label: "sync " + dur(time.Duration(op.Delay)), title: fmt.Sprintf("%s from %s %s", name, dur(at), how)}, bandDisk)
		default:
			t.bands = append(t.bands, band{from: at, to: at, color: "#999", title: fmt.Sprintf("%s at %s", name, dur(at))})
			faultRow.points = append(faultRow.points, point{at: at, shape: shTick, color: "#999", label: string(op.Kind),
				title: fmt.Sprintf("%s at %s", name, dur(at))})
		}
	}
}

// resolveSelectors returns ops with each node selector (@leader) replaced
// by the node it resolved to when the op fired, so that the op is drawn on
// that node's row, and each op's name for titles: op.String(), plus what
// its selector resolved to. picks are matched to ops by time and selector,
// in order; an op without a pick keeps its selector.
func resolveSelectors(ops nemesis.Schedule, picks []Pick) (nemesis.Schedule, []string) {
	out := slices.Clone(ops)
	names := make([]string, len(ops))
	used := make([]bool, len(picks))
	resolve := func(at time.Duration, name string) (string, bool) {
		for j, p := range picks {
			if !used[j] && p.At == at && p.Selector == name {
				used[j] = true
				return p.Node, true
			}
		}
		return "", false
	}
	for i, op := range ops {
		names[i] = op.String()
		at := time.Duration(op.At)
		var notes []string
		for _, f := range []*string{&out[i].Node, &out[i].To} {
			if !strings.HasPrefix(*f, "@") || *f == nemesis.Crashed {
				continue
			}
			node, ok := resolve(at, *f)
			switch {
			case !ok:
			case node == "":
				notes = append(notes, fmt.Sprintf("no node was %s then: the fault did nothing", *f))
			default:
				notes = append(notes, fmt.Sprintf("%s was %s when it fired", *f, node))
				*f = node
			}
		}
		if len(notes) > 0 {
			names[i] += " (" + strings.Join(notes, "; ") + ")"
		}
	}
	return out, names
}

// shortLabel is the label of a fault bar, short enough to fit: the kind and
// its nodes, without the parameters the tooltip gives.
func shortLabel(op nemesis.Op) string {
	s := string(op.Kind)
	if op.Node != "" {
		s += " " + op.Node
	}
	if op.To != "" {
		s += " → " + op.To
	}
	return s
}

// assignLanes puts each bar in the first lane free at its start, and
// returns the number of lanes used.
func assignLanes(bars []bar) int {
	order := make([]int, len(bars))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(bars[a].from, bars[b].from), cmp.Compare(bars[a].to, bars[b].to))
	})
	var ends []time.Duration
	for _, i := range order {
		b := &bars[i]
		lane := -1
		for l, e := range ends {
			if e <= b.from {
				lane = l
				break
			}
		}
		switch {
		case lane >= 0:
		case len(ends) < maxLanes:
			lane = len(ends)
			ends = append(ends, 0)
		default: // crowded: the lane that frees first
			lane = 0
			for l, e := range ends {
				if e < ends[lane] {
					lane = l
				}
			}
		}
		b.lane = lane
		ends[lane] = max(ends[lane], b.to)
	}
	return max(1, len(ends))
}

// layout assigns lanes and vertical positions.
func (t *timeline) layout() {
	y := axisH
	for _, r := range t.rows {
		if r.header {
			r.y, r.h = y, headerH
			y += r.h
			continue
		}
		n := assignLanes(r.bars)
		if !r.fixedLn {
			r.lanes = n
		}
		r.lanes = max(1, r.lanes)
		above := t.placeLabels(r)
		if r.topPad == 0 {
			r.topPad = 4
			if above || hasPointLabels(r.points) {
				r.topPad = labelLineH
			}
		}
		if r.botPad == 0 {
			r.botPad = 4
		}
		r.y = y
		r.h = r.topPad + float64(r.lanes)*laneH + r.botPad
		if r.strip {
			r.h += stripH
		}
		y += r.h
	}
	t.height = y + 6
}

// labelLineH is the height of the label line above a row's lanes.
const labelLineH = 12.0

// span1 is a horizontal extent in pixels.
type span1 struct{ x1, x2 float64 }

func (a span1) hits(bs []span1) bool {
	return slices.ContainsFunc(bs, func(b span1) bool { return a.x1 < b.x2 && b.x1 < a.x2 })
}

// barX returns where a bar is drawn, in pixels (at least 1.5 wide).
func (t *timeline) barX(b bar) (x1, x2 float64) {
	x1, x2 = t.x(b.from), t.x(b.to)
	return x1, max(x2, x1+1.5)
}

// textW estimates the width of a label in pixels.
func textW(s string) float64 { return float64(len([]rune(s))) * charW }

// placeLabels decides where each bar's label goes, so that no label hides
// under a fault overlay (a pause drawn over a belief) and short bars get
// one too: inside the bar where no overlay covers it; else just right of
// the bar, clear of the lane's other bars, of the overlays and of the labels
// placed before; else, for the first lane, on the label line above the
// row, clear of the labels there; else only in the bar's tooltip. It
// reports whether any label went on the label line.
func (t *timeline) placeLabels(r *row) bool {
	lineFree := !hasPointLabels(r.points) // else the label line is the points'
	var overs []span1
	for _, o := range r.over {
		x1, x2 := t.barX(o)
		overs = append(overs, span1{x1 - 2, x2 + 2})
	}
	slices.SortFunc(overs, func(a, b span1) int { return cmp.Compare(a.x1, b.x1) })
	inLane := map[int][]span1{} // bars, markers and placed labels, by lane
	for _, b := range r.bars {
		x1, x2 := t.barX(b)
		inLane[b.lane] = append(inLane[b.lane], span1{x1, x2})
	}
	for _, pt := range r.points { // markers: a lease end sits at its grant's end
		x := t.x(pt.at)
		inLane[pt.lane] = append(inLane[pt.lane], span1{x - 5, x + 5})
	}
	var line []span1 // labels on the label line
	order := make([]int, len(r.bars))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.bars[a].from, r.bars[b].from) })
	above := false
	for _, i := range order {
		b := &r.bars[i]
		if b.label == "" {
			continue
		}
		w := textW(b.label)
		x1, x2 := t.barX(*b)
		if lx, ok := freeSpot(x1+3, x2-3, w, overs); ok {
			b.lmode, b.lx = labelInside, lx
			continue
		}
		right := span1{x2 + 3, x2 + 3 + w}
		if right.x2 <= t.plotW+rightPad && !right.hits(overs) && !right.hits(inLane[b.lane]) {
			b.lmode, b.lx = labelRight, right.x1
			inLane[b.lane] = append(inLane[b.lane], right)
			continue
		}
		on := span1{x1, x1 + w}
		if lineFree && b.lane == 0 && on.x2 <= t.plotW+rightPad && !on.hits(line) {
			b.lmode, b.lx = labelAbove, on.x1
			line = append(line, span1{on.x1, on.x2 + 3})
			above = true
		}
	}
	return above
}

// freeSpot returns the leftmost x in [lo, hi-w] where a label of width w
// meets none of overs (sorted by x1).
func freeSpot(lo, hi, w float64, overs []span1) (float64, bool) {
	x := lo
	for _, o := range overs {
		if o.x2 <= x {
			continue
		}
		if o.x1 >= x+w {
			break
		}
		x = o.x2 + 1
	}
	return x, x+w <= hi
}

// labelBox is where a bar's label is drawn: its left edge, its baseline,
// and the box it covers (x1, y1, x2, y2).
func (t *timeline) labelBox(r *row, b bar) (x, baseline float64, box [4]float64) {
	w := textW(b.label)
	switch b.lmode {
	case labelAbove:
		baseline = r.y + r.topPad - 4
	default:
		baseline = t.laneY(r, b.lane) + 1.5 + (laneH-3)/2 + 4
	}
	return b.lx, baseline, [4]float64{b.lx, baseline - 8, b.lx + w, baseline + 2}
}

// overlayBox is the box an overlay covers (x1, y1, x2, y2).
func (t *timeline) overlayBox(r *row, b bar) [4]float64 {
	x1, x2 := t.barX(b)
	y := r.y + r.topPad - 2
	return [4]float64{x1, y, x2, y + float64(r.lanes)*laneH + 4}
}

func hasPointLabels(ps []point) bool {
	return slices.ContainsFunc(ps, func(p point) bool { return p.label != "" && !p.below })
}

// f1 formats a coordinate with one decimal, deterministically.
func f1(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "0"
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// tickStep picks the axis step: the smallest of a 1-2-5 series that leaves
// at least 70 px between ticks.
func tickStep(end time.Duration, w float64) time.Duration {
	steps := []time.Duration{}
	for base := time.Millisecond; base <= 1000*time.Hour; base *= 10 {
		steps = append(steps, base, 2*base, 5*base)
	}
	for _, s := range steps {
		if float64(s)/float64(end)*w >= 70 {
			return s
		}
	}
	return steps[len(steps)-1]
}

func secondsLabel(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// svg writes the label column and the plot into p.
func (t *timeline) svg(p *page) {
	w := t.plotW + rightPad
	p.f("<div class=\"tl\">\n<svg class=\"tl-labels\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\">\n",
		f1(labelW), f1(t.height), f1(labelW), f1(t.height))
	p.f("<text class=\"axis\" x=\"8\" y=\"%s\">true time →</text>\n", f1(axisH-10))
	for _, r := range t.rows {
		if r.header {
			p.f("<text class=\"sec\" x=\"6\" y=\"%s\">%s</text>\n", f1(r.y+14), esc(r.label))
			continue
		}
		p.f("<text class=\"lbl\" x=\"14\" y=\"%s\"><title>%s</title>%s</text>\n",
			f1(r.y+r.topPad+float64(r.lanes)*laneH/2+4), esc(r.title), esc(clip(r.label, labelW-20)))
	}
	p.s("</svg>\n<div class=\"tl-scroll\">\n")
	p.f("<svg class=\"tl-plot\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\">\n", f1(w), f1(t.height), f1(w), f1(t.height))
	p.s(`<defs><pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="#424242" stroke-width="2"/></pattern></defs>
`)
	// Row backgrounds and section rules.
	for i, r := range t.rows {
		switch {
		case r.header:
			p.f("<rect x=\"0\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#eeeeee\"/>\n", f1(r.y), f1(w), f1(r.h))
		case i%2 == 0:
			p.f("<rect x=\"0\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"#fafafa\"/>\n", f1(r.y), f1(w), f1(r.h))
		}
	}
	// Axis and grid.
	step := tickStep(t.end, t.plotW)
	p.s("<g class=\"grid\">\n")
	for i := time.Duration(0); i <= t.end/step; i++ {
		d := i * step
		x := t.x(d)
		p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#e0e0e0\"/>\n", f1(x), f1(axisH-4), f1(x), f1(t.height))
		anchor := "middle"
		if d == 0 {
			anchor = "start"
		}
		p.f("<text class=\"axis\" x=\"%s\" y=\"%s\" text-anchor=\"%s\">%s</text>\n", f1(x), f1(axisH-10), anchor, secondsLabel(d))
	}
	p.f("<line x1=\"0\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#999\"/>\n", f1(axisH-4), f1(t.plotW), f1(axisH-4))
	p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#555\" stroke-dasharray=\"2 3\"><title>end of the run: %s</title></line>\n",
		f1(t.plotW), f1(axisH-4), f1(t.plotW), f1(t.height), esc(dur(t.end)))
	p.s("</g>\n")
	// Bands behind everything.
	top := axisH - 4
	p.s("<g class=\"bands\">\n")
	for _, b := range t.bands {
		x1, x2 := t.x(b.from), t.x(b.to)
		if x2-x1 < 1 {
			p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-opacity=\"0.5\" stroke-width=\"2\"><title>%s</title></line>\n",
				f1(x1), f1(top), f1(x1), f1(t.height), b.color, esc(b.title))
			continue
		}
		p.f("<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"%s\" fill-opacity=\"0.09\"><title>%s</title></rect>\n",
			f1(x1), f1(top), f1(x2-x1), f1(t.height-top), b.color, esc(b.title))
	}
	p.s("</g>\n")
	for _, r := range t.rows {
		if !r.header {
			t.drawRow(p, r)
		}
	}
	// Violation lines on top, in time order; a label that would overlap the
	// previous one moves right.
	vls := slices.Clone(t.vlines)
	slices.SortStableFunc(vls, func(a, b vline) int { return cmp.Compare(a.at, b.at) })
	labelEnd := math.Inf(-1)
	for _, v := range vls {
		x := t.x(v.at)
		lx := max(x+2, labelEnd+4)
		labelEnd = lx + float64(len([]rune(v.label)))*charW
		p.f("<g><title>%s</title><line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>"+
			"<text x=\"%s\" y=\"%s\" fill=\"%s\" font-weight=\"700\">%s</text></g>\n",
			esc(v.title), f1(x), f1(axisH-8), f1(x), f1(t.height), v.color, f1(lx), f1(axisH-1), v.color, esc(v.label))
	}
	p.s("</svg>\n</div>\n</div>\n")
}

// clip shortens s to fit about w pixels.
func clip(s string, w float64) string {
	n := int(w / charW)
	r := []rune(s)
	if len(r) <= n || n < 2 {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (t *timeline) laneY(r *row, lane int) float64 {
	return r.y + r.topPad + float64(lane)*laneH
}

func (t *timeline) drawRow(p *page, r *row) {
	p.s("<g>\n")
	// Bars in lanes; their labels after the overlays, which placeLabels
	// kept them clear of.
	for _, b := range r.bars {
		t.drawBar(p, b, t.laneY(r, b.lane)+1.5, laneH-3, false)
	}
	// Overlays over the whole lane area.
	for _, b := range r.over {
		box := t.overlayBox(r, b)
		t.drawBar(p, b, box[1], box[3]-box[1], true)
	}
	for _, b := range r.bars {
		if b.lmode == labelNone || b.label == "" {
			continue
		}
		x, y, _ := t.labelBox(r, b)
		p.f("<text class=\"on\" x=\"%s\" y=\"%s\"><title>%s</title>%s</text>\n", f1(x), f1(y), esc(b.title), esc(b.label))
	}
	// Strip of call..return lines.
	if r.strip {
		sy := r.y + r.topPad + float64(r.lanes)*laneH + r.botPad + stripH/2 - 1
		for _, s := range r.spans {
			x1, x2 := t.x(s.from), t.x(s.to)
			if x2-x1 < 2 {
				x2 = x1 + 2
			}
			dash := ""
			if s.dashed {
				dash = " stroke-dasharray=\"4 3\""
			}
			p.f("<g><title>%s</title>", esc(s.title))
			if s.highlight {
				p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"7\" stroke-opacity=\"0.45\"/>",
					f1(x1), f1(sy), f1(x2), f1(sy), colViol)
			}
			p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"3\"%s/></g>\n",
				f1(x1), f1(sy), f1(x2), f1(sy), s.color, dash)
		}
	}
	// Points, with labels where they do not collide.
	lastAbove := map[int]float64{}
	lastBelow := map[int]float64{}
	order := make([]int, len(r.points))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.points[a].at, r.points[b].at) })
	for _, i := range order {
		pt := r.points[i]
		x := t.x(pt.at)
		cy := t.laneY(r, pt.lane) + laneH/2
		p.f("<g><title>%s</title>", esc(pt.title))
		t.drawShape(p, r, pt, x, cy)
		if pt.label != "" {
			lw := float64(len([]rune(pt.label))) * charW
			last := lastAbove
			ly := cy - 8
			if pt.below {
				last, ly = lastBelow, cy+15
			}
			if prev, ok := last[pt.lane]; !ok || x-lw/2 > prev+3 {
				p.f("<text class=\"on\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>", f1(x), f1(ly), esc(pt.label))
				last[pt.lane] = x + lw/2
			}
		}
		p.s("</g>\n")
	}
	p.s("</g>\n")
}

// drawBar draws b's rectangle and, with label, its label inside if it fits.
func (t *timeline) drawBar(p *page, b bar, y, h float64, label bool) {
	x1, x2 := t.barX(b)
	fill := b.fill
	if fill == "hatch" {
		fill = "url(#hatch)"
	}
	attrs := fmt.Sprintf(" fill=\"%s\"", fill)
	if b.opacity > 0 && b.opacity < 1 {
		attrs += fmt.Sprintf(" fill-opacity=\"%s\"", strconv.FormatFloat(b.opacity, 'f', 2, 64))
	}
	if b.stroke != "" {
		attrs += fmt.Sprintf(" stroke=\"%s\" stroke-width=\"1\"", b.stroke)
	}
	if b.dashed {
		attrs += " stroke-dasharray=\"4 2\""
	}
	p.f("<g><title>%s</title><rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" rx=\"2\"%s/>",
		esc(b.title), f1(x1), f1(y), f1(x2-x1), f1(h), attrs)
	if label && b.label != "" && textW(b.label)+6 <= x2-x1 {
		p.f("<text class=\"on\" x=\"%s\" y=\"%s\">%s</text>", f1(x1+3), f1(y+h/2+4), esc(b.label))
	}
	p.s("</g>\n")
}

func (t *timeline) drawShape(p *page, r *row, pt point, x, cy float64) {
	fill := pt.color
	if pt.hollow {
		fill = "#fff"
	}
	switch pt.shape {
	case shDot:
		p.f("<circle cx=\"%s\" cy=\"%s\" r=\"4\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>", f1(x), f1(cy), fill, pt.color)
	case shCross:
		op := ""
		if pt.hollow {
			op = " stroke-opacity=\"0.45\""
		}
		p.f("<path d=\"M%s %sL%s %sM%s %sL%s %s\" stroke=\"%s\" stroke-width=\"2.2\"%s/>",
			f1(x-4), f1(cy-4), f1(x+4), f1(cy+4), f1(x-4), f1(cy+4), f1(x+4), f1(cy-4), pt.color, op)
	case shTick:
		y1 := r.y + r.topPad
		y2 := y1 + float64(r.lanes)*laneH
		p.f("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>", f1(x), f1(y1), f1(x), f1(y2), pt.color)
	case shSquare:
		p.f("<rect x=\"%s\" y=\"%s\" width=\"5\" height=\"5\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>", f1(x-2.5), f1(cy-2.5), fill, pt.color)
	case shDiamond:
		p.f("<path d=\"M%s %sL%s %sL%s %sL%s %sZ\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1\"/>",
			f1(x), f1(cy-4), f1(x+4), f1(cy), f1(x), f1(cy+4), f1(x-4), f1(cy), fill, pt.color)
	case shRing:
		p.f("<circle cx=\"%s\" cy=\"%s\" r=\"5\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>", f1(x), f1(cy), pt.color)
	case shTriUp:
		p.f("<path d=\"M%s %sL%s %sL%s %sZ\" fill=\"%s\"/>", f1(x), f1(cy-5), f1(x+5), f1(cy+4), f1(x-5), f1(cy+4), fill)
	case shTriDown:
		p.f("<path d=\"M%s %sL%s %sL%s %sZ\" fill=\"%s\"/>", f1(x), f1(cy+5), f1(x+5), f1(cy-4), f1(x-5), f1(cy-4), fill)
	}
}

// legend is the key of the timeline, as small inline SVG swatches. It has
// an entry for every colour the timeline draws (TestLegendCoversColours).
const legend = `<div class="legend">
<span><svg width="34" height="12"><rect x="1" y="1" width="32" height="10" rx="2" fill="#8fb3d9" stroke="#555"/></svg> belief / grant (colour = token, dashed = still open at the end)</span>
<span><svg width="10" height="14"><line x1="5" y1="0" x2="5" y2="14" stroke="#333333" stroke-width="1.5"/></svg> renewal</span>
<span><svg width="12" height="12"><rect x="2" y="2" width="7" height="7" fill="#1565c0"/></svg> released</span>
<span><svg width="12" height="12"><path d="M6 1L11 6L6 11L1 6Z" fill="#ef6c00"/></svg> expired</span>
<span><svg width="12" height="12"><circle cx="6" cy="6" r="4" fill="#2e7d32"/></svg> accepted write</span>
<span><svg width="12" height="12"><path d="M2 2L10 10M2 10L10 2" stroke="#c62828" stroke-width="2.2"/></svg> rejected write</span>
<span><svg width="12" height="12"><circle cx="6" cy="6" r="4" fill="#fff" stroke="#2e7d32" stroke-width="1.5"/></svg> hollow: lost in a crash</span>
<span><svg width="14" height="14"><circle cx="7" cy="7" r="5" fill="none" stroke="#6a1b9a" stroke-width="2"/></svg> store restart</span>
<span><svg width="30" height="8"><line x1="1" y1="4" x2="29" y2="4" stroke="#2e7d32" stroke-width="3"/></svg><svg width="30" height="8"><line x1="1" y1="4" x2="29" y2="4" stroke="#c62828" stroke-width="3"/></svg><svg width="30" height="8"><line x1="1" y1="4" x2="29" y2="4" stroke="#1565c0" stroke-width="3"/></svg><svg width="30" height="8"><line x1="1" y1="4" x2="29" y2="4" stroke="#8a8a8a" stroke-width="3" stroke-dasharray="4 3"/></svg> store op call→return: accepted write, rejected write, read, no reply (red halo: involved in a violation)</span>
<span><svg width="14" height="14"><line x1="7" y1="0" x2="7" y2="14" stroke="#d50000" stroke-width="1.5" stroke-dasharray="5 3"/></svg> violation</span>
</div>
<div class="legend">
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="url(#hatch-legend)" stroke="#616161"/><defs><pattern id="hatch-legend" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#424242" stroke-width="2"/></pattern></defs></svg> pause</span>
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="#b71c1c" fill-opacity="0.3" stroke="#b71c1c"/></svg><svg width="14" height="14"><circle cx="7" cy="7" r="5" fill="none" stroke="#2e7d32" stroke-width="2"/></svg> crashed, restart</span>
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="#7e57c2" fill-opacity="0.35" stroke="#7e57c2"/></svg><svg width="10" height="14"><line x1="5" y1="0" x2="5" y2="14" stroke="#2e7d32" stroke-width="1.5"/></svg> partition / isolation / block until the heal</span>
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="#00897b" fill-opacity="0.35" stroke="#00897b"/></svg><svg width="10" height="14"><line x1="5" y1="0" x2="5" y2="14" stroke="#00897b" stroke-width="1.5"/></svg> network fault: loss, duplicate, delay, reorder; reset</span>
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="#0277bd" fill-opacity="0.25" stroke="#0277bd"/></svg><svg width="12" height="12"><path d="M6 1L11 10L1 10Z" fill="#0277bd"/></svg><svg width="14" height="14"><circle cx="7" cy="7" r="5" fill="none" stroke="#0277bd" stroke-width="2"/></svg> clock drift, wall-clock jump (▲ forward, ▼ back), clock reset</span>
<span><svg width="30" height="14"><rect x="1" y="1" width="28" height="12" fill="#795548" fill-opacity="0.25" stroke="#795548"/></svg><svg width="14" height="14"><circle cx="7" cy="7" r="5" fill="none" stroke="#795548" stroke-width="2"/></svg> slow disk, fast again</span>
<span class="muted">a fault aimed at @leader is drawn on the node that led when it fired</span>
</div>
`

func (p *page) timeline(t *timeline) {
	p.s("<section>\n<h2>Timeline (true time)</h2>\n")
	p.s("<p class=\"muted\">Hover over anything for its details. Rows: the clients' lease beliefs, the lock service's grants, the store's decisions, and faults on the nodes. Shaded bands are partitions and faults on nodes without a row of their own.</p>\n")
	p.s(legend)
	for _, n := range t.notes {
		p.f("<p class=\"notes\">Thinned — %s</p>\n", esc(n))
	}
	t.svg(p)
	p.s("</section>\n")
}
