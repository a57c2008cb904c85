package live

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/nemesis"
)

// The outcomes of a scheduled fault operation (FaultEvent.Outcome).
const (
	// FaultDone: carried out (a restart: the process is ready again).
	FaultDone = "done"
	// FaultSkipped: the target could carry it out, but this time it did
	// not happen (nobody led, the node was not crashed, a restart never
	// became ready, an error).
	FaultSkipped = "skipped"
	// FaultNotApplicable: the target cannot carry out this kind of fault
	// on that process at all (known before the run: a TCP stream neither
	// duplicates nor reorders, a service without a clock endpoint, a
	// replica the target lacks, a link the harness does not proxy).
	FaultNotApplicable = "not_applicable"
)

// DefaultMinFaultsDone is the fraction of a schedule's applicable fault
// operations (done + skipped) a live run must carry out for its verdict
// to be more than unknown, unless the spec lowers it
// (scenario.LiveSpec.MinFaultsDone).
const DefaultMinFaultsDone = 0.75

// ErrInapplicable matches Run's error for a spec whose scripted faults
// include some the target cannot carry out at all (unless
// Options.AllowInapplicable).
var ErrInapplicable = errors.New("live: the target cannot carry out some of the scenario's scripted faults")

// FaultCounts sums a run's fault operations by outcome.
type FaultCounts struct {
	Done          int `json:"done"`
	Skipped       int `json:"skipped"`
	NotApplicable int `json:"not_applicable"`
}

func (c FaultCounts) String() string {
	return fmt.Sprintf("%d done, %d skipped, %d not applicable", c.Done, c.Skipped, c.NotApplicable)
}

// ClientCounts is what one workload client did in a run.
type ClientCounts struct {
	LockOps  int `json:"lock_ops"`
	Grants   int `json:"grants"`
	StoreOps int `json:"store_ops"`
	// Accepted counts its writes the store accepted.
	Accepted int `json:"accepted_writes"`
	// Died lists how its process ended when nothing in the schedule
	// crashed it (a broken client binary, a panic).
	Died []string `json:"died,omitempty"`
}

// candidates returns the processes name may stand for when a fault fires,
// or why it stands for none in this target.
func (r *run) candidates(name string) ([]string, string) {
	switch {
	case name == nemesis.Leader:
		if r.layout.Leader == nil {
			return nil, "target " + r.info.Name + " names no leader"
		}
		return r.replicas, ""
	case name == nemesis.Crashed:
		return nil, ""
	}
	n, why := r.resolveFixed(name)
	if why != "" {
		return nil, why
	}
	return []string{n}, ""
}

// notApplicable says why op cannot be carried out on this run's target at
// all, whatever the moment ("" if it can).
func (r *run) notApplicable(op nemesis.Op) string {
	if why := liveCannot[op.Kind]; why != "" {
		return why
	}
	var nodes []string
	for _, n := range append([]string{op.Node, op.To}, op.Group...) {
		if n == "" {
			continue
		}
		c, why := r.candidates(n)
		if why != "" {
			return why
		}
		nodes = append(nodes, c...)
	}
	unproxied := func(n string) bool { return r.srvSpec[n].UnproxiedPeers }
	switch op.Kind {
	case nemesis.Drift, nemesis.Jump, nemesis.ClockReset, nemesis.SlowDisk:
		takes := r.info.ClockFaults
		if op.Kind == nemesis.SlowDisk {
			takes = r.info.DiskFaults
		}
		for _, n := range nodes {
			if _, why := r.testURL(n, takes); why != "" {
				return why
			}
		}
	case nemesis.Isolate:
		for _, n := range nodes {
			if unproxied(n) {
				return n + "'s links to its peers are not proxied: an isolation would cut only its clients' links"
			}
		}
	case nemesis.Block:
		to, _ := r.candidates(op.To)
		from, _ := r.candidates(op.Node)
		for _, a := range from {
			for _, b := range to {
				if r.srvSpec[a].Name != "" && r.srvSpec[b].Name != "" && (unproxied(a) || unproxied(b)) {
					return fmt.Sprintf("the link %s→%s is not proxied", a, b)
				}
			}
		}
	case nemesis.Partition:
		for _, a := range nodes {
			if !unproxied(a) {
				continue
			}
			for _, b := range r.replicas {
				if unproxied(b) && !slices.Contains(nodes, b) {
					return fmt.Sprintf("the links between %s and %s are not proxied", a, b)
				}
			}
		}
	}
	return ""
}

// inapplicableScripted lists the plan's scripted faults (the spec's and
// the target's own, not a swarm's draws) the target cannot carry out at
// all, each with why.
func (r *run) inapplicableScripted() (bad []string, scripted int) {
	ops, err := r.opt.Plan.Spec.Faults.Bind(r.opt.Plan.Cluster())
	if err != nil {
		ops = r.opt.Plan.Spec.Faults
	}
	ops = append(slices.Clone(ops), r.opt.TargetFaults...)
	for _, op := range ops {
		why := r.notApplicable(op)
		if op.When != "" {
			why = r.triggerNotApplicable(op)
		}
		if why != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", op, why))
		}
	}
	return bad, len(ops)
}

// checkScripted refuses a plan whose scripted faults include one the
// target cannot carry out at all, naming each.
func (r *run) checkScripted() error {
	bad, n := r.inapplicableScripted()
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: target %s, scenario %s, %d of %d scripted: %s (simrun live -allow-inapplicable runs it anyway; they count as faults not done)",
		ErrInapplicable, r.info.Name, r.spec.Name, len(bad), n, strings.Join(bad, "; "))
}

// faultCounts sums the run's fault events by outcome.
func faultCounts(evs []FaultEvent) FaultCounts {
	var c FaultCounts
	for _, ev := range evs {
		if ev.FinalHeal {
			continue
		}
		switch ev.Outcome {
		case FaultDone:
			c.Done++
		case FaultNotApplicable:
			c.NotApplicable++
		default:
			c.Skipped++
		}
	}
	return c
}

// clientCounts sums what each client did and how its process died, if it
// did on its own.
func (r *run) clientCounts(h checker.History) map[string]ClientCounts {
	out := map[string]ClientCounts{}
	for _, c := range r.spec.Clients {
		cc := ClientCounts{}
		if cp := r.clients[c.Name]; cp != nil {
			cc.Died = cp.unexpectedExits()
		}
		out[c.Name] = cc
	}
	for _, o := range h.LockOps {
		cc := out[o.Client]
		cc.LockOps++
		if o.Kind == checker.LockAcquire && o.Outcome == checker.LockGranted {
			cc.Grants++
		}
		out[o.Client] = cc
	}
	for _, o := range h.Ops {
		cc := out[o.Client]
		cc.StoreOps++
		if o.Kind == checker.OpWrite && o.Outcome == checker.OutcomeAccepted {
			cc.Accepted++
		}
		out[o.Client] = cc
	}
	return out
}

// vacuous says why a run tested too little for a pass to mean anything
// ("" if it tested enough): a client process died without the schedule
// crashing it (its operations were never made), no lock was granted, or
// fewer than the spec's fraction (DefaultMinFaultsDone unless
// live.min_faults_done) of the applicable fault operations were carried
// out — or none at all of a schedule that had some. The applicable
// operations are those done or skipped, and the scripted faults the
// target could not carry out (run with -allow-inapplicable): a scenario
// written for these faults did not get them. A swarm's draws the target
// cannot carry out (duplication over TCP, a client's clock) are left out.
func (r *run) vacuous(clients map[string]ClientCounts, faults FaultCounts, grants int) string {
	var why []string
	var dead []string
	for _, c := range r.spec.Clients {
		d := clients[c.Name].Died
		if len(d) == 0 {
			continue
		}
		what := fmt.Sprintf("%s (%s", c.Name, strings.Join(d, ", "))
		if cp := r.clients[c.Name]; cp != nil {
			if last := lastLine(cp.tail(400)); last != "" {
				what += fmt.Sprintf(", its last words %q", last)
			}
		}
		if r.opt.Keep || r.opt.Dir != "" {
			what += "; its log: " + logPath(r.dir, "client-"+c.Name)
		}
		dead = append(dead, what+")")
	}
	if len(dead) > 0 {
		why = append(why, "client processes died without the schedule crashing them: "+strings.Join(dead, "; "))
	}
	if grants == 0 {
		why = append(why, "no lock was granted")
	}
	min := DefaultMinFaultsDone
	if l := r.spec.Live; l != nil && l.MinFaultsDone != nil {
		min = *l.MinFaultsDone
	}
	bad, _ := r.inapplicableScripted()
	applicable := faults.Done + faults.Skipped + len(bad)
	need := int(math.Ceil(min * float64(applicable)))
	switch {
	case faults.Done < need:
		what := ""
		if len(bad) > 0 {
			what = fmt.Sprintf(" (%d of them scripted faults the target cannot carry out)", len(bad))
		}
		why = append(why, fmt.Sprintf("only %d of the schedule's %d fault operations%s were carried out (the rule: at least %.0f%%, %d; live.min_faults_done in the spec lowers it)",
			faults.Done, applicable, what, 100*min, need))
	case faults.Done == 0 && faults.NotApplicable > 0 && min > 0:
		why = append(why, fmt.Sprintf("none of the schedule's %d fault operations could be carried out on target %s", faults.NotApplicable, r.info.Name))
	}
	return strings.Join(why, "; ")
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
