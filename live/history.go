package live

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencesim/fencesim/checker"
	"github.com/fencesim/fencesim/history"
	"github.com/fencesim/fencesim/live/liveclient"
	"github.com/fencesim/fencesim/nemesis"
)

// recorder collects what the clients saw, on the run's timeline (the
// monotonic base minus r.base), through the recorder the simulator's
// clients are recorded with too (package history): an operation without
// a reply is unknown, as Jepsen's info — it may have taken effect at any
// time after its call. The harness stamps a call before it writes the
// command and a return after it reads the reply. What is live's own is
// the synthetic tokens of a target without any, and the owners of the
// written values.
type recorder struct {
	mu       sync.Mutex
	base     time.Duration
	end      time.Duration
	fenced   bool
	clients  *history.Recorder
	nLock    int              // lock operations recorded
	owner    map[int64]string // write value → client
	nextVal  int64
	synth    uint64 // the last synthetic token (unfenced targets)
	inFlight int    // acquires sent and not yet recorded
	unknown  int    // acquires recorded with no answer
	restarts []checker.StoreRestart
}

func newRecorder(fenced bool) *recorder {
	return &recorder{fenced: fenced, clients: history.New(), owner: map[int64]string{}}
}

func (r *recorder) at(mono time.Duration) time.Duration { return mono - r.base }

// acquiring notes an acquire about to be sent, before lock records it:
// while it is in flight it may yet end with no answer (see lock).
func (r *recorder) acquiring() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight++
}

// lock records a lock operation, called at call and answered rep at ret
// (ok false: no reply); for a granted acquire it returns the history's
// token: the service's, or for a service without tokens a synthetic one,
// one counter across resources in the order the acquires returned (so S1
// holds of it by construction and a stale write shows in S3). A granted
// acquire opens the client's belief that it holds the lock.
//
// A synthetic grant leaves room below its token for every acquire that
// may have taken effect unseen before it: each acquire in flight (sent by
// acquiring and not yet recorded) and each already recorded with no
// answer. S7 lets an unanswered acquire take effect anywhere after its
// call, with a token it knows only to be above the last one granted; the
// next grant must then carry a higher token. Without the room, a grant
// that returned after the unanswered acquire was sent carries exactly the
// next number, and a history where the unseen grant must have come first
// (the paused holder's acquire landed; the other client's acquires were
// answered busy, then granted once the lease ran out) fails S7 though the
// service did nothing wrong. The room only widens the gaps between
// tokens that grow in return order as before: S1 and S3 compare the same
// order, and S7's other constraints (one holder at a time, renewals and
// releases by the holder) do not look at the numbers, so no true
// violation is hidden.
func (r *recorder) lock(client, resource string, kind checker.LockKind, token uint64, call, ret time.Duration, rep liveclient.Reply, ok bool) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nLock++
	id := r.clients.LockCall(client, resource, kind, uint64(r.nLock), token, r.at(call))
	if kind == checker.LockAcquire && r.inFlight > 0 {
		r.inFlight--
	}
	outcome, granted := checker.LockUnknown, uint64(0)
	if ok {
		switch {
		case rep.OK && kind == checker.LockAcquire:
			outcome, granted = checker.LockGranted, rep.Token
			if !r.fenced {
				r.synth += 1 + uint64(r.inFlight+r.unknown)
				granted = r.synth
			}
		case rep.OK && kind == checker.LockRenew:
			outcome = checker.LockRenewed
		case rep.OK:
			outcome = checker.LockReleased
		case rep.Error == liveclient.ErrorBusy && kind == checker.LockAcquire:
			outcome = checker.LockBusy
		case rep.Error == liveclient.ErrorNotHolder && kind != checker.LockAcquire:
			outcome = checker.LockNotHolder
		}
	}
	if outcome == checker.LockGranted && granted == 0 {
		// A fenced target that granted without a token: record it as
		// unknown rather than invent one.
		outcome = checker.LockUnknown
	}
	if outcome == checker.LockUnknown {
		if kind == checker.LockAcquire {
			r.unknown++
		}
		return 0
	}
	r.clients.LockReturn(id, outcome, granted, r.at(ret))
	return granted
}

// value returns a value no other write of the run carries, owned by client.
func (r *recorder) value(client string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextVal++
	r.owner[r.nextVal] = client
	return r.nextVal
}

func (r *recorder) write(client, key string, token uint64, value int64, call, ret time.Duration, rep liveclient.Reply, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.clients.StoreCall(client, key, checker.StoreOp{Kind: checker.OpWrite, Token: token, Value: value}, r.at(call))
	if ok && (rep.OK || rep.Error == liveclient.ErrorStale) {
		r.clients.StoreReturn(id, rep.OK, 0, 0, r.at(ret))
	}
}

func (r *recorder) read(client, key string, call, ret time.Duration, rep liveclient.Reply, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.clients.StoreCall(client, key, checker.StoreOp{Kind: checker.OpRead}, r.at(call))
	if ok && rep.OK {
		r.clients.StoreReturn(id, true, rep.Value, rep.Token, r.at(ret))
	}
}

// disbelieve ends client's belief that it holds token, at mono.
func (r *recorder) disbelieve(client string, token uint64, mono time.Duration, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients.EndBelief(client, token, reason, r.at(mono))
}

func (r *recorder) storeRestarted(mono time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts = append(r.restarts, checker.StoreRestart{At: r.at(mono)})
}

// grantWindows returns, for every granted acquire (by LockOp.ID), the
// earliest instant its grant can have been made: the call of the first
// acquire the client sent for the resource since its previous grant of
// it. An acquire that got no answer may have been granted, and the
// client's next acquire of the resource then answers with that grant's
// token (a holder's acquire returns its grant), so the grant can predate
// the call of the acquire that reported it. repeats are the granted
// acquires that answered a grant the client had already been told of (the
// same token again): one grant, reported twice.
func grantWindows(ops []checker.LockOp) (win map[int]time.Duration, repeats map[int]bool) {
	type cr struct{ client, resource string }
	first := map[cr]time.Duration{}
	open := map[cr]bool{}
	last := map[cr]checker.LockOp{}
	win, repeats = map[int]time.Duration{}, map[int]bool{}
	for _, o := range ops { // in call order: each client's ops are sequential
		if o.Kind != checker.LockAcquire {
			continue
		}
		k := cr{o.Client, o.Resource}
		if !open[k] {
			first[k], open[k] = o.Call, true
		}
		if o.Outcome != checker.LockGranted {
			continue
		}
		open[k] = false
		if prev, ok := last[k]; ok && prev.Token == o.Token {
			win[o.ID], repeats[o.ID] = win[prev.ID], true
			continue
		}
		win[o.ID] = first[k]
		last[k] = o
	}
	return win, repeats
}

// deriveGrants derives the service's grants from what the clients saw,
// for targets whose own grant records the harness cannot read. The
// derivation never shows a violation the service did not commit:
//
//   - Start is the acquire's return: the service granted no later.
//   - End is a lower bound on when the service ended the lease: the
//     earliest of the call of a release of the token, and the earliest
//     instant of the grant (grantWindows) or the call of its last
//     answered renewal, plus TTL·(1−ρ) (the lock API's promise: a lease
//     lasts its TTL from no earlier than the request was sent, on a clock
//     whose rate error is within ρ). While a server's clock is skewed
//     (a jump, or a drift beyond ρ: skews), that promise is void, and a
//     grant whose window or lease meets a skew ends at its Start: it can
//     no longer overlap anything (S2 judges nothing about it).
//
// So two derived grants overlap only if the service's real grants did
// (S2). S1 judges grant order by Start, which for grants of different
// resources can invert two concurrent acquires; check drops the S1
// findings when the tokens are consistent with some order of grant
// instants inside the grants' windows (see tokensFeasible).
func deriveGrants(ops []checker.LockOp, ttl map[string]time.Duration, rhoPPM int64, skews []span, end time.Duration) []checker.Grant {
	win, repeats := grantWindows(ops)
	var gs []checker.Grant
	for _, a := range ops {
		if a.Kind != checker.LockAcquire || a.Outcome != checker.LockGranted || repeats[a.ID] {
			continue
		}
		lease := ttl[a.Client] - ttl[a.Client]*time.Duration(rhoPPM)/1_000_000
		last := win[a.ID]
		released := end
		for _, o := range ops {
			if o.Client != a.Client || o.Resource != a.Resource || o.Token != a.Token || o.Call < a.Call {
				continue
			}
			switch {
			case o.Kind == checker.LockRenew && o.Outcome == checker.LockRenewed:
				last = max(last, o.Call)
			case o.Kind == checker.LockRelease && o.Call < released:
				released = o.Call
			}
		}
		e, reason := min(last+lease, released), "expired"
		if released < last+lease {
			reason = "released"
		}
		if slices.ContainsFunc(skews, func(sk span) bool { return sk.from <= e && win[a.ID] <= sk.to }) {
			e = a.Return
		}
		e = max(e, a.Return)
		g := checker.Grant{Resource: a.Resource, Client: a.Client, Token: a.Token, Start: a.Return, End: e, Reason: reason}
		if e >= end {
			g.End, g.Open, g.Reason = 0, true, ""
		}
		gs = append(gs, g)
	}
	slices.SortStableFunc(gs, func(a, b checker.Grant) int { return cmp.Compare(a.Start, b.Start) })
	return gs
}

// span is an interval of the run's timeline.
type span struct{ from, to time.Duration }

// tokensFeasible reports whether some instant inside each grant's window
// (grantWindows to the acquire's return) puts the tokens in strictly
// increasing order (earliest-first assignment in token order decides
// it), with no token granted twice: then the service may well have
// issued them in token order, and S1 has nothing against it.
func tokensFeasible(ops []checker.LockOp) bool {
	win, repeats := grantWindows(ops)
	var gs []checker.LockOp
	for _, o := range ops {
		if o.Kind == checker.LockAcquire && o.Outcome == checker.LockGranted && !repeats[o.ID] {
			gs = append(gs, o)
		}
	}
	slices.SortStableFunc(gs, func(a, b checker.LockOp) int { return cmp.Compare(a.Token, b.Token) })
	t := time.Duration(-1 << 62)
	for i, g := range gs {
		if i > 0 && g.Token == gs[i-1].Token {
			return false
		}
		t = max(t+1, win[g.ID])
		if t > g.Return {
			return false
		}
	}
	return true
}

// history builds the checker's History from the recorder, the store's
// apply log and the schedule; notes say what it could not know.
func (r *run) history() (checker.History, []string) {
	rec := r.rec
	var notes []string
	h := checker.History{StoreRestarts: rec.restarts, End: rec.end}
	rec.clients.Fill(&h)
	for i := range h.Beliefs {
		if h.Beliefs[i].Open {
			h.Beliefs[i].Open, h.Beliefs[i].To, h.Beliefs[i].Reason = false, rec.end, "run-ended"
		}
	}
	ttl := map[string]time.Duration{}
	var rho int64
	for _, c := range r.spec.Clients {
		ttl[c.Name] = time.Duration(c.TTL)
		rho = max(rho, c.DriftBoundPPM)
	}
	// The windows in which a server's clock was off by more than the
	// clients assume: a jump, or a drift beyond ρ, until its duration
	// ended (or the end of the run), and one TTL after (a lease granted
	// under the skew runs on past it).
	var skews []span
	maxTTL := time.Duration(0)
	for _, d := range ttl {
		maxTTL = max(maxTTL, d)
	}
	for _, ev := range r.faults {
		op := ev.Planned
		if ev.Skipped != "" || r.isClient(ev.Node) || ev.Node == "store" {
			continue
		}
		if op.Kind == nemesis.Jump || op.Kind == nemesis.Drift && (op.PPM > rho || op.PPM < -rho) {
			to := rec.end
			if op.Duration > 0 {
				to = min(rec.end, ev.At+time.Duration(op.Duration))
			}
			skews = append(skews, span{ev.At, to + maxTTL})
		}
	}
	if len(skews) > 0 {
		notes = append(notes, fmt.Sprintf("%d server clock skews: the grants they touch end at their start (S2 judges none of them)", len(skews)))
	}
	h.Grants = deriveGrants(h.LockOps, ttl, rho, skews, rec.end)
	applies, err := r.applies.all()
	if err != nil {
		notes = append(notes, "the store's apply log was unreadable ("+err.Error()+"): S3–S5 cannot be judged")
	}
	for _, a := range applies {
		h.Applies = append(h.Applies, checker.StoreApply{Resource: a.Key, Client: rec.owner[a.Value], Token: a.Token,
			Value: a.Value, Accepted: a.Accepted, At: time.Duration(a.MonoNs) - r.base})
	}
	if err != nil {
		// Without the store's own record, S3–S5 have nothing to judge,
		// and S8 would judge reads against no writes: leave the store's
		// side out entirely.
		h.Applies, h.Ops = nil, nil
	}
	return h, notes
}

// check judges h with the checker and drops what the derivation alone
// could cause (see deriveGrants), or, for a target whose tokens grow per
// resource, what only a comparison across resources finds.
func check(h checker.History, r *run) checker.Verdict {
	h.LockOps = history.HolderBusyAmbiguous(h.LockOps)
	if r.info.SpuriousBusy != "" {
		var n int
		h.LockOps, n = withoutBusy(h.LockOps)
		if n > 0 {
			r.note("%d busy answers not judged: %s", n, r.info.SpuriousBusy)
		}
	}
	v := checker.Check(h, checker.Options{})
	if v.Kind != checker.VerdictViolation {
		return v
	}
	why := "acquires of different resources returned out of token order, but their windows admit the token order"
	feasible := tokensFeasible(h.LockOps)
	if r.info.TokensPerResource {
		why = "target " + r.info.Name + " issues tokens per resource, and per resource they are in order"
		byRes := map[string][]checker.LockOp{}
		for _, o := range h.LockOps {
			byRes[o.Resource] = append(byRes[o.Resource], o)
		}
		feasible = true
		for _, ops := range byRes {
			feasible = feasible && tokensFeasible(ops)
		}
	}
	if !feasible {
		return v
	}
	kept := slices.DeleteFunc(slices.Clone(v.Violations), func(x checker.Violation) bool { return x.Property == "S1" })
	if n := len(v.Violations) - len(kept); n > 0 {
		r.note("%d S1 finding(s) dropped: %s", n, why)
	}
	v.Violations = kept
	if len(kept) == 0 {
		v.Kind = checker.VerdictPass
		if v.Unknown != "" {
			v.Kind = checker.VerdictUnknown
		}
	}
	return v
}

func (ev FaultEvent) String() string {
	planned := ev.Planned.String()
	if on := ev.Planned.When; on != "" && ev.Planned.Within == 0 { // a trigger fired on its moment
		op := ev.Planned
		op.When = ""
		planned = op.String() + " on " + string(on)
	}
	s := fmt.Sprintf("%8v  %s", ev.At.Round(time.Millisecond), planned)
	if ev.Node != "" && ev.Node != ev.Planned.Node {
		s += " → " + ev.Node
	}
	switch {
	case ev.Outcome == FaultNotApplicable:
		s += "  (not applicable: " + ev.Skipped + ")"
	case ev.Skipped != "":
		s += "  (skipped: " + ev.Skipped + ")"
	case ev.FinalHeal:
		s += "  (final heal)"
	}
	return s
}

// withoutBusy returns ops without the acquires answered busy, and how many
// it left out (ops itself is not changed: a report shows what the clients
// saw). A refused acquire took no effect, so leaving it out changes what
// no other operation may do; it only stops the refusal being judged.
func withoutBusy(ops []checker.LockOp) ([]checker.LockOp, int) {
	out := make([]checker.LockOp, 0, len(ops))
	for _, o := range ops {
		if o.Kind != checker.LockAcquire || o.Outcome != checker.LockBusy {
			out = append(out, o)
		}
	}
	return out, len(ops) - len(out)
}
