package lockservice

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/sim"
)

// Helpers for process-level tests in a small sim.World.

func newTestWorld(t *testing.T, trace io.Writer) *sim.World {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork(), Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func addNode(t *testing.T, w *sim.World, name string, p func() sim.Process, clock fakeclock.Config) sim.NodeID {
	t.Helper()
	id, err := w.AddNode(name, p, clock)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runToQuiescence runs w until nothing is left to do, failing the test if
// that takes longer than a simulated minute.
func runToQuiescence(t *testing.T, w *sim.World) {
	t.Helper()
	if out := w.Run(time.Minute, 1_000_000); out != sim.Quiescent {
		t.Fatalf("run ended %v at %v, want quiescent", out, w.Now())
	}
}

type stamped[M any] struct {
	at  time.Duration
	msg M
}

// probe is a test process that sends what the test tells it to and records
// every reply with the true time it arrived. It never crashes, so the same
// object serves every (re)start.
type probe struct {
	w      *sim.World
	env    sim.Env
	lock   []stamped[LockReply]
	writes []stamped[WriteReply]
	reads  []stamped[ReadReply]
}

func addProbe(t *testing.T, w *sim.World, name string) (*probe, sim.NodeID) {
	p := &probe{w: w}
	return p, addNode(t, w, name, func() sim.Process { return p }, fakeclock.Config{})
}

func (p *probe) Start(env sim.Env) { p.env = env }

func (p *probe) Receive(_ sim.Env, _ sim.NodeID, msg sim.Message) {
	switch m := msg.(type) {
	case LockReply:
		p.lock = append(p.lock, stamped[LockReply]{p.w.Now(), m})
	case WriteReply:
		p.writes = append(p.writes, stamped[WriteReply]{p.w.Now(), m})
	case ReadReply:
		p.reads = append(p.reads, stamped[ReadReply]{p.w.Now(), m})
	}
}

// sendAt makes the probe send msg to `to` at true time at.
func (p *probe) sendAt(at time.Duration, to sim.NodeID, msg sim.Message) {
	p.w.At(at, fmt.Sprintf("probe sends %T", msg), func() { p.env.Send(to, msg) })
}

// lockReplies returns the lock replies to request req, in arrival order.
func (p *probe) lockReplies(req uint64) []LockReply {
	var out []LockReply
	for _, r := range p.lock {
		if r.msg.Request == req {
			out = append(out, r.msg)
		}
	}
	return out
}

// onlyLockReply returns the single lock reply to req.
func (p *probe) onlyLockReply(t *testing.T, req uint64) LockReply {
	t.Helper()
	got := p.lockReplies(req)
	if len(got) != 1 {
		t.Fatalf("request %d: got %d lock replies %+v, want 1", req, len(got), got)
	}
	return got[0]
}

func (p *probe) onlyWriteReply(t *testing.T, req uint64) WriteReply {
	t.Helper()
	var got []WriteReply
	for _, r := range p.writes {
		if r.msg.Request == req {
			got = append(got, r.msg)
		}
	}
	if len(got) != 1 {
		t.Fatalf("write request %d: got %d replies %+v, want 1", req, len(got), got)
	}
	return got[0]
}

// obsCall is one Observer call, stamped with true time.
type obsCall struct {
	at       time.Duration
	kind     string // granted, ended, applied, write-called, write-returned, read-called, read-returned
	resource string
	client   string
	token    uint64
	reason   string
	value    int64
	accepted bool
	id       int
}

// recorder is an Observer that records every call with w.Now(); the on*
// hooks, if set, run at the instant of the call (to inject faults).
type recorder struct {
	w         *sim.World
	calls     []obsCall
	writes    map[int]obsCall // write-called by id
	ids       map[opKey]int   // store op id by (client, request)
	nextID    int
	onGranted func(resource, client string, token uint64)
	onEnded   func(resource string, token uint64, reason string)
	onApplied func(resource, client string, token uint64, value int64, accepted bool)
}

func newRecorder(w *sim.World) *recorder {
	return &recorder{w: w, writes: map[int]obsCall{}, ids: map[opKey]int{}}
}

func (r *recorder) add(c obsCall) { c.at = r.w.Now(); r.calls = append(r.calls, c) }

// Observe records e under the kind names the tests use.
func (r *recorder) Observe(e Event) {
	switch e.Kind {
	case EvGranted:
		r.add(obsCall{kind: "granted", resource: e.Resource, client: e.Client, token: e.Token})
		if r.onGranted != nil {
			r.onGranted(e.Resource, e.Client, e.Token)
		}
	case EvEnded:
		r.add(obsCall{kind: "ended", resource: e.Resource, token: e.Token, reason: e.Reason})
		if r.onEnded != nil {
			r.onEnded(e.Resource, e.Token, e.Reason)
		}
	case EvApplied:
		r.add(obsCall{kind: "applied", resource: e.Resource, client: e.Client, token: e.Token, value: e.Value, accepted: e.Accepted})
		if r.onApplied != nil {
			r.onApplied(e.Resource, e.Client, e.Token, e.Value, e.Accepted)
		}
	case EvCall:
		if e.Op != OpWrite && e.Op != OpRead {
			return
		}
		r.nextID++
		r.ids[opKey{e.Client, e.Request}] = r.nextID
		c := obsCall{kind: e.Op.String() + "-called", resource: e.Resource, client: e.Client, token: e.Token, value: e.Value, id: r.nextID}
		r.add(c)
		if e.Op == OpWrite {
			r.writes[r.nextID] = r.calls[len(r.calls)-1]
		}
	case EvReturn:
		id := r.ids[opKey{e.Client, e.Request}]
		switch e.Op {
		case OpWrite:
			c := r.writes[id]
			r.add(obsCall{kind: "write-returned", resource: c.resource, client: c.client, token: c.token, value: c.value, accepted: e.Accepted, id: id})
		case OpRead:
			r.add(obsCall{kind: "read-returned", value: e.Value, token: e.Token, id: id})
		}
	}
}

// opKey pairs a client's call with its return.
type opKey struct {
	client  string
	request uint64
}

// of returns the recorded calls of kind.
func (r *recorder) of(kind string) []obsCall {
	var out []obsCall
	for _, c := range r.calls {
		if c.kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// logLine is one slog record from the trace.
type logLine struct {
	at    time.Duration
	node  string
	msg   string
	attrs map[string]string
}

var logAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// parseLogs extracts the slog records (not the event lines) from a trace.
func parseLogs(t *testing.T, trace string) []logLine {
	t.Helper()
	var out []logLine
	for _, line := range strings.Split(trace, "\n") {
		if !strings.HasPrefix(line, "level=") {
			continue
		}
		l := logLine{attrs: map[string]string{}}
		for _, m := range logAttr.FindAllStringSubmatch(line, -1) {
			l.attrs[m[1]] = m[2]
		}
		l.node, l.msg = l.attrs["node"], l.attrs["msg"]
		l.at = parseTraceTime(t, l.attrs["t"])
		out = append(out, l)
	}
	return out
}

// parseTraceTime reads the trace's "<s>.<µs>s" time format.
func parseTraceTime(t *testing.T, s string) time.Duration {
	t.Helper()
	sec, frac, ok := strings.Cut(strings.TrimSuffix(s, "s"), ".")
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad trace time %q", s)
	}
	return time.Duration(a)*time.Second + time.Duration(b)*time.Microsecond
}
