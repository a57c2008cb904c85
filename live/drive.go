package live

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/nemesis"
	"github.com/fencesim/fencesim/scenario"
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

// drive is one client's workload, as scenarios/workload runs it in the
// simulator: after StartDelay, Cycles (0: until the end) of acquire →
// WritesPerHold writes, each after WorkDuration of work → read → release.
// Like the simulator's lock client it renews every TTL/3 and stops
// writing once its lease may be gone (the watchdog: the last grant or
// renewal's call + TTL·(1−ρ) − margin), or once the store fenced it out.
func (r *run) drive(ctx context.Context, idx int, c scenario.ClientSpec) {
	cp := r.clients[c.Name]
	rng := rand.New(rand.NewPCG(r.opt.Plan.Seed, uint64(idx)+1))
	if !sleepCtx(ctx, time.Duration(c.StartDelay)) {
		return
	}
	ttl := time.Duration(c.TTL)
	safe := ttl - ttl*time.Duration(c.DriftBoundPPM)/1_000_000 - 10*time.Millisecond
	work := time.Duration(c.WorkDuration)
	for cycle := 0; c.Cycles == 0 || cycle < c.Cycles; cycle++ {
		// Acquire, retrying on busy and on no answer.
		var token, svc uint64  // the history's token, the service's
		var from time.Duration // call of the grant or last renewal
		for token == 0 {
			if ctx.Err() != nil {
				return
			}
			r.rec.acquiring()
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpAcquire, Resource: c.Resource, TTLms: ttl.Milliseconds()}, opTimeout+time.Second)
			if tok := r.rec.lock(c.Name, c.Resource, checker.LockAcquire, 0, call, ret, rep, ok); tok != 0 {
				token, svc, from = tok, rep.Token, call
				r.notice(ctx, nemesis.MomentGranted, c.Name)
				r.notice(ctx, nemesis.MomentAcquired, c.Name)
				break
			}
			backoff := ttl/10 + time.Duration(rng.Int64N(int64(ttl/4)+1))
			if !sleepCtx(ctx, backoff) {
				return
			}
		}
		reason := "releasing"
		held := true
	writes:
		for w := 0; w < c.WritesPerHold; w++ {
			if ctx.Err() != nil {
				reason = "run-ended"
				break
			}
			now := monoNow()
			if now-from > ttl/3 {
				rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRenew, Resource: c.Resource, Token: svc, TTLms: ttl.Milliseconds()}, opTimeout+time.Second)
				r.rec.lock(c.Name, c.Resource, checker.LockRenew, token, call, ret, rep, ok)
				if !ok || !rep.OK {
					reason, held = "renew-refused", !(ok && rep.Error == liveclient.ErrorNotHolder)
					break writes
				}
				from = call
				r.notice(ctx, nemesis.MomentRenewed, c.Name)
				now = monoNow()
			}
			if now+work > from+safe {
				reason = "watchdog"
				break
			}
			val := r.rec.value(c.Name)
			r.notice(ctx, nemesis.MomentWrite, c.Name)
			rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpWrite, Key: c.Resource, Token: token, Value: val, WorkMs: work.Milliseconds()}, work+opTimeout+time.Second)
			r.rec.write(c.Name, c.Resource, token, val, call, ret, rep, ok)
			if ok && rep.Error == liveclient.ErrorStale {
				reason = "fenced-out"
				break
			}
		}
		r.notice(ctx, nemesis.MomentRead, c.Name)
		rep, call, ret, ok := cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRead, Key: c.Resource}, opTimeout+time.Second)
		r.rec.read(c.Name, c.Resource, call, ret, rep, ok)
		r.rec.disbelieve(c.Name, token, monoNow(), reason)
		if held {
			rep, call, ret, ok = cp.call(r.ctx, liveclient.Command{Op: liveclient.OpRelease, Resource: c.Resource, Token: svc}, opTimeout+time.Second)
			r.rec.lock(c.Name, c.Resource, checker.LockRelease, token, call, ret, rep, ok)
		}
		// Think time between cycles, as the simulator's workload has
		// (50 ms), jittered like a busy retry: a client that released
		// does not win the resource back at once every time, so one
		// that waits is not starved (the liveness phase needs both).
		if !sleepCtx(ctx, thinkTime+time.Duration(rng.Int64N(int64(ttl/4)+1))) {
			return
		}
	}
}

// thinkTime is the pause between cycles (workload.Config's default).
const thinkTime = 50 * time.Millisecond

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
