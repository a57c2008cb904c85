package live

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fencesim/fencesim/nemesis"
)

// faultState is what the schedule has done and must undo at the end.
type faultState struct {
	timers []*time.Timer
	paused map[string]bool
	// pauseEnd is when a paused node's pause ends (monoNow).
	pauseEnd map[string]time.Duration
	crashed  map[string]bool
	clock    map[string]clockSetting
}

type clockSetting struct {
	OffsetMs int64 `json:"offset_ms"`
	DriftPPM int64 `json:"drift_ppm"`
}

// runSchedule carries out the plan's schedule (fixed roles bound to the
// scenario's node names, which resolve to the run's processes) at its
// offsets from the start of the workload. A live run reproduces the
// schedule, not the timing: each operation fires at its offset as the
// machine's clock measures it, and what the processes were doing then is
// the machine's. The triggers are armed (armTriggers) and fire when the
// clients report their moments (notice).
func (r *run) runSchedule(ctx context.Context) {
	ops, _ := liveOps(append(r.opt.Plan.Installed(), r.opt.TargetFaults...), func(op nemesis.Op) bool { return r.notApplicable(op) != "" })
	// Waiting for a leader to emerge (an election under way when an
	// @leader fault is due) delays the operations after it by as much
	// (see firesAt); only this goroutine's @leader resolutions count, not
	// a trigger's on a client's moment.
	var slip time.Duration
	nem := liveNemesis{r, context.WithValue(ctx, leaderWaitKey{}, &slip)}
	end := time.Duration(r.spec.Duration)
	for _, op := range ops {
		if !sleepCtx(ctx, r.base+firesAt(time.Duration(op.At), slip, end)-monoNow()) {
			return
		}
		nem.Apply(op)
	}
}

// firesAt is when an operation planned at `at` is carried out after the
// schedule slipped by slip waiting for leaders: as much later, so the
// schedule keeps its shape (a restart of the crashed leader still comes
// its planned time after the crash), but never past the end of the
// safety phase, and the final heal (at the end) on time — the liveness
// phase's bound counts from the heal, and the workload ends at the end
// plus the bound, whatever slipped.
func firesAt(at, slip, end time.Duration) time.Duration {
	if at >= end {
		return at
	}
	return min(at+slip, end)
}

// leaderWaitKey is the context key of the schedule's slip (a
// *time.Duration): an @leader resolution adds how long it waited for a
// leader to it.
type leaderWaitKey struct{}

// leaderWait bounds how long an @leader fault waits for a leader to
// emerge: an election (the reference's timeout is 1 s, randomized up to
// twice that; etcd's similar) after a leader crash the schedule made.
const leaderWait = 5 * time.Second

// armTriggers arms the schedule's triggers this target can carry out
// (nemesis.Armed, the matching the simulator uses) and records the others
// as not applicable: a moment no live client reports, or a fault the
// target cannot carry out on the node the moment is about.
func (r *run) armTriggers() {
	_, triggers := liveOps(append(r.opt.Plan.Installed(), r.opt.TargetFaults...), nil)
	var armed nemesis.Schedule
	for _, op := range triggers {
		if why := r.triggerNotApplicable(op); why != "" {
			r.recordNA(op, why)
			continue
		}
		armed = append(armed, op)
	}
	r.mu.Lock()
	r.armed = nemesis.Arm(armed)
	r.mu.Unlock()
}

// clientMoments are the moments a live run observes: its clients report
// them to the harness, which drives them. A grant is seen when the
// client learns of it (its reply), so granted fires with acquired, a
// reply's transit later than the service decided it.
var clientMoments = []nemesis.MomentKind{nemesis.MomentGranted, nemesis.MomentAcquired, nemesis.MomentWrite, nemesis.MomentRead, nemesis.MomentRenewed}

// triggerNotApplicable says why a trigger cannot be carried out on this
// run's target at all ("" if it can): its moment is one no client
// reports, or its fault is not applicable on the client its moment is
// about (any client stands for the subject: they are alike).
func (r *run) triggerNotApplicable(op nemesis.Op) string {
	if !slices.Contains(clientMoments, op.When) {
		return fmt.Sprintf("target %s does not report %s moments (a live run sees its clients' moments: %v)", r.info.Name, op.When, clientMoments)
	}
	op.When, op.Within, op.After = "", 0, 0
	if op.Node == nemesis.Subject {
		if len(r.spec.Clients) == 0 {
			return "no client"
		}
		op.Node = r.spec.Clients[0].Name
	}
	return r.notApplicable(op)
}

// notice tells the armed triggers of a client's moment, now: each that
// fires is carried out After later (at once if 0: before the client's
// next step, so a pause on a write lands before the write leaves), with
// the undo liveOps gives it (a restart after a crash, a heal after an
// isolation). The fault's event carries the moment in Planned.When.
func (r *run) notice(ctx context.Context, kind nemesis.MomentKind, client string) {
	r.mu.Lock()
	fired := r.armed.Notice(monoNow()-r.base, nemesis.Moment{Kind: kind, Subject: client})
	r.mu.Unlock()
	for _, op := range fired {
		if d := time.Duration(op.At) - (monoNow() - r.base); d > 0 {
			r.after(d, func() { r.fire(ctx, op, kind) })
			continue
		}
		r.fire(ctx, op, kind)
	}
}

// fire carries out a fired trigger now and schedules its undo.
func (r *run) fire(ctx context.Context, op nemesis.Op, kind nemesis.MomentKind) {
	if ctx.Err() != nil {
		return
	}
	ops, _ := liveOps(nemesis.Schedule{op}, func(op nemesis.Op) bool { return r.notApplicable(op) != "" })
	for i, o := range ops {
		if i == 0 {
			o.When = kind // for the record: carried out on this moment
			r.apply(ctx, o)
			continue
		}
		due := r.base + time.Duration(o.At) - monoNow()
		if due <= 0 {
			// Carrying the fault out took longer than it lasts (a crash of
			// the store fetches its apply log first): undo it now, never
			// not at all.
			r.apply(ctx, o)
			continue
		}
		r.after(due, func() {
			if ctx.Err() == nil {
				r.apply(ctx, o)
			}
		})
	}
}

// liveOps returns the schedule a live run carries out, time-sorted, and the
// triggers it cannot (nemesis/trigger.go: they fire at moments only the
// simulator observes). A crash or isolation with a duration undoes itself
// in the simulator; here it is followed by the operation that undoes it:
// a restart of the node (of every crashed node, for @leader), and a heal
// (which reopens every link, not only the isolated node's). An operation
// na reports not applicable gets no undo: there is nothing to undo.
func liveOps(s nemesis.Schedule, na func(nemesis.Op) bool) (ops, triggers nemesis.Schedule) {
	for _, op := range s {
		if op.When != "" {
			triggers = append(triggers, op)
			continue
		}
		ops = append(ops, op)
		if op.Duration <= 0 || na != nil && na(op) {
			continue
		}
		end := op.At + op.Duration
		switch op.Kind {
		case nemesis.Crash:
			node := op.Node
			if node == nemesis.Leader {
				node = nemesis.Crashed
			}
			ops = append(ops, nemesis.Op{At: end, Kind: nemesis.Restart, Node: node})
		case nemesis.Isolate:
			ops = append(ops, nemesis.Op{At: end, Kind: nemesis.Heal})
		}
	}
	return ops.Sorted(), triggers
}

// record adds a fault event at the present instant: done, or skipped
// for the reason given.
func (r *run) record(op nemesis.Op, node, skipped string) {
	r.recordAt(FaultEvent{Planned: op, At: monoNow() - r.base, Node: node, Skipped: skipped})
}

// recordNA adds a fault event the target cannot carry out at all.
func (r *run) recordNA(op nemesis.Op, why string) {
	r.recordAt(FaultEvent{Planned: op, At: monoNow() - r.base, Skipped: why, Outcome: FaultNotApplicable})
}

func (r *run) recordAt(ev FaultEvent) {
	if ev.Outcome == "" {
		ev.Outcome = FaultDone
		if ev.Skipped != "" {
			ev.Outcome = FaultSkipped
		}
	}
	// The final heal (nemesis.HealAll, at the end of the safety phase
	// of a scenario with a liveness phase: no scripted fault is that
	// late) undoes what the schedule did; it is no fault of its own, so
	// it is not counted, and an undo with nothing to undo is not listed.
	if r.spec.Liveness != nil && time.Duration(ev.Planned.At) == time.Duration(r.spec.Duration) {
		if ev.Outcome != FaultDone {
			return
		}
		ev.FinalHeal = true
	}
	r.mu.Lock()
	r.faults = append(r.faults, ev)
	r.mu.Unlock()
	r.logf("live: fault %s", ev)
}

// resolve maps a schedule's node name to the run's process: the
// scenario's n-th service node to the layout's n-th replica, the store,
// a client, or a layout server named directly or as @name. @leader asks
// the target.
func (r *run) resolve(ctx context.Context, name string) (string, string) {
	if name == nemesis.Leader {
		if r.layout.Leader == nil {
			return "", "the target has no leader"
		}
		// An election may be under way (the schedule crashed the last
		// leader moments ago): ask until one leads, within leaderWait.
		lctx, cancel := context.WithTimeout(ctx, leaderWait)
		defer cancel()
		begin := monoNow()
		defer func() { // the schedule's slip, if the schedule asked
			if slip, ok := ctx.Value(leaderWaitKey{}).(*time.Duration); ok {
				*slip += monoNow() - begin
			}
		}()
		for {
			if n, ok := r.layout.Leader(lctx); ok {
				return n, ""
			}
			if !sleepCtx(lctx, 50*time.Millisecond) {
				return "", fmt.Sprintf("no server led within %v", leaderWait)
			}
		}
	}
	return r.resolveFixed(name)
}

// resolveFixed is resolve for every name but @leader.
func (r *run) resolveFixed(name string) (string, string) {
	if name == "store" || name == nemesis.StoreNode || r.isClient(name) {
		return strings.TrimPrefix(name, "@"), ""
	}
	if i := slices.Index(r.opt.Plan.Cluster().Servers, name); i >= 0 {
		if i < len(r.replicas) {
			return r.replicas[i], ""
		}
		return "", fmt.Sprintf("the target has %d replicas, the scenario's %s is its %d-th service node", len(r.replicas), name, i+1)
	}
	if _, ok := r.servers[strings.TrimPrefix(name, "@")]; ok {
		return strings.TrimPrefix(name, "@"), ""
	}
	return "", fmt.Sprintf("no process is called %q", name)
}

// after runs f in d; a d ≤ 0 runs nothing (a fault of no duration
// stays until the final heal): a caller that must undo late undoes at
// once itself (fire).
func (r *run) after(d time.Duration, f func()) {
	if d <= 0 {
		return
	}
	r.mu.Lock()
	r.fs.timers = append(r.fs.timers, time.AfterFunc(d, f))
	r.mu.Unlock()
}

// liveNemesis is the live runner's nemesis.Nemesis: it carries fault
// operations out on the run's processes and links, bounded by ctx.
type liveNemesis struct {
	r   *run
	ctx context.Context
}

func (n liveNemesis) Apply(op nemesis.Op)          { n.r.apply(n.ctx, op) }
func (liveNemesis) Implements(k nemesis.Kind) bool { return liveFaults[k] != nil }
func (liveNemesis) Cannot(k nemesis.Kind) string   { return liveCannot[k] }

// liveCannot are the fault kinds no live target can take, and why.
var liveCannot = map[nemesis.Kind]string{
	nemesis.Duplicate: "a TCP stream neither duplicates nor reorders bytes",
	nemesis.Reorder:   "a TCP stream neither duplicates nor reorders bytes",
}

// liveFaults carries out each fault kind a live run can, the way the
// anchors do it for real (docs/live.md): SIGSTOP/SIGCONT, SIGKILL and a
// restart on the same data directory, the harness's link proxies, and the
// services' test endpoints for clocks and disks. Whether the target takes
// op at all was checked (notApplicable); each records what it did.
var liveFaults = map[nemesis.Kind]func(r *run, ctx context.Context, op nemesis.Op){
	nemesis.Heal: func(r *run, _ context.Context, op nemesis.Op) {
		r.links.heal()
		r.record(op, "", "")
	},
	nemesis.Loss: func(r *run, _ context.Context, op nemesis.Op) {
		r.links.netFault(netFault{end: endOf(op), loss: op.Probability}, false)
		r.after(time.Duration(op.Duration), func() { r.links.expire(time.Now()) })
		r.record(op, "", "")
	},
	nemesis.Delay: func(r *run, _ context.Context, op nemesis.Op) {
		r.links.netFault(netFault{end: endOf(op), delay: time.Duration(op.Delay), delayMean: time.Duration(op.Mean)}, false)
		r.after(time.Duration(op.Duration), func() { r.links.expire(time.Now()) })
		r.record(op, "", "")
	},
	nemesis.NetworkReset: func(r *run, _ context.Context, op nemesis.Op) {
		r.links.netFault(netFault{}, true)
		r.record(op, "", "")
	},
	nemesis.Partition: func(r *run, ctx context.Context, op nemesis.Op) {
		var group []string
		for _, g := range op.Group {
			n, why := r.resolve(ctx, g)
			if why != "" {
				r.record(op, "", why)
				return
			}
			group = append(group, n)
		}
		r.links.cut(func(n string) bool { return slices.Contains(group, n) })
		r.record(op, strings.Join(group, ","), "")
	},
	nemesis.Restart: func(r *run, ctx context.Context, op nemesis.Op) {
		if op.Node != nemesis.Crashed {
			if node, ok := r.node(ctx, op, false); ok {
				r.restart(ctx, op, node)
			}
			return
		}
		r.mu.Lock()
		var names []string
		for n := range r.fs.crashed {
			names = append(names, n)
		}
		r.mu.Unlock()
		slices.Sort(names)
		if len(names) == 0 {
			r.record(op, "", "nothing is crashed")
		}
		for _, n := range names {
			r.restart(ctx, op, n)
		}
	},
	nemesis.Pause: func(r *run, ctx context.Context, op nemesis.Op) {
		node, ok := r.node(ctx, op, true)
		if !ok {
			return
		}
		p, _ := r.proc(node)
		if err := p.pause(); err != nil {
			r.record(op, node, err.Error())
			return
		}
		end := r.pauseUntil(node, monoNow()+time.Duration(op.Duration))
		r.after(end-monoNow(), func() {
			if r.unpause(node, end) {
				p.resume()
			}
		})
		r.record(op, node, "")
	},
	nemesis.Crash: func(r *run, ctx context.Context, op nemesis.Op) {
		node, ok := r.node(ctx, op, true)
		if !ok {
			return
		}
		p, _ := r.proc(node)
		if !p.alive() {
			r.record(op, node, "not running")
			return
		}
		if node == "store" {
			// What the store decided so far, before it is gone, with its
			// links hushed so that no answer leaves it unrecorded (see
			// linkSet.hush).
			r.links.hush(node, true)
			r.applies.fetch(ctx)
		}
		p.kill()
		if node == "store" {
			r.applies.crashed()
			r.links.hush(node, false)
		}
		r.mu.Lock()
		r.fs.crashed[node] = true
		delete(r.fs.paused, node)
		delete(r.fs.pauseEnd, node)
		r.mu.Unlock()
		if op.Mode == "torn" {
			r.note("crash of %s at %v: a real crash loses what was not synced; a torn write is not injected", node, time.Duration(op.At))
		}
		r.record(op, node, "")
	},
	nemesis.Isolate: func(r *run, ctx context.Context, op nemesis.Op) {
		if node, ok := r.node(ctx, op, false); ok {
			r.links.cut(func(n string) bool { return n == node })
			r.record(op, node, "")
		}
	},
	nemesis.Block: func(r *run, ctx context.Context, op nemesis.Op) {
		node, ok := r.node(ctx, op, false)
		if !ok {
			return
		}
		to, why := r.resolve(ctx, op.To)
		if why != "" {
			r.record(op, node, why)
			return
		}
		r.links.block(node, to, true)
		r.record(op, node+"→"+to, "")
	},
	nemesis.Drift:      clockFault,
	nemesis.Jump:       clockFault,
	nemesis.ClockReset: clockFault,
	nemesis.SlowDisk: func(r *run, ctx context.Context, op nemesis.Op) {
		node, ok := r.node(ctx, op, true)
		if !ok {
			return
		}
		url, why := r.testURL(node, r.info.DiskFaults)
		if why != "" {
			r.record(op, node, why)
			return
		}
		if err := postJSON(ctx, url+"/test/disk", map[string]int64{"sync_delay_ms": time.Duration(op.Delay).Milliseconds()}); err != nil {
			r.record(op, node, err.Error())
			return
		}
		r.after(time.Duration(op.Duration), func() {
			postJSON(context.Background(), url+"/test/disk", map[string]int64{"sync_delay_ms": 0})
		})
		r.record(op, node, "")
	},
}

func clockFault(r *run, ctx context.Context, op nemesis.Op) {
	if node, ok := r.node(ctx, op, true); ok {
		r.clockFault(op, node)
	}
}

// apply carries out one operation and records what it did.
func (r *run) apply(ctx context.Context, op nemesis.Op) {
	if why := r.notApplicable(op); why != "" {
		r.recordNA(op, why)
		return
	}
	do := liveFaults[op.Kind]
	if do == nil { // TestLiveCoversEveryKind keeps this from happening
		r.record(op, "", "not a fault kind the live runner knows")
		return
	}
	do(r, ctx, op)
}

// node resolves op's node now, recording the operation skipped if it
// resolves to nothing. With ready, a process restarted by the schedule
// takes the fault once it is ready again, as a fresh one does.
func (r *run) node(ctx context.Context, op nemesis.Op, ready bool) (string, bool) {
	node, why := r.resolve(ctx, op.Node)
	if why != "" {
		r.record(op, "", why)
		return "", false
	}
	if ready {
		if p, ok := r.proc(node); ok && !p.awaitReady(ctx, r.opt.StartTimeout) {
			r.record(op, node, "not ready again after its restart")
			return "", false
		}
	}
	return node, true
}

func endOf(op nemesis.Op) time.Time {
	if op.Duration == 0 {
		return time.Now().Add(24 * time.Hour)
	}
	return time.Now().Add(time.Duration(op.Duration))
}

// pauseUntil records that node, just paused, stays paused until end (on
// the monotonic clock) or later, and returns when its pause ends: a
// pause of a paused node extends its pause but never shortens it, as in
// the simulator (sim.World.Pause). A later, shorter pause used to resume
// the node when it ended, cutting a longer one short (a holder paused at
// its write past its lease woke within it).
func (r *run) pauseUntil(node string, end time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fs.pauseEnd == nil {
		r.fs.pauseEnd = map[string]time.Duration{}
	}
	end = max(end, r.fs.pauseEnd[node])
	r.fs.paused[node], r.fs.pauseEnd[node] = true, end
	return end
}

// unpause ends node's pause if it is the one ending at end, and reports
// whether it did: the timer of a pause that a longer one extended, or of
// a node crashed since, does nothing.
func (r *run) unpause(node string, end time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fs.paused[node] || r.fs.pauseEnd[node] != end {
		return false
	}
	delete(r.fs.paused, node)
	delete(r.fs.pauseEnd, node)
	return true
}

// restart starts a crashed process again on its data directory. It is
// done once the process is ready again (its ready check passes, checked
// in the background so that the schedule goes on): a server that never
// becomes ready, or exits first, is a restart skipped, with the reason.
func (r *run) restart(ctx context.Context, op nemesis.Op, node string) {
	p, _ := r.proc(node)
	if p.alive() {
		r.record(op, node, "not crashed")
		return
	}
	at := monoNow() - r.base
	var err error
	if c := r.clients[node]; c != nil {
		err = c.launch()
	} else {
		err = p.start(nil, nil)
	}
	if err != nil {
		r.record(op, node, err.Error())
		return
	}
	r.mu.Lock()
	delete(r.fs.crashed, node)
	r.pids = append(r.pids, p.pgid())
	r.mu.Unlock()
	check := r.readyCheck(node)
	if check == nil { // a client: ready once launched
		p.markReady()
		r.recordAt(FaultEvent{Planned: op, At: at, Node: node})
		return
	}
	r.readyWG.Add(1)
	go func() {
		defer r.readyWG.Done()
		// The run's context, not the workload's: a restart late in the
		// workload is still waited for (bounded), not cut at its end.
		sctx, cancel := context.WithTimeout(r.ctx, r.opt.StartTimeout)
		defer cancel()
		err := p.waitReady(sctx, check)
		p.markReady()
		ev := FaultEvent{Planned: op, At: at, Node: node}
		if node == "store" {
			r.rec.storeRestarted(at + r.base)
		}
		if err != nil {
			ev.Skipped = "restarted, but not ready again: " + firstLine(err.Error())
		}
		ev.ReadyAt = monoNow() - r.base
		r.recordAt(ev)
	}()
}

// readyCheck is the ready check of the store or a server (nil: a client).
func (r *run) readyCheck(node string) func(context.Context) error {
	if node == "store" {
		return httpReady(r.storeURL + "/readyz")
	}
	s, ok := r.srvSpec[node]
	if !ok {
		return nil
	}
	if s.Ready != nil {
		return s.Ready
	}
	return httpReady(s.ReadyURL)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// testURL is the base URL of node's test hooks, or why there is none.
func (r *run) testURL(node string, targetTakes bool) (string, string) {
	if node == "store" {
		return r.storeURL, ""
	}
	if r.isClient(node) {
		return "", "a client's clock and disk are the harness's"
	}
	s := r.srvSpec[node]
	if !targetTakes || s.TestURL == "" {
		return "", "target " + r.info.Name + " takes no such fault on " + node
	}
	return s.TestURL, ""
}

// clockFault sets node's clock through POST /test/clock, and undoes it
// after the operation's duration.
func (r *run) clockFault(op nemesis.Op, node string) {
	url, why := r.testURL(node, r.info.ClockFaults)
	if why != "" {
		r.record(op, node, why)
		return
	}
	set := func(f func(*clockSetting)) error {
		r.mu.Lock()
		c := r.fs.clock[node]
		f(&c)
		r.fs.clock[node] = c
		r.mu.Unlock()
		return postJSON(context.Background(), url+"/test/clock", c)
	}
	var err error
	switch op.Kind {
	case nemesis.Drift:
		err = set(func(c *clockSetting) { c.DriftPPM = op.PPM })
		r.after(time.Duration(op.Duration), func() { set(func(c *clockSetting) { c.DriftPPM = 0 }) })
	case nemesis.Jump:
		by := time.Duration(op.By).Milliseconds()
		err = set(func(c *clockSetting) { c.OffsetMs += by })
		r.after(time.Duration(op.Duration), func() { set(func(c *clockSetting) { c.OffsetMs -= by }) })
	case nemesis.ClockReset:
		err = set(func(c *clockSetting) { *c = clockSetting{} })
	}
	skipped := ""
	if err != nil {
		skipped = err.Error()
	}
	r.record(op, node, skipped)
}

func postJSON(ctx context.Context, url string, body any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s (does the service run with FENCESIM_TEST_HOOKS=1?)", url, resp.Status)
	}
	return nil
}

// finishFaults ends what the schedule left on: timers stopped, paused
// processes resumed, links healed, then the store's apply log read.
func (r *run) finishFaults() {
	r.mu.Lock()
	fs := r.fs
	r.mu.Unlock()
	if fs == nil {
		return
	}
	r.mu.Lock()
	for _, t := range fs.timers {
		t.Stop()
	}
	var paused []string
	for n := range fs.paused {
		paused = append(paused, n)
	}
	r.mu.Unlock()
	for _, n := range paused {
		if p, ok := r.proc(n); ok {
			p.resume()
		}
	}
	r.links.heal()
	r.links.netFault(netFault{}, true)
	if r.store.alive() {
		r.applies.fetch(context.Background())
	}
}
