package lockd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencesim/fencesim/lockapi"
)

// gateHook holds every script call (alone or in a pipeline) until open
// is closed, records how many script calls each send carried (in arrival
// order), and
// with fail set answers no pipeline (as a hook or a lost connection can).
type gateHook struct {
	open  chan struct{}
	mu    sync.Mutex
	sends []string // "alone", or "pN": a pipeline of N calls
	fail  error
}

func (h *gateHook) arrive(send string) {
	h.mu.Lock()
	h.sends = append(h.sends, send)
	open := h.open
	h.mu.Unlock()
	<-open
}

// release opens the gate.
func (h *gateHook) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.open:
	default:
		close(h.open)
	}
}

// reset closes the gate again and forgets the sends so far.
func (h *gateHook) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open, h.sends = make(chan struct{}), nil
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			h.arrive("alone")
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if strings.HasPrefix(c.Name(), "eval") {
				n++
			}
		}
		if n == 0 { // a new connection's handshake
			return next(ctx, cmds)
		}
		h.arrive("p" + strconv.Itoa(n))
		h.mu.Lock()
		fail := h.fail
		h.mu.Unlock()
		if fail != nil {
			return fail
		}
		return next(ctx, cmds)
	}
}

// calls returns the sends so far, in arrival order.
func (h *gateHook) calls() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.sends, " ")
}

// waitSends waits until n sends reached the gate.
func (h *gateHook) waitSends(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); len(strings.Fields(h.calls())) < n; {
		if time.Now().After(end) {
			t.Fatalf("%d sends reached Redis, want %d", len(h.calls()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// gated is a backend with one lane over a fresh miniredis whose script
// calls wait for the hook's gate.
func gated(t *testing.T) (*Backend, *gateHook, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	opts := &redis.Options{Addr: m.Addr(), MaxRetries: -1, ReadTimeout: time.Second, WriteTimeout: time.Second}
	rdb, plain := redis.NewClient(opts), redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close(); plain.Close() })
	h := &gateHook{open: make(chan struct{})}
	b := New(rdb, Options{Pipelines: 1})
	t.Cleanup(func() { b.Close() })
	// The fence first (it is read with plain commands), and the scripts
	// loaded: each call is then one EVALSHA.
	if _, _, err := b.fence(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*redis.Script{queuedAcquireScript, renewScript, queuedReleaseScript, leaveScript, getScript, heldScript} {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.AddHook(h)
	t.Cleanup(h.release) // before b.Close, which waits for the lanes
	return b, h, plain
}

// waitQueued waits until n calls wait in the queue for the lane.
func waitQueued(t *testing.T, b *Backend, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); len(b.pipe.calls) < n; {
		if time.Now().After(end) {
			t.Fatalf("%d calls queued, want %d", len(b.pipe.calls), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type outcome struct {
	lease lockapi.Lease
	err   error
}

// acquire starts an acquire of each resource and returns their outcomes'
// channel.
func acquire(b *Backend, ctx context.Context, resources ...string) chan outcome {
	out := make(chan outcome, len(resources))
	for _, r := range resources {
		go func() {
			l, err := b.Acquire(ctx, r, "c-"+r, time.Minute, 0, "req-"+r)
			out <- outcome{l, err}
		}()
	}
	return out
}

// busy starts two acquires and waits until both are at the gate: the
// first alone (no other call was out), the second in the lane's first
// pipeline. Calls made then queue.
func busy(t *testing.T, b *Backend, h *gateHook) chan outcome {
	t.Helper()
	first := acquire(b, context.Background(), "first")
	h.waitSends(t, 1)
	second := acquire(b, context.Background(), "second")
	h.waitSends(t, 2)
	if got := h.calls(); got != "alone p1" {
		t.Fatalf("sends %q, want \"alone p1\"", got)
	}
	out := make(chan outcome, 2)
	go func() { out <- <-first; out <- <-second }()
	return out
}

func granted(t *testing.T, what string, ch chan outcome, n int) {
	t.Helper()
	for range n {
		if o := <-ch; o.err != nil || o.lease.Token == 0 {
			t.Errorf("%s: %+v, %v", what, o.lease, o.err)
		}
	}
}

func TestPipelineGoesAloneWhenNothingElseIsOut(t *testing.T) {
	b, h, _ := gated(t)
	h.release()
	for i := range 3 {
		granted(t, "an acquire", acquire(b, context.Background(), "r"+strconv.Itoa(i)), 1)
	}
	if got := h.calls(); got != "alone alone alone" {
		t.Errorf("sends %q: want each call alone", got)
	}
}

func TestPipelineGathersConcurrentCalls(t *testing.T) {
	b, h, _ := gated(t)
	early := busy(t, b, h)
	var rs []string
	for i := range 15 {
		rs = append(rs, "r"+strconv.Itoa(i))
	}
	rest := acquire(b, context.Background(), rs...)
	waitQueued(t, b, 15)
	h.release()
	granted(t, "the two sent first", early, 2)
	granted(t, "the queued acquires", rest, 15)
	// The 15 queued while the lane's pipeline was out go together.
	wantSent(t, h, b, "alone p1 p15", "alone 1, pipelines 2, pipelined 16, abandoned 0")
	for i, r := range append(rs, "first", "second") {
		if st, err := b.Get(context.Background(), r); err != nil || !st.Held || st.Token == 0 {
			t.Errorf("%d %s: %+v, %v", i, r, st, err)
		}
	}
}

func TestPipelineNeverSendsACallWhoseRequestEnded(t *testing.T) {
	b, h, _ := gated(t)
	early := busy(t, b, h)
	ctx, cancel := context.WithCancel(context.Background())
	gone := acquire(b, ctx, "gone")
	waitQueued(t, b, 1)
	kept := acquire(b, context.Background(), "kept")
	waitQueued(t, b, 2)
	cancel()
	if o := <-gone; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the cancelled acquire: %+v, %v; want context.Canceled", o.lease, o.err)
	}
	h.release()
	granted(t, "the two sent first", early, 2)
	granted(t, "the acquire queued beside the cancelled one", kept, 1)
	// The cancelled call is not sent.
	wantSent(t, h, b, "alone p1 p1", "alone 1, pipelines 2, pipelined 2, abandoned 1")
	if st, err := b.Get(context.Background(), "gone"); err != nil || st.Held {
		t.Errorf("the cancelled acquire took effect: %+v, %v", st, err)
	}
}

func TestPipelineKeepsEachCallsOwnOutcome(t *testing.T) {
	b, h, plain := gated(t)
	// A lock key of the wrong type: the acquire script fails on it.
	if err := plain.LPush(context.Background(), "fencesim:{bad}:lock", "x").Err(); err != nil {
		t.Fatal(err)
	}
	early := busy(t, b, h)
	bad := acquire(b, context.Background(), "bad")
	waitQueued(t, b, 1)
	good := acquire(b, context.Background(), "good")
	waitQueued(t, b, 2)
	h.release()
	if o := <-bad; o.err == nil || !strings.Contains(o.err.Error(), "WRONGTYPE") {
		t.Errorf("the acquire over a broken key: %+v, %v; want its own WRONGTYPE error", o.lease, o.err)
	}
	granted(t, "the two sent first", early, 2)
	granted(t, "the acquire pipelined with it", good, 1)
	if got := h.calls(); got != "alone p1 p2" {
		t.Errorf("sends %q, want \"alone p1 p2\"", got)
	}
}

func TestPipelineUnansweredCallsFail(t *testing.T) {
	b, h, _ := gated(t)
	h.fail = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	early := busy(t, b, h)
	h.release()
	first, second := <-early, <-early
	if first.err != nil {
		t.Errorf("the acquire sent alone: %v", first.err)
	}
	if second.err == nil || !strings.Contains(second.err.Error(), "outcome unknown") || !strings.Contains(second.err.Error(), "connection reset") {
		t.Errorf("an acquire whose pipeline got no answer: %+v, %v; want an unknown outcome", second.lease, second.err)
	}
}

func TestPipelineRunsAScriptRedisForgot(t *testing.T) {
	b, h, plain := gated(t)
	// As if a call were out: every call goes to the lane.
	b.pipe.out.Add(1)
	defer b.pipe.out.Add(-1)
	queued := acquire(b, context.Background(), "queued", "beside")
	h.waitSends(t, 1)
	// Redis restarted, or its cache was flushed: EVALSHA answers NOSCRIPT.
	if err := plain.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	h.release()
	granted(t, "an acquire pipelined after the flush", queued, 2)
	if got := h.calls(); !strings.HasPrefix(got, "p") {
		t.Errorf("sends %q: want a pipeline first (then each call again, alone, by EVAL)", got)
	}
}

func TestPipelineClosedSendsCallsAlone(t *testing.T) {
	b, h, _ := gated(t)
	h.release()
	b.Close()
	b.pipe.out.Add(1) // as if a call were out: still alone
	defer b.pipe.out.Add(-1)
	granted(t, "an acquire after Close", acquire(b, context.Background(), "r0"), 1)
	if got := h.calls(); got != "alone" {
		t.Errorf("sends %q, want \"alone\"", got)
	}
}

// wantSent checks the sends that reached Redis and the pipelines'
// /metrics counters.
func wantSent(t *testing.T, h *gateHook, b *Backend, sends, counters string) {
	t.Helper()
	if got := h.calls(); got != sends {
		t.Errorf("sends %q, want %q", got, sends)
	}
	if got := metrics(b); got != counters {
		t.Errorf("/metrics counters: %s, want %s", got, counters)
	}
}

// metrics reads the pipelines' counters through Collectors, as /metrics
// does.
func metrics(b *Backend) string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Collectors()...)
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return err.Error()
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				got[mf.GetName()] = c.GetValue()
			}
		}
	}
	return fmt.Sprintf("alone %v, pipelines %v, pipelined %v, abandoned %v",
		got["fencesim_lockd_redis_calls_alone_total"], got["fencesim_lockd_redis_pipelines_total"],
		got["fencesim_lockd_redis_calls_pipelined_total"], got["fencesim_lockd_redis_calls_abandoned_total"])
}
