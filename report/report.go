// Package report writes the HTML report of one fencesim run: a single
// self-contained index.html (inline CSS, inline JS, inline SVG, no network
// resource of any kind) beside the run's history as JSON and, optionally, its
// readable trace.
//
// The page shows, from the run's records only (never one element per trace
// event):
//
//   - a header: scenario, seed, verdict, expectation and whether it was met,
//     trace hash, the command that reproduces the run, the drawn swarm
//     options and every violation;
//   - a timeline against true time: the clients' lease beliefs and
//     renewals, the lock service's grants and lease ends, the store's
//     accepted and rejected writes and reads, and the faults (pauses,
//     crashes, partitions, clock and disk faults, network faults);
//   - porcupine's linearizability views of S8 (store) and S7 (locks),
//     embedded so that they work offline from the one file;
//   - the metrics and relative links to history.json and trace.txt.
//
// Output is a pure function of the Input: identical input gives
// byte-identical output (no wall-clock time, no map order, no random ids).
// The one exception is inherited from porcupine: a linearizability view
// that runs out of its wall-clock budget is reported as timed out instead
// of drawn, and whether it does depends on the machine. The verdict shown
// does not: it is the checker's, whose budgets count model steps.
package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// Input is everything the report shows about one run. It takes plain values
// (not scenarios.Result) so that report depends only on checker, nemesis and
// porcupine, and any caller can fill it.
type Input struct {
	Scenario    string
	Seed        uint64
	Description string
	// Expect is the scenario's expectation as scenarios.Expectation.String
	// spells it: "pass", "violation S3", "liveness"; "" if there is none.
	Expect    string
	TraceHash string
	Verdict   checker.Verdict
	History   checker.History
	// Faults is every fault operation installed, time-sorted (Write sorts a
	// copy stably anyway).
	Faults nemesis.Schedule
	// Options are the drawn swarm options, printed; "" when there are none.
	Options string
	// Nodes are the node names in id order.
	Nodes []string
	// SimEnd is the true time the run ended: the timeline spans 0..SimEnd.
	// If it is not positive the latest time in the history is used.
	SimEnd time.Duration
	// Repro is the command line that reproduces the run.
	Repro string
	// Picks are what the faults' node selectors (@leader) resolved to when
	// they fired, in firing order: a fault aimed at the leader is drawn on
	// the row of the node that led. Without them such a fault is drawn on
	// the fault row.
	Picks []Pick
	// CheckTimeout is porcupine's wall-clock budget for each of the two
	// linearizability views; 0 means checker.DefaultViewTimeout, negative
	// means no limit. It bounds the views only: the verdict is Check's,
	// whose budgets count model steps.
	CheckTimeout time.Duration
}

// Pick is what a fault's node selector resolved to when the fault fired.
type Pick struct {
	At       time.Duration
	Selector string // "@leader"
	Node     string // "" if no node was chosen (the fault did nothing)
}

// File names Write uses inside its directory; the page links them
// relatively.
const (
	IndexFile   = "index.html"
	HistoryFile = "history.json"
	TraceFile   = "trace.txt"
)

// Write writes the report into dir, creating dir if needed: index.html (one
// self-contained file), history.json (in.History, indented) and, if trace is
// not empty, trace.txt (the readable trace, verbatim). It returns the path of
// index.html. When trace is empty, a trace.txt already in dir (left by an
// earlier run) is removed, so that the page never sits beside a trace that
// is not its run's. Identical input gives byte-identical files.
func Write(dir string, in Input, trace string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	hist, err := json.MarshalIndent(in.History, "", "  ")
	if err != nil {
		return "", fmt.Errorf("report: encoding the history: %w", err)
	}
	hist = append(hist, '\n')
	if err := os.WriteFile(filepath.Join(dir, HistoryFile), hist, 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	tracePath := filepath.Join(dir, TraceFile)
	if trace != "" {
		if err := os.WriteFile(tracePath, []byte(trace), 0o644); err != nil {
			return "", fmt.Errorf("report: %w", err)
		}
	} else if err := os.Remove(tracePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("report: removing a stale trace: %w", err)
	}
	var buf bytes.Buffer
	if err := render(&buf, in, trace != ""); err != nil {
		return "", err
	}
	index := filepath.Join(dir, IndexFile)
	if err := os.WriteFile(index, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return index, nil
}

// HTML writes the page Write writes as index.html when it is given no trace
// (the page then says no trace was recorded instead of linking trace.txt).
func HTML(w io.Writer, in Input) error {
	var buf bytes.Buffer
	if err := render(&buf, in, false); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// esc escapes text for HTML element content and quoted attribute values
// (SVG included).
func esc(s string) string { return html.EscapeString(s) }

// verdictColors are the badge colours of the verdict kinds.
var verdictColors = map[checker.VerdictKind]string{
	checker.VerdictPass:      "#2e7d32",
	checker.VerdictViolation: "#c62828",
	checker.VerdictLiveness:  "#ef6c00",
	checker.VerdictUnknown:   "#757575",
}

func verdictColor(k checker.VerdictKind) string {
	if c, ok := verdictColors[k]; ok {
		return c
	}
	return "#757575"
}

// expectation parses Expect the way scenarios spells it ("verdict" or
// "verdict property") and judges v against it as scenarios.Expectation.Met
// does. ok is false when there is no expectation.
func expectation(expect string, v checker.Verdict) (met, ok bool) {
	f := strings.Fields(expect)
	if len(f) == 0 {
		return false, false
	}
	if f[0] != v.Kind.String() {
		return false, true
	}
	if len(f) == 1 {
		return true, true
	}
	return slices.ContainsFunc(v.Violations, func(x checker.Violation) bool { return x.Property == f[1] }), true
}

// headline is the property the verdict badge names: the expected one when
// the run violated it (as scenarios.Expectation.Headline), else the
// verdict's first.
func headline(expect string, v checker.Verdict) string {
	if f := strings.Fields(expect); len(f) == 2 && f[0] == v.Kind.String() {
		if slices.ContainsFunc(v.Violations, func(x checker.Violation) bool { return x.Property == f[1] }) {
			return f[1]
		}
	}
	return v.Property()
}

// render writes the whole page into buf.
func render(buf *bytes.Buffer, in Input, hasTrace bool) error {
	p := &page{b: buf}
	title := fmt.Sprintf("fencesim · %s · seed %d · %s", in.Scenario, in.Seed, in.Verdict.Kind)
	p.f(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s</title>
<style>%s</style>
</head>
<body>
`, esc(title), pageCSS)
	p.header(in)
	p.metrics(in, hasTrace)
	tl := buildTimeline(in)
	p.timeline(tl)
	p.linearizability(in)
	p.faultTable(in)
	p.f("<script>%s</script>\n</body>\n</html>\n", pageJS)
	return nil
}

// page accumulates the HTML.
type page struct{ b *bytes.Buffer }

func (p *page) f(format string, args ...any) { fmt.Fprintf(p.b, format, args...) }
func (p *page) s(s string)                   { p.b.WriteString(s) }

// dur renders a duration the way the rest of fencesim does ("1.5s").
func dur(d time.Duration) string { return d.String() }

func (p *page) header(in Input) {
	v := in.Verdict
	p.f("<header>\n<h1>%s <span class=\"seed\">seed %d</span></h1>\n", esc(orDash(in.Scenario)), in.Seed)
	if in.Description != "" {
		p.f("<p class=\"desc\">%s</p>\n", esc(in.Description))
	}
	p.s("<table class=\"kv\">\n")
	verdict := v.Kind.String()
	if prop := headline(in.Expect, v); prop != "" {
		verdict += " " + prop
	}
	p.f("<tr><th>verdict</th><td><span class=\"badge\" style=\"background:%s\">%s</span></td></tr>\n",
		verdictColor(v.Kind), esc(verdict))
	met, ok := expectation(in.Expect, v)
	switch {
	case !ok:
		p.s("<tr><th>expected</th><td>— (no expectation)</td></tr>\n")
	case met:
		p.f("<tr><th>expected</th><td>%s <span class=\"met\">met</span></td></tr>\n", esc(in.Expect))
	default:
		p.f("<tr><th>expected</th><td>%s <span class=\"notmet\">NOT met</span></td></tr>\n", esc(in.Expect))
	}
	p.f("<tr><th>trace hash</th><td><code>%s</code></td></tr>\n", esc(orDash(in.TraceHash)))
	p.f("<tr><th>simulated</th><td>%s</td></tr>\n", esc(dur(in.SimEnd)))
	if len(in.Nodes) > 0 {
		p.f("<tr><th>nodes</th><td>%s</td></tr>\n", esc(strings.Join(in.Nodes, ", ")))
	}
	if v.Unknown != "" {
		p.f("<tr><th>inconclusive</th><td>%s</td></tr>\n", esc(v.Unknown))
	}
	p.s("</table>\n")
	p.s("<h3>Reproduce</h3>\n")
	p.f("<div class=\"repro\"><pre><code id=\"repro\">%s</code></pre><button type=\"button\" id=\"copy-repro\">copy</button></div>\n",
		esc(orDash(in.Repro)))
	p.s("<h3>Drawn options</h3>\n")
	if in.Options != "" {
		p.f("<pre class=\"options\">%s</pre>\n", esc(in.Options))
	} else {
		p.s("<p class=\"muted\">none (no swarm)</p>\n")
	}
	p.violations(v)
	p.s("</header>\n")
}

func (p *page) violations(v checker.Verdict) {
	vs := slices.Clone(v.Violations)
	if v.Liveness != nil {
		vs = append(vs, *v.Liveness)
	}
	p.f("<h3>Violations (%d)</h3>\n", len(vs))
	if len(vs) == 0 {
		p.s("<p class=\"muted\">none</p>\n")
		return
	}
	p.s("<table class=\"viol\">\n<tr><th>property</th><th>true time</th><th>step</th><th>detail</th><th>store ops</th><th>lock ops</th></tr>\n")
	for _, x := range vs {
		p.f("<tr><td class=\"prop\">%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			esc(x.Property), esc(dur(x.At)), x.Step, esc(x.Detail), esc(intList(x.Ops)), esc(intList(x.LockOps)))
	}
	p.s("</table>\n")
}

func (p *page) metrics(in Input, hasTrace bool) {
	m := in.Verdict.Metrics.BeliefOverlap
	h := in.History
	p.s("<section>\n<h2>Metrics and files</h2>\n<table class=\"kv\">\n")
	p.f("<tr><th>belief overlap windows</th><td>%d</td></tr>\n", m.Windows)
	p.f("<tr><th>belief overlap total</th><td>%s</td></tr>\n", esc(dur(m.Total)))
	p.f("<tr><th>belief overlap longest</th><td>%s</td></tr>\n", esc(dur(m.Longest)))
	p.f("<tr><th>records</th><td>%s</td></tr>\n", esc(strings.Join([]string{
		count(len(h.Ops), "store op"), count(len(h.LockOps), "lock op"), count(len(h.Grants), "grant"),
		count(len(h.Ends), "lease end"), count(len(h.Renewals), "renewal"), count(len(h.Beliefs), "belief"),
		count(len(h.Applies), "store apply"), count(len(h.StoreRestarts), "store restart"), count(len(in.Faults), "fault op"),
	}, ", ")))
	p.f("<tr><th>history</th><td><a href=\"%s\">%s</a> (the checker's input, indented JSON)</td></tr>\n", HistoryFile, HistoryFile)
	if hasTrace {
		p.f("<tr><th>trace</th><td><a href=\"%s\">%s</a> (the readable trace)</td></tr>\n", TraceFile, TraceFile)
	} else {
		p.s("<tr><th>trace</th><td class=\"muted\">no trace was recorded</td></tr>\n")
	}
	p.s("</table>\n</section>\n")
}

func (p *page) faultTable(in Input) {
	ops := in.Faults.Sorted()
	p.f("<section>\n<h2>Fault schedule (%s)</h2>\n", count(len(ops), "op"))
	if len(ops) == 0 {
		p.s("<p class=\"muted\">no faults</p>\n</section>\n")
		return
	}
	p.s("<details><summary>show every fault op</summary>\n<table class=\"faults\">\n<tr><th>true time</th><th>op</th></tr>\n")
	for _, op := range ops {
		p.f("<tr><td>%s</td><td><code>%s</code></td></tr>\n", esc(dur(time.Duration(op.At))), esc(op.String()))
	}
	p.s("</table>\n</details>\n</section>\n")
}

// count renders n with its noun in the right number ("1 op", "2 ops",
// "3 store applies"), as scenarios.Count does.
func count(n int, noun string) string {
	switch k := len(noun); {
	case n == 1:
		return "1 " + noun
	case k >= 2 && noun[k-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[k-2])):
		return strconv.Itoa(n) + " " + noun[:k-1] + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func intList(xs []int) string {
	if len(xs) == 0 {
		return ""
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}

// sortedUnique returns the distinct strings of xs in ascending order.
func sortedUnique(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// byOrder sorts names by their index in order (names not in it last, by
// name).
func byOrder(names, order []string) []string {
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		ia, ib := slices.Index(order, a), slices.Index(order, b)
		if ia < 0 {
			ia = len(order)
		}
		if ib < 0 {
			ib = len(order)
		}
		return cmp.Or(cmp.Compare(ia, ib), strings.Compare(a, b))
	})
	return out
}

const pageCSS = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 1.5em 3em;color:#1b1b1b;background:#fff}
h1{font-size:1.6em;margin:.6em 0 .2em}
h1 .seed{font-weight:normal;color:#555;font-size:.7em}
h2{font-size:1.25em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em;margin:1em 0 .3em}
.desc{color:#333;max-width:60em}
.muted{color:#777}
table{border-collapse:collapse}
table.kv th{text-align:left;padding:2px 1em 2px 0;color:#555;font-weight:600;vertical-align:top}
table.kv td{padding:2px 0}
table.viol,table.faults{margin:.3em 0}
table.viol th,table.viol td,table.faults th,table.faults td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
table.viol td.prop{font-weight:700;color:#c62828}
.badge{color:#fff;padding:2px 10px;border-radius:10px;font-weight:700}
.met{color:#2e7d32;font-weight:700}
.notmet{color:#c62828;font-weight:700}
.repro{display:flex;align-items:flex-start;gap:.5em}
.repro pre{margin:0;background:#f5f5f5;border:1px solid #ddd;padding:6px 8px;border-radius:4px;overflow-x:auto;max-width:100%}
.repro code{user-select:all}
pre.options{background:#f8f8f8;border:1px solid #e2e2e2;padding:6px 8px;max-height:22em;overflow:auto}
button{font:inherit;cursor:pointer}
.legend{display:flex;flex-wrap:wrap;gap:.3em 1.2em;margin:.4em 0 .6em;font-size:12px;align-items:center}
.legend svg{vertical-align:middle}
.tl{display:flex;border:1px solid #ddd;background:#fff}
.tl-labels{flex:none;border-right:1px solid #ddd;background:#fafafa}
.tl-scroll{overflow-x:auto;flex:1}
.tl svg text{font:11px system-ui,sans-serif}
.tl svg .sec{font-weight:700;fill:#333}
.tl svg .lbl{fill:#222}
.tl svg .axis{fill:#555}
.tl svg .on{fill:#111}
.notes{font-size:12px;color:#8a5a00}
iframe.lin{width:100%;height:520px;border:1px solid #ccc;resize:vertical;background:#fff}
.lin-head{display:flex;gap:1em;align-items:baseline;flex-wrap:wrap}
.ok{color:#2e7d32;font-weight:700}
.bad{color:#c62828;font-weight:700}
.unk{color:#757575;font-weight:700}
`

const pageJS = `
(function(){
  var b=document.getElementById('copy-repro');
  if(b){b.addEventListener('click',function(){
    var c=document.getElementById('repro');
    var r=document.createRange();r.selectNodeContents(c);
    var s=window.getSelection();s.removeAllRanges();s.addRange(r);
    var t=c.textContent;
    if(navigator.clipboard&&navigator.clipboard.writeText){
      navigator.clipboard.writeText(t).then(function(){b.textContent='copied';},function(){document.execCommand('copy');b.textContent='copied';});
    }else{document.execCommand('copy');b.textContent='copied';}
  });}
  var bs=document.querySelectorAll('button.lin-open');
  for(var i=0;i<bs.length;i++){bs[i].addEventListener('click',function(e){
    var f=document.getElementById(e.target.getAttribute('data-frame'));
    if(!f)return;
    var u=URL.createObjectURL(new Blob([f.srcdoc],{type:'text/html'}));
    window.open(u,'_blank');
  });}
})();
`
