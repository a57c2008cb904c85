package checker

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// ms is a shorthand for hand-built histories.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// genConfig shapes a generated history.
type genConfig struct {
	resources   int     // number of resources
	clients     int     // lock clients per resource
	ops         int     // total store ops
	unknownRate float64 // probability that an op gets no reply
	staleRate   float64 // probability that a lease's previous holder writes late
	readers     int     // lock-free reader clients per resource
	locks       bool    // also record lock ops, renewals, lease ends and beliefs
	// touch draws half the lock ops' offsets from their grant's start
	// and end as 0, so that ops often return at the very instant another
	// is called, where program order decides (see typedOp.After).
	touch bool
}

// genHistory simulates a correct lock service and a correct fenced store and
// returns the history they would record, so that every property holds. It
// returns exactly cfg.ops ops.
//
// Each resource has a chain of non-overlapping leases; tokens are assigned in
// global grant order. During each lease the holder issues sequential ops
// with its token, the previous holder sometimes issues one late (stale)
// write, and readers read concurrently. Every op takes effect at a random
// point inside its interval (an unknown op may be lost, or take effect up
// to 50ms after its call), and the store's outcome is computed by applying
// ops in that order to a fenced register.
func genHistory(rng *rand.Rand, cfg genConfig) History {
	type lease struct {
		g   Grant
		res int
	}
	perResource := max(1, cfg.ops/max(1, cfg.resources))
	opsPerLease := 8
	leasesPerResource := perResource/opsPerLease + 1 // enough leases; add caps the ops

	var leases []lease
	for r := range cfg.resources {
		t := time.Duration(rng.IntN(20)) * time.Millisecond
		for k := range leasesPerResource {
			dur := time.Duration(50+rng.IntN(150)) * time.Millisecond
			g := Grant{
				Resource: fmt.Sprintf("r%d", r),
				Client:   fmt.Sprintf("c%d", rng.IntN(max(1, cfg.clients))),
				Start:    t,
				End:      t + dur,
				Open:     k == leasesPerResource-1 && rng.IntN(2) == 0,
			}
			leases = append(leases, lease{g: g, res: r})
			gap := time.Duration(0)
			if rng.IntN(2) == 0 {
				gap = time.Duration(rng.IntN(10)) * time.Millisecond
			}
			t += dur + gap
		}
	}
	slices.SortStableFunc(leases, func(a, b lease) int {
		return cmp.Or(cmp.Compare(a.g.Start, b.g.Start), cmp.Compare(a.res, b.res))
	})
	for i := range leases {
		leases[i].g.Token = uint64(i + 1)
		leases[i].g.Step = uint64(10 * (i + 1))
	}

	type pending struct {
		op      StoreOp
		at      time.Duration // linearization point
		applied bool          // false for a lost unknown op
	}
	var ps []pending
	nextID, nextValue := 1, int64(1)
	var end time.Duration
	add := func(op StoreOp) {
		if nextID > cfg.ops {
			return
		}
		op.ID = nextID
		nextID++
		if op.Kind == OpWrite {
			op.Value = nextValue
			nextValue++
		}
		p := pending{op: op, applied: true}
		if rng.Float64() < cfg.unknownRate {
			p.op.Outcome = OutcomeUnknown
			p.applied = rng.IntN(2) == 0
			p.at = op.Call + time.Duration(rng.Int64N(int64(50*time.Millisecond)))
		} else {
			p.at = op.Call + time.Duration(rng.Int64N(int64(op.Return-op.Call)+1))
		}
		end = max(end, op.Return, p.at)
		ps = append(ps, p)
	}
	last := make(map[int]Grant) // resource -> previous lease
	for _, l := range leases {
		g := l.g
		t := g.Start
		for range opsPerLease {
			t += time.Duration(1+rng.IntN(3)) * time.Millisecond
			d := time.Duration(1+rng.IntN(4)) * time.Millisecond
			kind := OpWrite
			if rng.IntN(4) == 0 {
				kind = OpRead
			}
			add(StoreOp{Client: g.Client, Resource: g.Resource, Kind: kind, Token: tokenIf(kind, g.Token), Call: t, Return: t + d})
			t += d
		}
		if prev, ok := last[l.res]; ok && rng.Float64() < cfg.staleRate {
			c := g.Start + time.Duration(rng.IntN(30))*time.Millisecond
			add(StoreOp{Client: prev.Client, Resource: prev.Resource, Kind: OpWrite, Token: prev.Token, Call: c, Return: c + ms(2)})
		}
		for i := range cfg.readers {
			c := g.Start + time.Duration(rng.IntN(40))*time.Millisecond
			add(StoreOp{Client: fmt.Sprintf("reader%d", i), Resource: g.Resource, Kind: OpRead, Call: c, Return: c + time.Duration(1+rng.IntN(8))*time.Millisecond})
		}
		last[l.res] = g
	}

	slices.SortStableFunc(ps, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op.ID, b.op.ID))
	})
	state := make(map[string]registerState)
	var ops []StoreOp
	var applies []StoreApply
	for i, p := range ps {
		op := p.op
		s := state[op.Resource]
		if p.applied {
			switch op.Kind {
			case OpWrite:
				accepted := op.Token >= s.Highest
				if accepted {
					state[op.Resource] = registerState{Highest: op.Token, Value: op.Value, ValueToken: op.Token}
				}
				if op.Outcome != OutcomeUnknown {
					op.Outcome = OutcomeRejected
					if accepted {
						op.Outcome = OutcomeAccepted
					}
				}
				applies = append(applies, StoreApply{Resource: op.Resource, Client: op.Client, Token: op.Token, Value: op.Value, Accepted: accepted, At: p.at, Step: uint64(i + 1)})
			case OpRead:
				if op.Outcome != OutcomeUnknown {
					op.ReadValue, op.ReadToken = s.Value, s.ValueToken
				}
			}
		}
		ops = append(ops, op)
	}
	slices.SortStableFunc(ops, func(a, b StoreOp) int { return cmp.Compare(a.ID, b.ID) })

	grants := make([]Grant, len(leases))
	for i, l := range leases {
		grants[i] = l.g
		end = max(end, l.g.End)
	}
	h := History{Ops: ops, Grants: grants, Applies: applies, End: end + time.Millisecond}
	if cfg.locks {
		genLocks(rng, &h, cfg)
	}
	return h
}

// genLocks adds to h what a correct lock service and its clients would
// record around h's grants: each holder's acquire (sometimes unanswered, or
// repeated after a lost reply), renewals inside the lease, a release or an
// expiry (sometimes followed by a refused renewal), other clients' busy or
// unanswered acquires during the lease, and the holders' beliefs. It draws
// from rng only after everything else, so it changes no other record.
//
// Each client runs its lock ops on a resource one after another, as the
// client library does: an acquire is called only once the client is done
// with its previous lease (its last answered op returned and its belief
// ended). The checker relies on it: an op called at the very instant its
// own client's previous op returned follows that op (see typedOp.After).
// So a holder that is granted the next lease too released the previous one
// by the new grant's start, and stopped believing in an expired one by then.
func genLocks(rng *rand.Rand, h *History, cfg genConfig) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	jitter := func(n int) time.Duration { // an offset in [0, n) µs
		if cfg.touch && rng.IntN(2) == 0 {
			return 0
		}
		return us(rng.IntN(n))
	}
	// next[i] is the index of the next grant on grant i's resource, or -1.
	next := make([]int, len(h.Grants))
	following := make(map[string]int)
	for i := len(h.Grants) - 1; i >= 0; i-- {
		next[i] = -1
		if j, ok := following[h.Grants[i].Resource]; ok {
			next[i] = j
		}
		following[h.Grants[i].Resource] = i
	}
	// done is when each client is done with a resource: its later ops on
	// it are called no earlier.
	type clientResource struct{ client, resource string }
	done := make(map[clientResource]time.Duration)
	finish := func(client, resource string, at time.Duration) {
		k := clientResource{client, resource}
		done[k] = max(done[k], at)
	}
	nextID := 1
	add := func(op LockOp) LockOp {
		op.ID = nextID
		nextID++
		if op.Outcome != LockGranted && op.Kind == LockAcquire {
			op.Token = 0
		}
		h.LockOps = append(h.LockOps, op)
		return op
	}
	unknown := func() bool { return rng.Float64() < cfg.unknownRate }
	for i := range h.Grants {
		g := &h.Grants[i]
		acq := LockOp{Client: g.Client, Resource: g.Resource, Kind: LockAcquire, Token: g.Token, Outcome: LockGranted,
			Call: max(0, g.Start-jitter(2000)), Return: g.Start + jitter(2000)}
		if d := done[clientResource{g.Client, g.Resource}]; d > acq.Call {
			if d > g.Start {
				panic(fmt.Sprintf("genLocks: %s is done with %s at %v, after its grant of token %d at %v", g.Client, g.Resource, d, g.Token, g.Start))
			}
			acq.Call = d
		}
		knows := !unknown()
		if !knows {
			acq.Outcome = LockUnknown
		}
		add(acq)
		// successor is the holder's own next grant on the resource, if any:
		// the holder is done with this one by that grant's start.
		successor := time.Duration(-1)
		if j := next[i]; j >= 0 && h.Grants[j].Client == g.Client {
			successor = h.Grants[j].Start
		}
		last := g.End // when the holder stops believing
		if g.Open {
			last = h.End
		}
		inside := func() time.Duration { // a point well inside the lease
			hi := min(g.End, h.End)
			if g.Open {
				hi = h.End
			}
			return g.Start + us(1000+rng.IntN(max(1, int((hi-g.Start)/time.Microsecond)-3000)))
		}
		if knows {
			if rng.IntN(6) == 0 { // the reply was lost; the holder asks again
				p := inside()
				add(LockOp{Client: g.Client, Resource: g.Resource, Kind: LockAcquire, Token: g.Token, Outcome: LockGranted, Call: p, Return: p + us(500)})
			}
			for range rng.IntN(3) {
				p := inside()
				op := LockOp{Client: g.Client, Resource: g.Resource, Kind: LockRenew, Token: g.Token, Outcome: LockRenewed, Call: p - us(400), Return: p + us(400)}
				applied := true
				if unknown() {
					op.Outcome = LockUnknown
					applied = rng.IntN(2) == 0
				}
				add(op)
				if applied {
					h.Renewals = append(h.Renewals, Renewal{Resource: g.Resource, Client: g.Client, Token: g.Token, Request: uint64(nextID), At: p, Step: uint64(nextID)})
				}
			}
		}
		for c := range cfg.clients {
			other := fmt.Sprintf("c%d", c)
			if other == g.Client || rng.IntN(2) == 0 {
				continue
			}
			p := max(inside()-us(300), done[clientResource{other, g.Resource}])
			op := LockOp{Client: other, Resource: g.Resource, Kind: LockAcquire, Outcome: LockBusy, Call: p, Return: p + us(600)}
			if unknown() {
				op.Outcome = LockUnknown // it would have been busy
			}
			add(op)
			finish(other, g.Resource, op.Return)
		}
		switch {
		case g.Open:
		case knows && rng.IntN(2) == 0:
			g.Reason = EndReleased
			op := LockOp{Client: g.Client, Resource: g.Resource, Kind: LockRelease, Token: g.Token, Outcome: LockReleased,
				Call: g.End - jitter(1000), Return: g.End + jitter(1000)}
			if successor >= 0 {
				op.Return = min(op.Return, successor)
			}
			if unknown() {
				op.Outcome = LockUnknown
			} else {
				finish(g.Client, g.Resource, op.Return)
			}
			add(op)
			last = op.Call
			h.Ends = append(h.Ends, GrantEnd{Resource: g.Resource, Client: g.Client, Token: g.Token, Reason: EndReleased, At: g.End, Step: uint64(nextID)})
		default:
			g.Reason = EndExpired
			h.Ends = append(h.Ends, GrantEnd{Resource: g.Resource, Client: g.Client, Token: g.Token, Reason: EndExpired, At: g.End, Step: uint64(nextID)})
			last = g.End + jitter(30_000) // a paused holder believes past its lease
			if successor >= 0 {
				last = min(last, successor)
			}
			if knows && rng.IntN(2) == 0 && (successor < 0 || last+us(500) <= successor) {
				op := add(LockOp{Client: g.Client, Resource: g.Resource, Kind: LockRenew, Token: g.Token, Outcome: LockNotHolder, Call: last, Return: last + us(500)})
				finish(g.Client, g.Resource, op.Return)
			}
		}
		if !g.Open {
			finish(g.Client, g.Resource, last)
		}
		if knows {
			b := Belief{Client: g.Client, Resource: g.Resource, Token: g.Token, From: acq.Return, To: last, Reason: "releasing"}
			if g.Open {
				b.Open, b.To, b.Reason = true, 0, ""
			}
			h.Beliefs = append(h.Beliefs, b)
		}
	}
	for _, op := range h.LockOps {
		h.End = max(h.End, op.Return+time.Millisecond)
	}
}

// tokenIf returns tok for writes and 0 for reads, which send no token.
func tokenIf(k OpKind, tok uint64) uint64 {
	if k == OpWrite {
		return tok
	}
	return 0
}

// properties returns the set of violated properties, sorted, for comparing
// verdicts in tests.
func properties(v Verdict) []string {
	var ps []string
	for _, x := range v.Violations {
		if !slices.Contains(ps, x.Property) {
			ps = append(ps, x.Property)
		}
	}
	return ps
}

// clientsSequential returns an error naming the first place where a
// generated history has a client act on a resource before it is done with
// its previous lease there: an acquire called before an earlier answered op
// of another lease (or a busy acquire) of the same client returned, or
// while the client still believed it held another token. A real client
// does neither, and the checker's program order (typedOp.After) would turn
// such overlaps, where they touch at one instant, into false violations.
func clientsSequential(h History) error {
	for _, b := range h.LockOps {
		if b.Kind != LockAcquire {
			continue
		}
		for _, a := range h.LockOps {
			if a.Client != b.Client || a.Resource != b.Resource || a.ID == b.ID || a.Call > b.Call ||
				a.Outcome == LockUnknown || a.Token == b.Token && a.Token != 0 {
				continue // not an earlier answered op of another lease
			}
			if a.Return > b.Call {
				return fmt.Errorf("lock op %d (%v token %d by %s, returned %v) overlaps the same client's later acquire, lock op %d (token %d, called %v)",
					a.ID, a.Kind, a.Token, a.Client, a.Return, b.ID, b.Token, b.Call)
			}
		}
		for _, bl := range h.Beliefs {
			if bl.Client == b.Client && bl.Resource == b.Resource && bl.Token != b.Token && bl.From <= b.Call && (bl.Open || bl.To > b.Call) {
				return fmt.Errorf("%s still believed it held token %d (until %v) when it called lock op %d, an acquire at %v", b.Client, bl.Token, bl.To, b.ID, b.Call)
			}
		}
	}
	return nil
}
