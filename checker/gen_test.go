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
	return History{Ops: ops, Grants: grants, Applies: applies, End: end + time.Millisecond}
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
