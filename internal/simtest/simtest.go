package simtest

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// Helpers for process-level tests in a small sim.World.

func NewTestWorld(t *testing.T, trace io.Writer) *sim.World {
	t.Helper()
	w, err := sim.New(sim.Config{Seed: 1, Network: sim.DefaultNetwork(), Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func AddNode(t *testing.T, w *sim.World, name string, p func() sim.Process, clock fakeclock.Config) sim.NodeID {
	t.Helper()
	id, err := w.AddNode(name, p, clock)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// RunToQuiescence runs w until nothing is left to do, failing the test if
// that takes longer than a simulated minute.
func RunToQuiescence(t *testing.T, w *sim.World) {
	t.Helper()
	if out := w.Run(time.Minute, 1_000_000); out != sim.Quiescent {
		t.Fatalf("run ended %v at %v, want quiescent", out, w.Now())
	}
}

type Stamped[M any] struct {
	At  time.Duration
	Msg M
}

// Probe is a test process that sends what the test tells it to and records
// every reply with the true time it arrived. It never crashes, so the same
// object serves every (re)start.
type Probe struct {
	w      *sim.World
	Env    sim.Env
	Lock   []Stamped[lockservice.LockReply]
	Writes []Stamped[lockservice.WriteReply]
	Reads  []Stamped[lockservice.ReadReply]
}

func AddProbe(t *testing.T, w *sim.World, name string) (*Probe, sim.NodeID) {
	p := &Probe{w: w}
	return p, AddNode(t, w, name, func() sim.Process { return p }, fakeclock.Config{})
}

func (p *Probe) Start(env sim.Env) { p.Env = env }

func (p *Probe) Receive(_ sim.Env, _ sim.NodeID, msg sim.Message) {
	switch m := msg.(type) {
	case lockservice.LockReply:
		p.Lock = append(p.Lock, Stamped[lockservice.LockReply]{p.w.Now(), m})
	case lockservice.WriteReply:
		p.Writes = append(p.Writes, Stamped[lockservice.WriteReply]{p.w.Now(), m})
	case lockservice.ReadReply:
		p.Reads = append(p.Reads, Stamped[lockservice.ReadReply]{p.w.Now(), m})
	}
}

// SendAt makes the probe send msg to `to` at true time at.
func (p *Probe) SendAt(at time.Duration, to sim.NodeID, msg sim.Message) {
	p.w.At(at, fmt.Sprintf("probe sends %T", msg), func() { p.Env.Send(to, msg) })
}

// LockReplies returns the lock replies to request req, in arrival order.
func (p *Probe) LockReplies(req uint64) []lockservice.LockReply {
	var out []lockservice.LockReply
	for _, r := range p.Lock {
		if r.Msg.Request == req {
			out = append(out, r.Msg)
		}
	}
	return out
}

// OnlyLockReply returns the single lock reply to req.
func (p *Probe) OnlyLockReply(t *testing.T, req uint64) lockservice.LockReply {
	t.Helper()
	got := p.LockReplies(req)
	if len(got) != 1 {
		t.Fatalf("request %d: got %d lock replies %+v, want 1", req, len(got), got)
	}
	return got[0]
}

func (p *Probe) OnlyWriteReply(t *testing.T, req uint64) lockservice.WriteReply {
	t.Helper()
	var got []lockservice.WriteReply
	for _, r := range p.Writes {
		if r.Msg.Request == req {
			got = append(got, r.Msg)
		}
	}
	if len(got) != 1 {
		t.Fatalf("write request %d: got %d replies %+v, want 1", req, len(got), got)
	}
	return got[0]
}

// ObsCall is one Observer call, stamped with true time.
type ObsCall struct {
	At       time.Duration
	Kind     string // granted, ended, applied, write-called, write-returned, read-called, read-returned
	Resource string
	Client   string
	Token    uint64
	Reason   string
	value    int64
	Accepted bool
	Id       int
}

// Recorder is an Observer that records every call with w.Now(); the on*
// hooks, if set, run at the instant of the call (to inject faults).
type Recorder struct {
	W         *sim.World
	Calls     []ObsCall
	writes    map[int]ObsCall // write-called by id
	ids       map[OpKey]int   // store op id by (client, request)
	nextID    int
	OnGranted func(resource, client string, token uint64)
	OnEnded   func(resource string, token uint64, reason string)
	OnApplied func(resource, client string, token uint64, value int64, accepted bool)
}

func NewRecorder(w *sim.World) *Recorder {
	return &Recorder{W: w, writes: map[int]ObsCall{}, ids: map[OpKey]int{}}
}

func (r *Recorder) add(c ObsCall) { c.At = r.W.Now(); r.Calls = append(r.Calls, c) }

// Observe records e under the kind names the tests use.
func (r *Recorder) Observe(e lockservice.Event) {
	switch e.Kind {
	case lockservice.EvGranted:
		r.add(ObsCall{Kind: "granted", Resource: e.Resource, Client: e.Client, Token: e.Token})
		if r.OnGranted != nil {
			r.OnGranted(e.Resource, e.Client, e.Token)
		}
	case lockservice.EvEnded:
		r.add(ObsCall{Kind: "ended", Resource: e.Resource, Token: e.Token, Reason: e.Reason})
		if r.OnEnded != nil {
			r.OnEnded(e.Resource, e.Token, e.Reason)
		}
	case lockservice.EvApplied:
		r.add(ObsCall{Kind: "applied", Resource: e.Resource, Client: e.Client, Token: e.Token, value: e.Value, Accepted: e.Accepted})
		if r.OnApplied != nil {
			r.OnApplied(e.Resource, e.Client, e.Token, e.Value, e.Accepted)
		}
	case lockservice.EvCall:
		if e.Op != lockservice.OpWrite && e.Op != lockservice.OpRead {
			return
		}
		r.nextID++
		r.ids[OpKey{e.Client, e.Request}] = r.nextID
		c := ObsCall{Kind: e.Op.String() + "-called", Resource: e.Resource, Client: e.Client, Token: e.Token, value: e.Value, Id: r.nextID}
		r.add(c)
		if e.Op == lockservice.OpWrite {
			r.writes[r.nextID] = r.Calls[len(r.Calls)-1]
		}
	case lockservice.EvReturn:
		id := r.ids[OpKey{e.Client, e.Request}]
		switch e.Op {
		case lockservice.OpWrite:
			c := r.writes[id]
			r.add(ObsCall{Kind: "write-returned", Resource: c.Resource, Client: c.Client, Token: c.Token, value: c.value, Accepted: e.Accepted, Id: id})
		case lockservice.OpRead:
			r.add(ObsCall{Kind: "read-returned", value: e.Value, Token: e.Token, Id: id})
		}
	}
}

// OpKey pairs a client's call with its return.
type OpKey struct {
	Client  string
	Request uint64
}

// Of returns the recorded calls of kind.
func (r *Recorder) Of(kind string) []ObsCall {
	var out []ObsCall
	for _, c := range r.Calls {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// LogLine is one slog record from the trace.
type LogLine struct {
	At    time.Duration
	Node  string
	Msg   string
	Attrs map[string]string
}

var logAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// ParseLogs extracts the slog records (not the event lines) from a trace.
func ParseLogs(t *testing.T, trace string) []LogLine {
	t.Helper()
	var out []LogLine
	for _, line := range strings.Split(trace, "\n") {
		if !strings.HasPrefix(line, "level=") {
			continue
		}
		l := LogLine{Attrs: map[string]string{}}
		for _, m := range logAttr.FindAllStringSubmatch(line, -1) {
			l.Attrs[m[1]] = m[2]
		}
		l.Node, l.Msg = l.Attrs["node"], l.Attrs["msg"]
		l.At = parseTraceTime(t, l.Attrs["t"])
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

// CheckGrantOrder is S1 on first reports, replayed in true-time order:
// tokens strictly increase in the order grants are decided, grants of a
// resource never overlap, an end ends the active grant, and the store
// accepts a write only under the writer's current grant. It returns the
// number of grants and of accepted writes, and the grants still open at
// the end (by resource) for the callers that require quiescence.
func CheckGrantOrder(t testing.TB, calls []ObsCall) (grants, accepted int, open map[string]ObsCall) {
	t.Helper()
	open = map[string]ObsCall{}
	var last uint64
	for _, c := range calls {
		switch c.Kind {
		case "granted":
			if g, ok := open[c.Resource]; ok {
				t.Errorf("%v: %s granted to %s with token %d while %s holds it with token %d since %v",
					c.At, c.Resource, c.Client, c.Token, g.Client, g.Token, g.At)
			}
			if c.Token <= last {
				t.Errorf("%v: token %d granted after token %d", c.At, c.Token, last)
			}
			last = c.Token
			open[c.Resource] = c
			grants++
		case "ended":
			if g, ok := open[c.Resource]; !ok || g.Token != c.Token {
				t.Errorf("%v: grant %d on %s ended, but the active grant is %+v", c.At, c.Token, c.Resource, g)
			}
			delete(open, c.Resource)
		case "applied":
			if !c.Accepted {
				continue
			}
			accepted++
			if g, ok := open[c.Resource]; !ok || g.Client != c.Client || g.Token != c.Token {
				t.Errorf("%v: store accepted %s's write with token %d, but the current grant is %+v (active %v)",
					c.At, c.Client, c.Token, g, ok)
			}
		}
	}
	return grants, accepted, open
}
