package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// tracer folds every fired event into the run's 64-bit hash and, when a
// writer is set, prints one readable line per event, up to a bound.
type tracer struct {
	hash uint64
	out  *boundedWriter // nil: no trace
}

func newTracer(out io.Writer, max int, w *World) *tracer {
	t := &tracer{hash: 0xCBF29CE484222325}
	if out != nil {
		t.out = &boundedWriter{out: out, left: max, max: max, w: w}
	}
	return t
}

// full reports whether nothing more goes to the trace: there is none, or
// it reached its bound. Nothing is formatted then.
func (t *tracer) full() bool { return t.out == nil || t.out.full }

// boundedWriter passes whole lines on until the next would pass max bytes;
// then it writes one line saying where the trace stopped, and drops the
// rest.
type boundedWriter struct {
	out       io.Writer
	left, max int
	full      bool
	w         *World
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if b.full {
		return len(p), nil
	}
	if len(p) > b.left {
		b.full = true
		fmt.Fprintf(b.out, "trace cut: the limit of %d trace bytes (sim.Limits.TraceBytes) was reached at step %d, t=%s; the run went on untraced\n",
			b.max, b.w.step, fmtTime(b.w.now))
		return len(p), nil
	}
	b.left -= len(p)
	return b.out.Write(p)
}

// record folds ev into the hash. note marks events that fired without
// reaching a process ("held", "stale", "blocked") or names an action.
func (t *tracer) record(w *World, ev *event, note string) {
	h := Mix(t.hash, uint64(ev.at))
	h = Mix(h, uint64(ev.kind)<<48|uint64(uint16(ev.node))<<32|uint64(uint16(ev.from))<<16|uint64(len(note)))
	if ev.msg != nil {
		h = Mix(h, ev.msg.Fingerprint())
	}
	if note != "" {
		h = Mix(h, HashString(note))
	}
	t.hash = h
	if t.full() {
		return
	}
	var where string
	if ev.kind != evAction {
		where = w.nodes[ev.node].name
	}
	line := fmt.Sprintf("step=%d t=%s node=%s event=%s", w.step, fmtTime(ev.at), where, ev.kind)
	if ev.kind == evDeliver {
		line += fmt.Sprintf(" from=%s msg=%T%+v", w.nodes[ev.from].name, ev.msg, ev.msg)
	}
	if note != "" {
		line += " note=" + fmt.Sprintf("%q", note)
	}
	fmt.Fprintln(t.out, line)
}

// fmtTime prints a true time with fixed microsecond precision, so traces
// diff cleanly.
func fmtTime(d time.Duration) string {
	return fmt.Sprintf("%d.%06ds", d/time.Second, (d%time.Second)/time.Microsecond)
}

// handler returns the slog handler for node n's logger: records go to the
// trace with step, virtual time and node, and never the machine's clock.
// Without a trace writer it is disabled and costs one call per record.
func (t *tracer) handler(n *node) slog.Handler {
	if t.out == nil {
		return discard{}
	}
	inner := slog.NewTextHandler(t.out, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the machine's clock must not reach output
			}
			return a
		},
	})
	return &nodeHandler{inner: inner, n: n}
}

// nodeHandler stamps each record with the step, the virtual time and the node.
type nodeHandler struct {
	inner slog.Handler
	n     *node
}

func (h *nodeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.n.w.trace.full() && h.inner.Enabled(ctx, l)
}

func (h *nodeHandler) Handle(ctx context.Context, r slog.Record) error {
	w := h.n.w
	r2 := slog.NewRecord(time.Time{}, r.Level, r.Message, 0)
	r2.AddAttrs(slog.Uint64("step", w.step), slog.String("t", fmtTime(w.now)), slog.String("node", h.n.name))
	r.Attrs(func(a slog.Attr) bool { r2.AddAttrs(a); return true })
	return h.inner.Handle(ctx, r2)
}

func (h *nodeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &nodeHandler{inner: h.inner.WithAttrs(as), n: h.n}
}

func (h *nodeHandler) WithGroup(name string) slog.Handler {
	return &nodeHandler{inner: h.inner.WithGroup(name), n: h.n}
}

// discard is a disabled slog handler.
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }
