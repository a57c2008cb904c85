// Package workload is the harness's client workload in the simulator:
// cycles of acquire → fenced writes → read → release against the fenced
// store, run over the lock client library (lockclient), which it drives
// through a small API (Acquire, Deadline, Token, Lose, Release, and the
// Handler it implements). The lock client knows nothing of the workload;
// a real application would use it the same way. What to do next is the
// workload's machine's (scenario/cycle), the same one the live runner's
// clients run; this package carries its actions out as process code.
package workload

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/lockclient"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/scenario/cycle"
)

// Config configures a client's workload: the lock client's configuration
// and what the client does with the lock.
type Config struct {
	lockservice.ClientConfig
	Store         process.NodeID // the fenced store
	StartDelay    time.Duration  // before the first acquire
	Cycles        int            // acquire/work/release cycles to run; 0: until the run ends
	WritesPerHold int
	// WorkDuration is the time between the watchdog check that starts a unit
	// of work and the write that ends it: a pause inside it is exactly
	// Kleppmann's stale-holder case.
	WorkDuration time.Duration
	ThinkTime    time.Duration // between cycles
}

// DefaultConfig returns a workload of one cycle, two writes per hold, over
// lockservice.DefaultClientConfig's client (a 1 s lease).
func DefaultConfig(name string, servers []process.NodeID, store process.NodeID, resource string) Config {
	return Config{
		ClientConfig: lockservice.DefaultClientConfig(name, servers, resource),
		Store:        store,
		Cycles:       1, WritesPerHold: 2, WorkDuration: 20 * time.Millisecond, ThinkTime: 50 * time.Millisecond,
	}
}

// Client is a client process running the harness's workload over a
// lockclient.Lock: cycles of acquire → fenced writes → read → release
// against the fenced store, with a pause of WorkDuration before each write
// and ThinkTime between cycles. What to do next is decided by the
// workload's machine (scenario/cycle), which the live runner runs too;
// Client carries its actions out as process code: the Lock acquires,
// renews, runs the watchdog and releases, and Client's timers and messages
// do the waits, the work and the store's operations.
type Client struct {
	cfg  Config
	env  process.Env
	lock *lockclient.Lock
	m    *cycle.Machine
	done bool

	storeReq  uint64
	storeRead bool

	// storeTimer times the outstanding store operation, so a late store
	// reply never cancels a lock request's retry; workTimer the waits and
	// the work.
	storeTimer, workTimer clockwork.Timer

	// The timers' callbacks, bound once.
	wokeFn, sendWriteFn, storeTimedOutFn func()
}

// machineConfig is cfg's workload as the machine runs it in the
// simulator: the Lock keeps the lease (renewals, watchdog, the acquire's
// retries and backoff) and a loss ends the hold at once (see
// cycle.Config's per-world fields).
func machineConfig(cfg Config) cycle.Config {
	return cycle.Config{StartDelay: cfg.StartDelay, Cycles: cfg.Cycles, WritesPerHold: cfg.WritesPerHold,
		WorkDuration: cfg.WorkDuration, ThinkTime: cfg.ThinkTime}
}

// New returns a client process running cfg's workload, its lock requests
// sent through p (a design's ClientProtocol; nil: the reference's
// messages). Every restart needs a new one, and a new Protocol. It panics
// on a Config the workload cannot run (negative counts or durations).
func New(cfg Config, p lockservice.Protocol) *Client {
	if cfg.Observer == nil {
		cfg.Observer = lockservice.NopObserver{}
	}
	m, err := cycle.New(machineConfig(cfg))
	if err != nil {
		panic(fmt.Sprintf("workload: client %s: %v", cfg.Name, err))
	}
	c := &Client{cfg: cfg, m: m}
	c.lock = lockclient.NewLock(cfg.ClientConfig, p, c)
	// A release shed at an ingress bound is sent again, as the shipped
	// HTTP client sends it (lockapi/lockclient): given up, it holds the
	// lock a whole TTL, and a client that thinks long between cycles
	// may see the liveness bound pass before its next release (swarm
	// seed 8803: a bound of 1 and a 2 s think time).
	c.lock.SetOptions(lockclient.Options{RetryOverloadedRelease: true})
	c.wokeFn, c.sendWriteFn, c.storeTimedOutFn = c.woke, c.sendWrite, c.storeTimedOut
	return c
}

// Start starts the Lock and the workload.
func (c *Client) Start(env process.Env) {
	c.env = env
	c.lock.Start(env)
	c.step(cycle.Start)
}

// step hands the machine event k, with the client's clock and the Lock's
// watchdog deadline, and carries out what it answers.
func (c *Client) step(k cycle.EventKind) {
	c.do(c.m.Step(cycle.Event{Kind: k, Now: c.env.Clock().Monotonic(), Until: c.lock.Deadline()}))
}

// do carries out one of the machine's actions.
func (c *Client) do(a cycle.Action) {
	switch a.Kind {
	case cycle.None:
	case cycle.Wait:
		lockclient.Rearm(c.env, &c.workTimer, a.D, c.wokeFn)
	case cycle.Acquire:
		c.lock.Acquire()
	case cycle.Write:
		// The work, then the write: a loss meanwhile (the Lock's watchdog)
		// rearms workTimer for the think time, and the write never goes.
		lockclient.Rearm(c.env, &c.workTimer, a.D, c.sendWriteFn)
	case cycle.Read:
		c.sendRead()
	case cycle.Release:
		c.lock.Release() // the Lock ends the belief ("releasing") itself
	case cycle.Lose:
		if a.Reason == cycle.ReasonWatchdog {
			c.lock.Log("work.abandoned", 0, slog.Uint64("token", c.lock.Token()))
		}
		c.lock.Lose(a.Reason) // the Handler hears Lost
	case cycle.Done:
		c.done = true
		c.lock.Log("client.done", 0)
	case cycle.Stop:
		c.lock.Stop()
		c.stop()
	default:
		// The simulator's machine keeps no lease of its own: it never
		// renews (the Lock does).
		panic(fmt.Sprintf("workload: client %s: action %v", c.cfg.Name, a))
	}
}

// observe reports an event about this client's own operations.
func (c *Client) observe(e lockservice.Event) {
	e.Client, e.Resource = c.cfg.Name, c.cfg.Resource
	c.cfg.Observer.Observe(e)
}

// Done reports whether the client finished its workload.
func (c *Client) Done() bool { return c.done }

// Held reports whether the client believes it holds its lock, whatever
// its clock says since (lockclient.Lock.Held): the nemesis's coverage
// marks ask it of a client it pauses.
func (c *Client) Held() bool { return c.lock.Held() }

// Holding reports whether the client's watchdog still allows using the
// lock.
func (c *Client) Holding() bool { return c.lock.Holding() }

func (c *Client) woke() { c.step(cycle.Woke) }

// Granted starts the work of a hold.
func (c *Client) Granted() { c.step(cycle.Granted) }

// Lost moves on to the next cycle after ThinkTime, without releasing.
func (c *Client) Lost(string) { c.step(cycle.Lost) }

// Released moves on to the next cycle after ThinkTime.
func (c *Client) Released() { c.step(cycle.Released) }

// Failed ends the workload: the service refuses what it asks.
func (c *Client) Failed() { c.step(cycle.Invalid) }

// stop ends the workload: every timer stops.
func (c *Client) stop() {
	lockclient.StopTimer(c.storeTimer)
	lockclient.StopTimer(c.workTimer)
	c.done = true
}

// --- work against the fenced store ---

func (c *Client) sendWrite() {
	c.storeReq = c.lock.NewRequest()
	c.storeRead = false
	token := c.lock.Token()
	value := int64(c.env.ID())<<48 | int64(c.storeReq&(1<<48-1))
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpWrite, Request: c.storeReq, Token: token, Value: value})
	c.env.Send(c.cfg.Store, lockservice.WriteRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Token: token, Value: value, Request: c.storeReq})
	c.lock.Log("write.sent", c.storeReq, slog.Uint64("token", token), slog.Int64("value", value))
	lockclient.Rearm(c.env, &c.storeTimer, c.cfg.RequestTimeout, c.storeTimedOutFn)
}

func (c *Client) sendRead() {
	c.storeReq = c.lock.NewRequest()
	c.storeRead = true
	c.observe(lockservice.Event{Kind: lockservice.EvCall, Op: lockservice.OpRead, Request: c.storeReq})
	c.env.Send(c.cfg.Store, lockservice.ReadRequest{Resource: c.cfg.Resource, Client: c.cfg.Name, Request: c.storeReq})
	c.lock.Log("read.sent", c.storeReq)
	lockclient.Rearm(c.env, &c.storeTimer, c.cfg.RequestTimeout, c.storeTimedOutFn)
}

// storeTimedOut gives up on the outstanding store operation: its outcome is
// unknown (the checker treats it as either) and the client moves on.
func (c *Client) storeTimedOut() {
	c.lock.Log("store.timeout", c.storeReq)
	c.storeReq = 0
	if c.storeRead {
		c.step(cycle.ReadDone)
		return
	}
	c.step(cycle.Wrote)
}

func (c *Client) onWriteReply(m lockservice.WriteReply) {
	if m.Request != c.storeReq || c.storeRead {
		return
	}
	lockclient.StopTimer(c.storeTimer)
	c.storeReq = 0
	if m.Err != "" {
		c.lock.Log("write.invalid", m.Request, slog.String("err", m.Err))
		c.step(cycle.WriteInvalid)
		return
	}
	token := c.lock.Token()
	c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpWrite, Request: m.Request, Token: token, Accepted: m.Accepted})
	c.lock.Log("write.reply", m.Request, slog.Uint64("token", token), slog.Bool("accepted", m.Accepted), slog.Uint64("highest", m.Highest))
	if !m.Accepted {
		// The store has seen a newer token: someone else holds the lock.
		c.step(cycle.Fenced)
		return
	}
	c.step(cycle.Wrote)
}

func (c *Client) onReadReply(m lockservice.ReadReply) {
	if m.Request != c.storeReq || !c.storeRead {
		return
	}
	lockclient.StopTimer(c.storeTimer)
	c.storeReq = 0
	if m.Err == "" {
		c.observe(lockservice.Event{Kind: lockservice.EvReturn, Op: lockservice.OpRead, Request: m.Request, Value: m.Value, Token: m.Token})
	}
	c.lock.Log("read.reply", m.Request, slog.Int64("value", m.Value), slog.Uint64("token", m.Token))
	c.step(cycle.ReadDone)
}

// Receive offers msg to the Lock (the protocol's messages, the lock
// service's replies), and takes the store's replies.
func (c *Client) Receive(_ process.Env, from process.NodeID, msg process.Message) {
	if c.lock.Receive(from, msg) {
		return
	}
	switch m := msg.(type) {
	case lockservice.WriteReply:
		c.onWriteReply(m)
	case lockservice.ReadReply:
		c.onReadReply(m)
	}
}
