package lockd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Pipelining. Every lock operation is one script call, and a call on a
// connection of its own costs Redis a read and a write system call and an
// event-loop wake-up, and this process as many again: at 64 requests in
// flight on a 2-core machine that is most of what a script costs. So the
// backend gathers the calls its requests make at the same time into
// pipelines (as rueidis does): a call made while no other is out goes
// alone, at once; the others queue for a few lanes, each sending every
// call that queued while its last pipeline was out, in one write, and
// reading the replies in one read. Redis runs a pipeline's calls in order
// in one event-loop pass and, with appendfsync always, persists them with
// one fsync before it replies, so a call is as durable as alone.
//
// A call keeps its own outcome: a script's error is its own, a lost
// connection fails every call of that pipeline as it would fail each alone
// (outcome unknown: the script may have run), and a call whose request
// ended before a lane took it is never sent. A pipeline is bounded by the
// client's read and write timeouts, not by any one request's context.

// The lanes by default, the most calls one pipeline carries, and the
// most that may wait for a lane.
const (
	defaultPipelines = 4
	maxPipelined     = 128
	pipelineQueue    = 1024 // calls queued beyond it are shed as overload
)

var (
	// errPipelineFull: more calls queued than pipelineQueue; shed as overload.
	errPipelineFull = errors.New("lockd: the Redis pipeline queue is full")
	// errPipelineClosed: the backend was closed.
	errPipelineClosed = errors.New("lockd: the backend is closed")
)

// pipelineCall is one script call waiting for a lane.
type pipelineCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd    // the reply, set by the lane before done closes
	done   chan struct{} // closed once cmd is set
}

// pipeliner is the lanes and their queue.
type pipeliner struct {
	rdb    redis.UniversalClient
	calls  chan *pipelineCall
	stop   chan struct{}
	out    atomic.Int32 // calls made and not yet answered
	closed atomic.Bool
	// What was sent (the /metrics counters): calls sent alone,
	// pipelines, the calls they carried, and calls never sent because
	// their request ended while they queued.
	alone, pipelines, pipelined, abandoned atomic.Uint64
	once                                   sync.Once
	wg                                     sync.WaitGroup
}

func newPipeliner(rdb redis.UniversalClient, lanes int) *pipeliner {
	p := &pipeliner{rdb: rdb, calls: make(chan *pipelineCall, pipelineQueue), stop: make(chan struct{})}
	for range lanes {
		p.wg.Go(p.lane)
	}
	return p
}

// run queues a call and waits for its reply or for ctx to end (then the
// call is not sent if no lane took it yet, or its reply is dropped).
func (p *pipeliner) run(ctx context.Context, s *redis.Script, keys []string, args []any) *redis.Cmd {
	// Alone, a call goes at once on a connection of its own: a lane's
	// hand-offs would only add to its latency. So does every call once
	// the lanes are closed.
	defer p.out.Add(-1)
	if p.out.Add(1) == 1 || p.closed.Load() {
		p.alone.Add(1)
		return s.Run(ctx, p.rdb, keys, args...)
	}
	c := &pipelineCall{ctx: ctx, script: s, keys: keys, args: args, done: make(chan struct{})}
	select {
	case p.calls <- c:
	default:
		return failed(ctx, errPipelineFull)
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		return failed(ctx, ctx.Err())
	case <-p.stop:
		// A lane may be sending it: its outcome is unknown.
		return failed(ctx, errPipelineClosed)
	}
}

// failed is a reply carrying err.
func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// lane sends pipelines until close: it waits for one call, takes every
// other queued (up to maxPipelined) and sends them together.
func (p *pipeliner) lane() {
	batch := make([]*pipelineCall, 0, maxPipelined)
	for {
		select {
		case <-p.stop:
			return
		case c := <-p.calls:
			batch = append(batch[:0], c)
		}
	gather:
		for len(batch) < maxPipelined {
			select {
			case c := <-p.calls:
				batch = append(batch, c)
			default:
				break gather
			}
		}
		p.send(batch)
		clear(batch)
	}
}

// send runs one pipeline of the calls whose requests still wait, and
// hands each its reply. A script Redis does not know (NOSCRIPT: Redis
// restarted, or its script cache was flushed) did not run; it is run
// again alone, by EVAL, which also loads it.
func (p *pipeliner) send(batch []*pipelineCall) {
	pipe := p.rdb.Pipeline()
	sent := batch[:0] // the calls sent, in batch's own array
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd = failed(c.ctx, err)
			close(c.done)
			p.abandoned.Add(1)
			continue
		}
		c.cmd = c.script.EvalSha(context.WithoutCancel(c.ctx), pipe, c.keys, c.args...)
		sent = append(sent, c)
	}
	if len(sent) == 0 {
		return
	}
	p.pipelines.Add(1)
	p.pipelined.Add(uint64(len(sent)))
	// The commands carry their own errors; Exec's is the first of them,
	// or a failure no command recorded (a hook's), which is then every
	// unanswered command's: a call never passes for answered with nothing.
	_, perr := pipe.Exec(context.Background())
	for _, c := range sent {
		err := c.cmd.Err()
		if err == nil && c.cmd.Val() == nil && perr != nil {
			c.cmd.SetErr(perr)
		}
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			c.cmd = c.script.Run(context.WithoutCancel(c.ctx), p.rdb, c.keys, c.args...)
		}
		close(c.done)
	}
}

// close stops the lanes once their pipelines are out: calls still queued
// fail (outcome unknown: a lane may have taken them), and later ones go
// alone.
func (p *pipeliner) close() {
	p.closed.Store(true)
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}

// collectors are the pipelines' /metrics counters.
func (p *pipeliner) collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fencesim_lockd_redis_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("calls_alone_total", "Script calls sent alone, on a connection of their own (no other call was out).", &p.alone),
		counter("pipelines_total", "Pipelines of script calls sent (FENCESIM_REDIS_PIPELINES).", &p.pipelines),
		counter("calls_pipelined_total", "Script calls sent in pipelines; divided by fencesim_lockd_redis_pipelines_total, the calls a pipeline carried.", &p.pipelined),
		counter("calls_abandoned_total", "Script calls never sent: their request ended while they queued for a pipeline.", &p.abandoned),
	}
}
