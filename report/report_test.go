package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

const ms = time.Millisecond

// kleppmann is the story of Kleppmann's "How to do distributed locking":
// alice gets token 33, pauses past her lease, bob gets token 34 and writes,
// alice wakes and writes with 33, and the fenced store rejects her. A
// partition of the lock service and a crash and restart of the store follow.
func kleppmann(t *testing.T) Input { t.Helper(); return kleppmannAt(t, 0) }

// kleppmannAt is the story with alice's token at base+33 and bob's at
// base+34.
func kleppmannAt(t *testing.T, base uint64) Input {
	t.Helper()
	alice, bob := base+33, base+34
	h := checker.History{
		LockOps: []checker.LockOp{
			{ID: 1, Client: "alice", Resource: "file", Kind: checker.LockAcquire, Request: 1, Token: alice, Call: 100 * ms, Return: 110 * ms, Outcome: checker.LockGranted},
			{ID: 2, Client: "alice", Resource: "file", Kind: checker.LockRenew, Request: 2, Token: alice, Call: 890 * ms, Return: 910 * ms, Outcome: checker.LockRenewed},
			{ID: 3, Client: "bob", Resource: "file", Kind: checker.LockAcquire, Request: 1, Token: bob, Call: 2950 * ms, Return: 3010 * ms, Outcome: checker.LockGranted},
			{ID: 4, Client: "bob", Resource: "file", Kind: checker.LockRelease, Request: 2, Token: bob, Call: 7490 * ms, Return: 7510 * ms, Outcome: checker.LockReleased},
		},
		Grants: []checker.Grant{
			{Resource: "file", Client: "alice", Token: alice, Start: 105 * ms, End: 2900 * ms, Step: 10, Reason: checker.EndExpired},
			{Resource: "file", Client: "bob", Token: bob, Start: 3000 * ms, End: 7500 * ms, Step: 400, Reason: checker.EndReleased},
		},
		Renewals: []checker.Renewal{
			{Resource: "file", Client: "alice", Token: alice, Request: 2, At: 900 * ms, Step: 90},
		},
		Ends: []checker.GrantEnd{
			{Resource: "file", Client: "alice", Token: alice, Reason: checker.EndExpired, At: 2900 * ms, Step: 300},
			{Resource: "file", Client: "bob", Token: bob, Reason: checker.EndReleased, At: 7500 * ms, Step: 900},
		},
		Beliefs: []checker.Belief{
			{Client: "alice", Resource: "file", Token: alice, From: 110 * ms, To: 4100 * ms, Reason: "fenced-out"},
			{Client: "bob", Resource: "file", Token: bob, From: 3010 * ms, To: 7490 * ms, Reason: "releasing"},
		},
		Ops: []checker.StoreOp{
			{ID: 1, Client: "bob", Resource: "file", Kind: checker.OpWrite, Token: bob, Value: 2, Call: 3200 * ms, Return: 3220 * ms, Outcome: checker.OutcomeAccepted},
			{ID: 2, Client: "alice", Resource: "file", Kind: checker.OpWrite, Token: alice, Value: 1, Call: 950 * ms, Return: 4060 * ms, Outcome: checker.OutcomeRejected},
			{ID: 3, Client: "bob", Resource: "file", Kind: checker.OpRead, Call: 7200 * ms, Return: 7220 * ms, Outcome: checker.OutcomeAccepted, ReadValue: 2, ReadToken: bob},
		},
		Applies: []checker.StoreApply{
			{Resource: "file", Client: "bob", Token: bob, Value: 2, Accepted: true, At: 3210 * ms, Step: 500},
			{Resource: "file", Client: "alice", Token: alice, Value: 1, Accepted: false, At: 4050 * ms, Step: 600},
		},
		StoreRestarts: []checker.StoreRestart{{At: 7000 * ms, Step: 800}},
		End:           8 * time.Second,
	}
	faults := nemesis.Schedule{
		{At: nemesis.Duration(time.Second), Kind: nemesis.Pause, Node: "alice", Duration: nemesis.Duration(3 * time.Second)},
		{At: nemesis.Duration(5 * time.Second), Kind: nemesis.Isolate, Node: "lock"},
		{At: nemesis.Duration(6 * time.Second), Kind: nemesis.Heal},
		{At: nemesis.Duration(6500 * ms), Kind: nemesis.Crash, Node: "store"},
		{At: nemesis.Duration(7 * time.Second), Kind: nemesis.Restart, Node: "store"},
		{At: nemesis.Duration(5500 * ms), Kind: nemesis.Jump, Node: "bob", By: nemesis.Duration(-2 * time.Second)},
	}
	v := checker.Check(h, checker.Options{})
	if v.Kind != checker.VerdictPass {
		t.Fatalf("the Kleppmann story should pass the checker, got %v: %+v", v.Kind, v.Violations)
	}
	return Input{
		Scenario:     "kleppmann-pause",
		Seed:         42,
		Description:  "A paused client's late write is fenced out.",
		Expect:       "pass",
		TraceHash:    "00c0ffee00c0ffee",
		Verdict:      v,
		History:      h,
		Faults:       faults.Sorted(),
		Options:      "",
		Nodes:        []string{"lock", "store", "alice", "bob"},
		SimEnd:       8 * time.Second,
		Repro:        "go run ./cmd/simrun run -scenario kleppmann-pause -seed 42",
		CheckTimeout: 10 * time.Second,
	}
}

// networkRef matches anything in the page that could load a resource.
var networkRef = regexp.MustCompile(`(?i)https?://|//cdn|src="http|src='http|@import|<link\b`)

func render1(t *testing.T, in Input) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, in); err != nil {
		t.Fatalf("HTML: %v", err)
	}
	return b.String()
}

func assertOffline(t *testing.T, page string) {
	t.Helper()
	if loc := networkRef.FindStringIndex(page); loc != nil {
		lo, hi := max(0, loc[0]-80), min(len(page), loc[1]+80)
		t.Fatalf("page holds a network reference %q in …%s…", page[loc[0]:loc[1]], page[lo:hi])
	}
}

func TestKleppmannPage(t *testing.T) {
	in := kleppmann(t)
	page := render1(t, in)
	for _, want := range []string{
		"kleppmann-pause", "seed 42", ">pass<", "met", "00c0ffee00c0ffee",
		"go run ./cmd/simrun run -scenario kleppmann-pause -seed 42",
		"alice", "bob", "t33", "t34", "rejected", "accepted",
		"grants · file", "store · file",
		"pause alice for 3s", "isolate lock", "healed at 6s", "crash store", "restarted at 7s",
		"renewed token 33", "expired", "released",
		"jump", "belief overlap windows",
		"history.json", "no trace was recorded",
		"srcdoc=", "linearizable",
		"S8 — store ops", "S7 — lock ops",
		"<svg", "</html>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The belief overlap: alice believed until 4.1s, bob from 3.01s.
	if m := in.Verdict.Metrics.BeliefOverlap; m.Windows != 1 || m.Total != 1090*ms {
		t.Errorf("overlap metric = %+v, want one window of 1.09s", m)
	}
	if !strings.Contains(page, "1.09s") {
		t.Error("page lacks the overlap total 1.09s")
	}
	assertOffline(t, page)
	if again := render1(t, in); again != page {
		t.Error("two renderings of one input differ")
	}
}

func TestVerdictColoursAndExpectation(t *testing.T) {
	in := kleppmann(t)
	in.Verdict = checker.Verdict{Kind: checker.VerdictViolation, Violations: []checker.Violation{
		{Property: "S3", At: 4050 * ms, Step: 600, Detail: "an accepted write carried a stale token", Ops: []int{2}},
	}}
	in.Expect = "violation S3"
	page := render1(t, in)
	for _, want := range []string{"#c62828", ">violation S3<", "an accepted write carried a stale token", "<span class=\"met\">met</span>", "S3 violated at 4.05s"} {
		if !strings.Contains(page, want) {
			t.Errorf("violation page lacks %q", want)
		}
	}
	in.Expect = "pass"
	if page := render1(t, in); !strings.Contains(page, "NOT met") {
		t.Error("an unmet expectation is not flagged")
	}
	in.Verdict = checker.Verdict{Kind: checker.VerdictLiveness, Liveness: &checker.Violation{Property: "liveness", At: 7 * time.Second, Detail: "no grant after the heal"}}
	if page := render1(t, in); !strings.Contains(page, "#ef6c00") || !strings.Contains(page, "no grant after the heal") {
		t.Error("liveness verdict is not orange or lacks its detail")
	}
	in.Verdict = checker.Verdict{Kind: checker.VerdictUnknown, Unknown: "porcupine timed out"}
	if page := render1(t, in); !strings.Contains(page, "#757575") || !strings.Contains(page, "porcupine timed out") {
		t.Error("unknown verdict is not grey or lacks its reason")
	}
}

func TestWrite(t *testing.T) {
	in := kleppmann(t)
	dir := filepath.Join(t.TempDir(), "out")
	index, err := Write(dir, in, "step 1 alice acquire\nstep 2 ...\n")
	if err != nil {
		t.Fatal(err)
	}
	if index != filepath.Join(dir, IndexFile) {
		t.Errorf("index path = %q", index)
	}
	page, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `href="trace.txt"`) || !strings.Contains(string(page), `href="history.json"`) {
		t.Error("page does not link trace.txt and history.json")
	}
	assertOffline(t, string(page))
	raw, err := os.ReadFile(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var back checker.History
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("history.json does not decode: %v", err)
	}
	if len(back.Ops) != 3 || len(back.Grants) != 2 || back.Applies[1].Accepted || !strings.Contains(string(raw), "\n  \"ops\"") {
		t.Errorf("history.json does not hold the indented history: %s", raw[:min(len(raw), 200)])
	}
	trace, err := os.ReadFile(filepath.Join(dir, TraceFile))
	if err != nil || string(trace) != "step 1 alice acquire\nstep 2 ...\n" {
		t.Errorf("trace.txt = %q, %v", trace, err)
	}

	// Identical input, identical bytes.
	dir2 := filepath.Join(t.TempDir(), "out")
	if _, err := Write(dir2, in, "step 1 alice acquire\nstep 2 ...\n"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{IndexFile, HistoryFile, TraceFile} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(dir2, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes of one input", f)
		}
	}

	// Without a trace: no trace.txt (a stale one is removed), and the page
	// is exactly HTML's.
	if _, err := Write(dir, in, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TraceFile)); !os.IsNotExist(err) {
		t.Errorf("stale trace.txt not removed: %v", err)
	}
	page, _ = os.ReadFile(index)
	if string(page) != render1(t, in) {
		t.Error("Write without a trace and HTML disagree")
	}
}

func TestEmptyHistory(t *testing.T) {
	for _, in := range []Input{
		{},
		{Scenario: "empty", SimEnd: 5 * time.Second, Nodes: []string{"lock", "store"}},
		{Faults: nemesis.Schedule{{Kind: nemesis.Heal}}, SimEnd: -time.Second},
	} {
		page := render1(t, in)
		assertOffline(t, page)
		if !strings.Contains(page, "No store operations to check") || !strings.Contains(page, "No lock operations to check") {
			t.Error("empty page does not say there is nothing to check")
		}
		if _, err := Write(t.TempDir(), in, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIllegalHistoryDeterministic: porcupine gathers the partial
// linearizations of a non-linearizable history from a map; the page must
// not depend on that order.
func TestIllegalHistoryDeterministic(t *testing.T) {
	// Three concurrent writes with one token, then three concurrent reads,
	// one of each value: every order of the writes lets exactly one read
	// linearize, so porcupine finds several partial linearizations of equal
	// length.
	h := checker.History{End: 2 * time.Second}
	for c := range 3 {
		h.Ops = append(h.Ops,
			checker.StoreOp{ID: c, Client: fmt.Sprintf("c%d", c), Resource: "r", Kind: checker.OpWrite,
				Token: 1, Value: int64(c + 1), Call: 0, Return: 100 * ms, Outcome: checker.OutcomeAccepted},
			checker.StoreOp{ID: 10 + c, Client: fmt.Sprintf("c%d", c), Resource: "r", Kind: checker.OpRead,
				Call: 200 * ms, Return: 300 * ms, Outcome: checker.OutcomeAccepted, ReadValue: int64(c + 1), ReadToken: 1})
	}
	_, _, _, info, _ := checker.LinearizabilityInfo(h, 0)
	if parts := info.PartialLinearizations(); len(parts) != 1 || len(parts[0]) < 2 {
		t.Fatalf("want several partial linearizations of one partition, got %v", parts)
	}
	in := Input{Scenario: "illegal", History: h, SimEnd: 2 * time.Second, CheckTimeout: 20 * time.Second}
	in.Verdict = checker.Check(h, checker.Options{})
	if in.Verdict.Kind != checker.VerdictViolation {
		t.Fatalf("history meant to be illegal is %v", in.Verdict.Kind)
	}
	first := render1(t, in)
	if !strings.Contains(first, "not linearizable") {
		t.Error("page does not say S8 is not linearizable")
	}
	assertOffline(t, first)
	for range 5 {
		if render1(t, in) != first {
			t.Fatal("renderings of an illegal history differ")
		}
	}
}

func TestThinning(t *testing.T) {
	h := checker.History{End: 14 * time.Second}
	for i := range 12000 {
		at := time.Duration(i) * time.Millisecond
		h.Renewals = append(h.Renewals, checker.Renewal{Resource: "r", Client: "a", Token: 1, Request: uint64(i), At: at, Step: uint64(i)})
	}
	in := Input{History: h, SimEnd: 14 * time.Second, Nodes: []string{"a"}}
	page := render1(t, in)
	if !strings.Contains(page, "renewals: 12000 records, every 3rd drawn (4000)") {
		t.Error("page does not say the renewals were thinned")
	}
	if n := strings.Count(page, "the service renewed token"); n != 4000 {
		t.Errorf("drew %d renewals, want 4000", n)
	}
}

// TestRandomHistories renders random small histories and schedules, valid
// or not, and checks that nothing panics, the page stays offline and two
// renderings agree.
func TestRandomHistories(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	clients := []string{"a", "b", "c", "@leader"}
	resources := []string{"x", "y"}
	tm := func() time.Duration { return time.Duration(r.IntN(4000)-200) * ms }
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	n := 150
	if testing.Short() || raceEnabled {
		n = 40
	}
	for i := range n {
		var h checker.History
		for id := range r.IntN(8) {
			o := checker.StoreOp{ID: id, Client: pick(clients), Resource: pick(resources), Kind: checker.OpKind(r.IntN(2)),
				Token: uint64(r.IntN(5)), Value: int64(r.IntN(5)), Call: tm(), Return: tm(), Outcome: checker.Outcome(r.IntN(3)),
				ReadValue: int64(r.IntN(5)), ReadToken: uint64(r.IntN(5))}
			h.Ops = append(h.Ops, o)
		}
		statuses := []checker.LockStatus{checker.LockGranted, checker.LockBusy, checker.LockRenewed, checker.LockReleased,
			checker.LockNotHolder, checker.LockUnknown, checker.LockStale, "weird"}
		for id := range r.IntN(8) {
			h.LockOps = append(h.LockOps, checker.LockOp{ID: id, Client: pick(clients), Resource: pick(resources),
				Kind: checker.LockKind(r.IntN(3)), Request: uint64(r.IntN(4)), Token: uint64(r.IntN(5)), Call: tm(), Return: tm(),
				Outcome: statuses[r.IntN(len(statuses))]})
		}
		for range r.IntN(5) {
			h.Grants = append(h.Grants, checker.Grant{Resource: pick(resources), Client: pick(clients), Token: uint64(r.IntN(5)),
				Start: tm(), End: tm(), Open: r.IntN(3) == 0, Step: uint64(r.IntN(100)), Reason: pick([]string{"", "released", "expired"}), Lost: r.IntN(5) == 0})
		}
		for range r.IntN(5) {
			h.Applies = append(h.Applies, checker.StoreApply{Resource: pick(resources), Client: pick(clients), Token: uint64(r.IntN(5)),
				Value: int64(r.IntN(5)), Accepted: r.IntN(2) == 0, At: tm(), Lost: r.IntN(5) == 0})
		}
		for range r.IntN(5) {
			h.Beliefs = append(h.Beliefs, checker.Belief{Client: pick(clients), Resource: pick(resources), Token: uint64(r.IntN(5)),
				From: tm(), To: tm(), Open: r.IntN(3) == 0, Reason: "watchdog"})
		}
		for range r.IntN(4) {
			h.Renewals = append(h.Renewals, checker.Renewal{Resource: pick(resources), Client: pick(clients), Token: uint64(r.IntN(5)), At: tm()})
			h.Ends = append(h.Ends, checker.GrantEnd{Resource: pick(resources), Client: pick(clients), Token: uint64(r.IntN(5)),
				Reason: pick([]string{"released", "expired", "?"}), At: tm(), Lost: r.IntN(4) == 0})
		}
		if r.IntN(2) == 0 {
			h.StoreRestarts = append(h.StoreRestarts, checker.StoreRestart{At: tm()})
		}
		h.End = tm()
		var faults nemesis.Schedule
		kinds := nemesis.Kinds()
		for range r.IntN(8) {
			faults = append(faults, nemesis.Op{At: nemesis.Duration(tm()), Kind: kinds[r.IntN(len(kinds))], Node: pick(append(clients, "n1", "@crashed", "")),
				Duration: nemesis.Duration(time.Duration(r.IntN(3000)) * ms), To: pick([]string{"", "n2"}), Group: [][]string{nil, {"a", "n1"}}[r.IntN(2)],
				PPM: int64(r.IntN(2000) - 1000), By: nemesis.Duration(time.Duration(r.IntN(4000)-2000) * ms),
				Delay: nemesis.Duration(time.Duration(r.IntN(100)) * ms), Probability: r.Float64()})
		}
		in := Input{Scenario: fmt.Sprintf("random-%d", i), Seed: uint64(i), History: h, Faults: faults.Sorted(),
			Nodes: []string{"n1", "n2", "a", "b"}, SimEnd: time.Duration(r.IntN(5000)-500) * ms, CheckTimeout: 5 * time.Second}
		in.Verdict = checker.Check(h, checker.Options{})
		in.Expect = pick([]string{"", "pass", "violation S8", "violation"})
		page := render1(t, in)
		assertOffline(t, page)
		if render1(t, in) != page {
			t.Fatalf("history %d: renderings differ", i)
		}
	}
}

func TestPorcupineTimeoutIsSaid(t *testing.T) {
	in := kleppmann(t)
	timedOut := func(h checker.History, timeout time.Duration) (porcupine.Model, []porcupine.Operation, porcupine.CheckResult, porcupine.LinearizationInfo, bool) {
		model, ops, _, info, exact := checker.LinearizabilityInfo(h, timeout)
		return model, ops, porcupine.Unknown, info, exact
	}
	v := runView("S8", "store", len(in.History.Ops), timedOut, in.History, 3*time.Second, nil)
	if v.doc != "" || !strings.Contains(v.note, "timed out (budget 3s)") {
		t.Errorf("timed-out view: doc %d bytes, note %q", len(v.doc), v.note)
	}
	var b bytes.Buffer
	(&page{b: &b}).linView(v, "S8", "lin-s8")
	if strings.Contains(b.String(), "<iframe") || !strings.Contains(b.String(), "timed out") {
		t.Errorf("timed-out view renders as %s", b.String())
	}
}

// TestHugeHistoryIsNotDrawn: past MaxViewOps ops a view is not drawn and
// porcupine is not even asked (a run cut at a limit leaves hundreds of
// thousands of unanswered calls, which would cost the page its whole
// budget); the page says why instead of claiming a result.
func TestHugeHistoryIsNotDrawn(t *testing.T) {
	in := kleppmann(t)
	asked := false
	spy := func(h checker.History, timeout time.Duration) (porcupine.Model, []porcupine.Operation, porcupine.CheckResult, porcupine.LinearizationInfo, bool) {
		asked = true
		return checker.LinearizabilityInfo(h, timeout)
	}
	v := runView("S8", "store", MaxViewOps+1, spy, in.History, 3*time.Second, nil)
	if asked || v.doc != "" || !strings.Contains(v.note, "more than the 5000 a view is drawn for") {
		t.Errorf("huge view: porcupine asked %v, doc %d bytes, note %q", asked, len(v.doc), v.note)
	}
	var b bytes.Buffer
	(&page{b: &b}).linView(v, "S8", "lin-s8")
	if got := b.String(); strings.Contains(got, "<iframe") || strings.Contains(got, ">linearizable<") || !strings.Contains(got, "not drawn") {
		t.Errorf("huge view renders as %s", got)
	}
	if v := runView("S8", "store", MaxViewOps, spy, in.History, 3*time.Second, nil); !asked || v.doc == "" {
		t.Errorf("a view at the cap was not drawn: asked %v, note %q", asked, v.note)
	}
}

// TestPorcupineURLs pins what sanitize relies on: porcupine's raw view holds
// the SVG namespace URI in exactly the two forms sanitize rewrites, and
// nothing else URL-like. If an upgrade changes that, this test says so.
func TestPorcupineURLs(t *testing.T) {
	in := kleppmann(t)
	model, _, _, info, _ := checker.LinearizabilityInfo(in.History, 0)
	var b bytes.Buffer
	if err := porcupine.Visualize(model, info, &b); err != nil {
		t.Fatal(err)
	}
	raw := b.String()
	for _, s := range []string{svgNSAttr, svgNSConst} {
		if !strings.Contains(raw, s) {
			t.Errorf("porcupine's view no longer holds %q: revisit sanitize", s)
		}
	}
	clean, note := sanitize(raw)
	if note != "" {
		t.Errorf("porcupine's view holds other URLs: %s", note)
	}
	assertOffline(t, clean)
	if !strings.Contains(clean, svgNSConstRepl) {
		t.Error("the namespace is not derived in the browser")
	}
	dirty, note := sanitize(`<script src="https://cdn.example.com/x.js"></script><a href="http://example.org/">x</a>`)
	if note == "" {
		t.Error("sanitize said nothing about the URLs it removed")
	}
	assertOffline(t, dirty)
}

// TestTokensPast2p63AreWhole: the Kleppmann story with its tokens moved to
// either side of 2^63 (alice 2^63−1, bob 2^63) still passes the checker,
// and the page shows both tokens digit for digit — nothing on the way
// read them as signed or as doubles.
func TestTokensPast2p63AreWhole(t *testing.T) {
	in := kleppmannAt(t, 1<<63-34) // kleppmannAt checks that the verdict is pass
	page := render1(t, in)
	for _, tok := range []string{"9223372036854775807", "9223372036854775808"} {
		if !strings.Contains(page, "token "+tok) {
			t.Errorf("the page does not show token %s whole", tok)
		}
	}
}
