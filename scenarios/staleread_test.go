package scenarios

import (
	"cmp"
	"slices"
	"testing"

	"github.com/fencesim/fencesim/checker"
)

// plantOwnStaleRead rewrites one read of h as a store would answer it that
// serves a client the register as it was before that client's own
// just-acknowledged accepted write: the first read called at the very
// instant its client's previous store op, an accepted write, returned (the
// recorder stamps both with one instant). It returns the rewritten op's ID,
// or -1 if h has no such read.
func plantOwnStaleRead(h *checker.History) int {
	byClient := make(map[string][]int) // client → indices in h.Ops, in call order
	for i, op := range h.Ops {
		byClient[op.Client] = append(byClient[op.Client], i)
	}
	best := -1
	for _, idx := range byClient {
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(h.Ops[a].Call, h.Ops[b].Call), cmp.Compare(h.Ops[a].ID, h.Ops[b].ID))
		})
		for k := 1; k < len(idx); k++ {
			w, r := h.Ops[idx[k-1]], h.Ops[idx[k]]
			if w.Kind == checker.OpWrite && w.Outcome == checker.OutcomeAccepted && r.Kind == checker.OpRead &&
				r.Outcome == checker.OutcomeAccepted && r.Call == w.Return && (best < 0 || r.ID < h.Ops[best].ID) {
				best = idx[k]
				break
			}
		}
	}
	if best < 0 {
		return -1
	}
	r := &h.Ops[best]
	w := h.Ops[prevOpOf(h, best)]
	// The register before w: the store's last accepted write on the
	// resource before it applied w.
	var value int64
	var token uint64
	for _, a := range h.Applies {
		if a.Resource != r.Resource || !a.Accepted || a.Lost {
			continue
		}
		if a.Token == w.Token && a.Value == w.Value {
			break
		}
		value, token = a.Value, a.Token
	}
	r.ReadValue, r.ReadToken = value, token
	return r.ID
}

// prevOpOf returns the index of the store op of the same client that
// returned at the instant op i was called.
func prevOpOf(h *checker.History, i int) int {
	for j, op := range h.Ops {
		if j != i && op.Client == h.Ops[i].Client && op.Outcome != checker.OutcomeUnknown && op.Return == h.Ops[i].Call {
			return j
		}
	}
	return -1
}

// TestOwnStaleReadIsCaught plants, in real runs' histories, the stale read
// a review found S8 blind to: a client reads, at the instant its accepted
// write was acknowledged, the register as it was before that write. Real
// time alone leaves the two concurrent (the read may linearize first); the
// client's program order does not.
func TestOwnStaleReadIsCaught(t *testing.T) {
	for _, name := range []string{"kleppmann-gc-pause", "kleppmann-gc-pause-store-crash", "lock-server-restart", "partitioned-leader"} {
		spec, ok := Lookup(name)
		if !ok {
			t.Fatalf("no scenario %q", name)
		}
		for seed := uint64(1); seed <= 10; seed++ {
			res, err := Run(spec, seed, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h := res.History
			h.Ops = slices.Clone(h.Ops)
			id := plantOwnStaleRead(&h)
			if id < 0 {
				t.Fatalf("%s seed %d: no read right after its own client's accepted write to plant the stale read in", name, seed)
			}
			v := checker.Check(h, checker.Options{})
			caught := false
			for _, x := range v.Violations {
				caught = caught || x.Property == "S8" && slices.Contains(x.Ops, id)
			}
			if !caught {
				t.Errorf("%s seed %d: the stale read (op %d) is not caught by S8: %v %+v", name, seed, id, v.Kind, v.Violations)
			}
		}
	}
}
