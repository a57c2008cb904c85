package report

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// linView is one porcupine view, ready to embed.
type linView struct {
	prop    string // "S8" or "S7"
	what    string // "store" or "lock"
	ops     int    // operations porcupine checked
	result  porcupine.CheckResult
	clients []string // porcupine's client ids, in order
	doc     string   // porcupine's HTML, sanitized; "" if there is none
	note    string   // why there is no view, or what was changed in it
	failed  string   // a panic while rendering, if any
	skipped bool     // too many ops to draw (MaxViewOps): porcupine not run
}

// linInfo is the signature of checker.LinearizabilityInfo and
// checker.LockLinearizabilityInfo.
type linInfo func(checker.History, time.Duration) (porcupine.Model, []porcupine.Operation, porcupine.CheckResult, porcupine.LinearizationInfo, bool)

// linearizabilityViews runs both checks (concurrently: each is bounded by
// the budget, so the page waits for one budget, not two) and renders them.
func linearizabilityViews(in Input) (s8, s7 linView) {
	opt := in.CheckTimeout
	ann := faultAnnotations(in)
	var storeClients, lockClients []string
	for _, o := range in.History.Ops {
		storeClients = append(storeClients, o.Client)
	}
	for _, o := range in.History.LockOps {
		lockClients = append(lockClients, o.Client)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		s8 = runView("S8", "store", len(in.History.Ops), checker.LinearizabilityInfo, in.History, opt, ann)
		s8.clients = sortedUnique(storeClients)
	})
	wg.Go(func() {
		s7 = runView("S7", "lock", len(in.History.LockOps), checker.LockLinearizabilityInfo, in.History, opt, ann)
		s7.clients = sortedUnique(lockClients)
	})
	wg.Wait()
	return s8, s7
}

// budget is the porcupine budget timeout stands for, for messages.
func budget(timeout time.Duration) string {
	switch {
	case timeout == 0:
		return dur(checker.DefaultViewTimeout)
	case timeout < 0:
		return "no limit"
	}
	return dur(timeout)
}

// MaxViewOps is the most operations of one kind a page draws porcupine's
// view for. A view is for a reader; a history past this size (a run cut at
// a limit, with hundreds of thousands of calls never answered) would cost
// porcupine its whole budget and a page of megabytes nobody reads, and
// whether porcupine finished would depend on the machine's load. The
// verdict never depends on views.
const MaxViewOps = 5000

func runView(prop, what string, recorded int, info linInfo, h checker.History, opt time.Duration, ann []porcupine.Annotation) (v linView) {
	v.prop, v.what = prop, what
	if recorded > MaxViewOps {
		v.ops, v.skipped = recorded, true
		v.note = fmt.Sprintf("The history has %d %s operations, more than the %d a view is drawn for (report.MaxViewOps); the verdict above is the checker's own, and history.json has every operation.", recorded, what, MaxViewOps)
		return v
	}
	defer func() {
		if r := recover(); r != nil {
			v.doc, v.failed = "", fmt.Sprint(r)
		}
	}()
	model, ops, res, li, exact := info(h, opt)
	v.ops, v.result = len(ops), res
	switch {
	case len(ops) == 0:
		v.note = fmt.Sprintf("No %s operations to check.", what)
		return v
	case res == porcupine.Unknown:
		v.note = fmt.Sprintf("Porcupine timed out (budget %s) checking the %d %s operations; no view to show.", budget(opt), len(ops), what)
		return v
	}
	canonicalPartials(li)
	li.AddAnnotations(ann)
	var buf bytes.Buffer
	if err := porcupine.Visualize(model, li, &buf); err != nil {
		v.failed = err.Error()
		return v
	}
	v.doc, v.note = sanitize(buf.String())
	if !exact {
		v.note = strings.TrimSpace(v.note + " Porcupine sees each client's program order only approximately here (two clients each returned and called again at one instant): its view may be stricter than the verdict, which the checker's own search decides.")
	}
	return v
}

// canonicalPartials orders porcupine's partial linearizations of each
// partition longest first, then lexically. Porcupine collects them from a
// map, so their order, which Visualize's unstable sort by length keeps for
// equal lengths, differs from run to run; sorted here, it does not.
// PartialLinearizations returns porcupine's own slices, so sorting them
// sorts li's.
func canonicalPartials(li porcupine.LinearizationInfo) {
	for _, part := range li.PartialLinearizations() {
		slices.SortFunc(part, func(a, b []int) int {
			return cmp.Or(cmp.Compare(len(b), len(a)), slices.Compare(a, b))
		})
	}
}

// faultAnnotations marks pauses, crashes and partitions in porcupine's
// views, one row per target, so that the operations concurrent with a
// fault can be seen there too.
func faultAnnotations(in Input) []porcupine.Annotation {
	ops := in.Faults.Sorted()
	end := timeEnd(in)
	var out []porcupine.Annotation
	add := func(tag string, from, to time.Duration, desc, details string) {
		out = append(out, porcupine.Annotation{Tag: "fault: " + tag, Start: int64(from), End: int64(max(from, to)),
			Description: desc, Details: details, BackgroundColor: "#e8e0f5"})
	}
	for i, op := range ops {
		at := time.Duration(op.At)
		next := func(match func(nemesis.Op) bool) (time.Duration, bool) {
			for _, o := range ops[i+1:] {
				if match(o) {
					return time.Duration(o.At), true
				}
			}
			return end, false
		}
		switch op.Kind {
		case nemesis.Pause:
			to := at + time.Duration(op.Duration)
			add(op.Node, at, to, "pause", fmt.Sprintf("%s, %s to %s", op.String(), dur(at), dur(to)))
		case nemesis.Crash:
			to, _ := next(func(o nemesis.Op) bool {
				return o.Kind == nemesis.Restart && (o.Node == op.Node || o.Node == nemesis.Crashed)
			})
			add(op.Node, at, to, "crashed", fmt.Sprintf("%s at %s, down until %s", op.String(), dur(at), dur(to)))
		case nemesis.Isolate, nemesis.Partition, nemesis.Block:
			to, _ := next(func(o nemesis.Op) bool { return o.Kind == nemesis.Heal })
			add("network", at, to, op.String(), fmt.Sprintf("%s at %s, until %s", op.String(), dur(at), dur(to)))
		}
	}
	return out
}

// The only URL-like strings porcupine v1.3.1's view holds: the SVG
// namespace, as an attribute of its inline legend and as a constant of its
// script. Neither is fetched, but the page must hold no URL at all, so the
// attribute is dropped (an HTML parser puts <svg> in the SVG namespace
// without it) and the script reads the namespace from a parsed <svg>.
const (
	svgNSAttr      = ` xmlns="http://www.w3.org/2000/svg"`
	svgNSConst     = `const SVG_NS = 'http://www.w3.org/2000/svg'`
	svgNSConstRepl = `const SVG_NS = (() => { const d = document.createElement('div'); d.innerHTML = '<svg></svg>'; return d.firstChild.namespaceURI })()`
)

// urlLike matches anything that could name a network resource.
var urlLike = regexp.MustCompile(`(?i)(https?:)?//(cdn|www|[a-z0-9-]+\.[a-z0-9.-]+)`)

// sanitize removes every URL-like string from porcupine's view and says
// what it did.
func sanitize(doc string) (string, string) {
	doc = strings.ReplaceAll(doc, svgNSAttr, "")
	doc = strings.ReplaceAll(doc, svgNSConst, svgNSConstRepl)
	n := len(urlLike.FindAllStringIndex(doc, -1))
	if n == 0 {
		return doc, ""
	}
	doc = urlLike.ReplaceAllString(doc, "about:blank#removed")
	return doc, fmt.Sprintf("Porcupine's view referenced %d URL(s) besides the SVG namespace; they were replaced by about:blank, so parts of the view may not work.", n)
}

func (p *page) linearizability(in Input) {
	s8, s7 := linearizabilityViews(in)
	p.s("<section>\n<h2>Linearizability (porcupine)</h2>\n")
	p.s("<p class=\"muted\">Each view re-runs the checker's model over the whole history in one porcupine call (the verdict above checks each resource apart). " +
		"Porcupine labels clients by number; the mapping is given under each view. Rows tagged <i>fault:</i> mark pauses, crashes and partitions. " +
		"Porcupine's view names the SVG namespace by its URI (not a resource, never fetched); this page derives it in the browser instead, so that the file holds no URL.</p>\n")
	p.linView(s8, "S8 — store ops against a fenced register", "lin-s8")
	p.linView(s7, "S7 — lock ops against a fenced mutex whose lease may expire at any moment", "lin-s7")
	p.s("</section>\n")
}

func (p *page) linView(v linView, title, id string) {
	p.f("<h3>%s</h3>\n<div class=\"lin-head\">", esc(title))
	switch {
	case v.failed != "":
		p.f("<span class=\"unk\">could not render</span> <span>%s</span>", esc(v.failed))
	case v.ops == 0:
	case v.skipped:
		p.f("<span class=\"unk\">not drawn</span> <span>%d ops</span>", v.ops)
	case v.result == porcupine.Ok:
		p.f("<span class=\"ok\">linearizable</span> <span>%d ops</span>", v.ops)
	case v.result == porcupine.Illegal:
		p.f("<span class=\"bad\">not linearizable</span> <span>%d ops</span>", v.ops)
	default:
		p.f("<span class=\"unk\">timed out</span> <span>%d ops</span>", v.ops)
	}
	if v.doc != "" {
		p.f(" <button type=\"button\" class=\"lin-open\" data-frame=\"%s\">open in a new tab</button>", id)
	}
	p.s("</div>\n")
	if v.note != "" {
		p.f("<p class=\"notes\">%s</p>\n", esc(v.note))
	}
	if v.doc != "" {
		if len(v.clients) > 0 {
			parts := make([]string, len(v.clients))
			for i, c := range v.clients {
				parts[i] = fmt.Sprintf("%d = %s", i, c)
			}
			p.f("<p class=\"muted\">porcupine clients: %s</p>\n", esc(strings.Join(parts, ", ")))
		}
		p.f("<iframe class=\"lin\" id=\"%s\" title=\"%s\" srcdoc=\"%s\"></iframe>\n", id, esc(title), esc(v.doc))
	}
}
