package live

import (
	"cmp"
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
	"github.com/fencesim/fencesim/scenario/cycle"
)

// workload runs the scenario's clients and its fault schedule on the
// run's timeline until the safety phase (and the liveness bound, if any)
// is over, then waits for the operations in flight (bounded).
func (r *run) workload(ctx context.Context) {
	r.rec = newRecorder(r.info.Fenced)
	r.base = monoNow()
	r.rec.base = r.base
	end := time.Duration(r.spec.Duration)
	if r.spec.Liveness != nil {
		end += time.Duration(r.spec.Liveness.Bound)
	}
	wctx, cancel := context.WithTimeout(ctx, end)
	defer cancel()
	r.fs = &faultState{paused: map[string]bool{}, crashed: map[string]bool{}, clock: map[string]clockSetting{}}
	r.armTriggers()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.runSchedule(wctx)
	}()
	r.logf("live: workload started (%d clients, %v)", len(r.spec.Clients), end)
	for i, c := range r.spec.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.drive(wctx, i, c)
		}()
	}
	wg.Wait()
	r.rec.end = monoNow() - r.base
	r.mu.Lock()
	armed, fired := len(r.armed.Triggers()), 0
	for _, ev := range r.faults {
		if ev.Planned.When != "" && ev.Planned.Within == 0 {
			fired++
		}
	}
	r.mu.Unlock()
	if armed > 0 {
		r.note("triggers: %d armed, %d fired on their clients' moments, %d never met theirs in their windows (as in the simulator, such a trigger does nothing)", armed, fired, armed-fired)
	}
	r.finishFaults()
}

// drive runs one client's workload: the decisions are the workload's
// machine (scenario/cycle), the same the simulator's clients run — after
// StartDelay, Cycles (0: until the end) of acquire → WritesPerHold
// writes, each after WorkDuration of work → read → release → think. drive
// carries its actions out as blocking commands to the client's process,
// records each in the history and reports the clients' moments to the
// armed triggers. What is live's own is in machineConfig.
func (r *run) drive(ctx context.Context, idx int, c scenario.ClientSpec) {
	cp := r.clients[c.Name]
	m, err := cycle.New(machineConfig(c, rand.New(rand.NewPCG(r.opt.Plan.Seed, uint64(idx)+1))))
	if err != nil {
		r.logf("live: client %s: %v", c.Name, err)
		return
	}
	ttl := time.Duration(c.TTL)
	var token, svc uint64 // the hold's token in the history, the service's
	ev := cycle.Event{Kind: cycle.Start}
	for {
		ev.Now, ev.Over = monoNow(), ctx.Err() != nil
		a := m.Step(ev)
		switch a.Kind {
		case cycle.Wait:
			sleepCtx(ctx, a.D) // cut short, the machine hears the run is over
			ev = cycle.Event{Kind: cycle.Woke}
		case cycle.Acquire:
			r.rec.acquiring()
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpAcquire, Resource: c.Resource, TTLms: ttl.Milliseconds()}, opTimeout+time.Second)
			ev = cycle.Event{Kind: cycle.Refused}
			if tok := r.rec.lock(c.Name, c.Resource, checker.LockAcquire, 0, call, ret, rep, ok); tok != 0 {
				token, svc = tok, rep.Token
				r.notice(ctx, nemesis.MomentGranted, c.Name)
				r.notice(ctx, nemesis.MomentAcquired, c.Name)
				ev = cycle.Event{Kind: cycle.Granted, Call: call}
			}
		case cycle.Renew:
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRenew, Resource: c.Resource, Token: svc, TTLms: ttl.Milliseconds()}, opTimeout+time.Second)
			r.rec.lock(c.Name, c.Resource, checker.LockRenew, token, call, ret, rep, ok)
			ev = cycle.Event{Kind: cycle.RenewRefused, NotHolder: ok && rep.Error == liveclient.ErrorNotHolder}
			if ok && rep.OK {
				r.notice(ctx, nemesis.MomentRenewed, c.Name)
				ev = cycle.Event{Kind: cycle.Renewed, Call: call}
			}
		case cycle.Write:
			// The work runs in the client process, before its write: a
			// pause there is a holder paused between its check and its
			// write.
			val := r.rec.value(c.Name)
			r.notice(ctx, nemesis.MomentWrite, c.Name)
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpWrite, Key: c.Resource, Token: token, Value: val, WorkMs: a.D.Milliseconds()}, a.D+opTimeout+time.Second)
			r.rec.write(c.Name, c.Resource, token, val, call, ret, rep, ok)
			ev = cycle.Event{Kind: cycle.Wrote}
			if ok && rep.Error == liveclient.ErrorStale {
				ev = cycle.Event{Kind: cycle.Fenced}
			}
		case cycle.Read:
			r.notice(ctx, nemesis.MomentRead, c.Name)
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRead, Key: c.Resource}, opTimeout+time.Second)
			r.rec.read(c.Name, c.Resource, call, ret, rep, ok)
			ev = cycle.Event{Kind: cycle.ReadDone}
		case cycle.Release:
			r.rec.disbelieve(c.Name, token, monoNow(), a.Reason)
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRelease, Resource: c.Resource, Token: svc}, opTimeout+time.Second)
			r.rec.lock(c.Name, c.Resource, checker.LockRelease, token, call, ret, rep, ok)
			ev = cycle.Event{Kind: cycle.Released}
		case cycle.Lose:
			r.rec.disbelieve(c.Name, token, monoNow(), a.Reason)
			ev = cycle.Event{Kind: cycle.Lost}
		case cycle.Done:
			return
		default: // Stop and None: no live answer leads there
			r.logf("live: client %s: the workload stopped at %v after %v", c.Name, a, ev.Kind)
			return
		}
	}
}

// machineConfig is c's workload as the live runner runs it (see
// cycle.Config's per-world fields for why each differs from the
// simulator's): the client process tries each acquire once, so a refused
// one is retried after ttl/10 plus up to ttl/4; the think time between
// cycles (the simulator workload's 50 ms) gets up to ttl/4 more, so that a
// client that released does not win the resource back at once every time
// and one that waits is not starved (the liveness phase needs both); both
// jitters are drawn from rng. The harness keeps the lease: it renews
// before a write once the last grant or renewal is ttl/3 old, and its
// watchdog's safe point is that call + TTL·(1−ρ) − 10 ms; it looks ahead
// over the work, which runs in the client process where nothing stops
// it; and a hold that ended early is still read and released.
func machineConfig(c scenario.ClientSpec, rng *rand.Rand) cycle.Config {
	ttl := time.Duration(c.TTL)
	return cycle.Config{
		StartDelay: time.Duration(c.StartDelay), Cycles: c.Cycles, WritesPerHold: c.WritesPerHold,
		WorkDuration: time.Duration(c.WorkDuration), ThinkTime: cmp.Or(time.Duration(c.ThinkTime), thinkTime),
		ThinkJitter: ttl / 4, Backoff: ttl / 10, BackoffJitter: ttl / 4, Rand: rng,
		Renew: ttl / 3, Safe: ttl - ttl*time.Duration(c.DriftBoundPPM)/1_000_000 - watchdogMargin,
		WorkAhead: true, ReleaseAfterLoss: true,
	}
}

// thinkTime is the pause between cycles when the spec's client leaves it
// 0 (workload.Config's default).
const thinkTime = 50 * time.Millisecond

// watchdogMargin is the harness's watchdog's margin below the lease's
// safe point: room for the write to reach the store after the work.
const watchdogMargin = 10 * time.Millisecond

// sleepCtx sleeps d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
