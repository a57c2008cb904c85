package checker

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// propLinearizable is S8: per resource, the store operations as the clients
// saw them are linearizable against a fenced register. It catches store bugs
// that the store's own log would hide, judged only from client observations.
const propLinearizable = "S8"

// registerState is the state of one resource of the fenced store: the highest
// token accepted, the current value and the token of the write that value
// came from. It is a comparable value so porcupine can compare states with ==.
type registerState struct {
	Highest    uint64
	Value      int64
	ValueToken uint64
}

// registerInput is what a client sent; Resource is carried so that the
// history can be partitioned by resource.
type registerInput struct {
	Resource string
	Kind     OpKind
	Token    uint64
	Value    int64
}

// registerOutput is what a client observed.
type registerOutput struct {
	Outcome Outcome
	Value   int64  // read: value returned
	Token   uint64 // read: token of that value
}

// opMetadata ties a porcupine operation back to its StoreOp, for
// visualizations and violation details.
type opMetadata struct {
	ID     int
	Client string
}

// registerStep is the nondeterministic step of the fenced register: it returns
// every state the register may be in after the operation, or none if the
// observed outcome is impossible. A write is accepted iff its token is at
// least the highest accepted token. A write with an unknown outcome may have
// been applied or lost, so it yields both states; a read with an unknown
// outcome (or a "rejected" read, which the store never produces) constrains
// nothing.
func registerStep(state, input, output any) []any {
	return boxStates(registerNext(nil, state.(registerState), input.(registerInput), output.(registerOutput)))
}

// registerStable reports whether an op, wherever registerNext leaves the
// state unchanged, leaves unchanged every state it may be placed in
// later, so that the complete search may place it at once (see
// searchLinearization): a read, a refused write (it refuses the same
// state or none), and an unknown write, which, once its token is below
// the highest accepted, stays below it. An accepted write is not: equal
// to the register now, it may overwrite a later write.
func registerStable(in registerInput, out registerOutput) bool {
	return in.Kind != OpWrite || out.Outcome != OutcomeAccepted
}

// registerNext appends to dst the states s may move to (registerStep on
// concrete types, for the quick search).
func registerNext(dst []registerState, s registerState, in registerInput, out registerOutput) []registerState {
	switch in.Kind {
	case OpWrite:
		fits := in.Token >= s.Highest
		applied := registerState{Highest: in.Token, Value: in.Value, ValueToken: in.Token}
		switch out.Outcome {
		case OutcomeAccepted:
			if fits {
				return append(dst, applied)
			}
		case OutcomeRejected:
			if !fits {
				return append(dst, s)
			}
		case OutcomeUnknown:
			if fits {
				return append(dst, s, applied)
			}
			return append(dst, s)
		}
		return dst
	case OpRead:
		if out.Outcome != OutcomeAccepted {
			return append(dst, s)
		}
		if out.Value == s.Value && out.Token == s.ValueToken {
			return append(dst, s)
		}
		return dst
	}
	return dst
}

// boxStates hands typed successor states to porcupine, nil for none.
func boxStates[S any](next []S) []any {
	if len(next) == 0 {
		return nil
	}
	boxed := make([]any, len(next))
	for i, x := range next {
		boxed[i] = x
	}
	return boxed
}

// hashState mixes a registerState into 64 bits so porcupine's cache can skip
// most Equal calls.
func hashState(state any) uint64 {
	s := state.(registerState)
	h := uint64(14695981039346656037)
	for _, x := range [...]uint64{s.Highest, uint64(s.Value), s.ValueToken} {
		h ^= x
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// describeOperation renders an operation for porcupine's visualization.
func describeOperation(input, output any) string {
	in := input.(registerInput)
	out := output.(registerOutput)
	switch {
	case in.Kind == OpWrite:
		return fmt.Sprintf("write(%q, token %d, value %d) -> %v", in.Resource, in.Token, in.Value, out.Outcome)
	case out.Outcome == OutcomeAccepted:
		return fmt.Sprintf("read(%q) -> value %d from token %d", in.Resource, out.Value, out.Token)
	}
	return fmt.Sprintf("read(%q) -> %v", in.Resource, out.Outcome)
}

// describeState renders one possible register state for porcupine's
// visualization.
func describeState(state any) string {
	s := state.(registerState)
	return fmt.Sprintf("highest %d, value %d from token %d", s.Highest, s.Value, s.ValueToken)
}

// describeMetadata renders an operation's identity for porcupine's
// visualization.
func describeMetadata(info any) string {
	m, ok := info.(opMetadata)
	if !ok {
		return ""
	}
	return fmt.Sprintf("op %d by client %q", m.ID, m.Client)
}

// partitionByResource splits a history into one partition per resource, in
// ascending resource order, keeping each partition in history order. A fenced
// store's resources are independent registers, so the history is
// linearizable iff every partition is, and checking partitions separately
// keeps porcupine's search small.
var partitionByResource = partitionBy(func(in any) string { return in.(registerInput).Resource })

// partitionBy returns a porcupine Partition function that splits a history
// by the resource its inputs name, in ascending resource order.
func partitionBy(resource func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		if len(history) == 0 {
			return [][]porcupine.Operation{}
		}
		counts := make(map[string]int)
		for _, op := range history {
			counts[resource(op.Input)]++
		}
		if len(counts) == 1 {
			// One resource (Check passes one partition per resource): the
			// history is its own partition. Porcupine only reads it.
			return [][]porcupine.Operation{history}
		}
		resources := sortedKeys(counts)
		parts := make([][]porcupine.Operation, len(resources))
		all := make([]porcupine.Operation, 0, len(history))
		index := make(map[string]int, len(resources))
		off := 0
		for i, r := range resources {
			parts[i] = all[off : off : off+counts[r]]
			index[r] = i
			off += counts[r]
		}
		for _, op := range history {
			i := index[resource(op.Input)]
			parts[i] = append(parts[i], op)
		}
		return parts
	}
}

// FencedRegisterModel returns the porcupine model S8 checks against, so that
// callers can replay or visualize a check. Its state per resource is (highest
// accepted token, value, token of that value), initially (0, 0, 0); it
// partitions histories by resource and treats OutcomeUnknown as "may or may
// not have taken effect". Operations must come from LinearizabilityInfo's
// encoding of StoreOps.
func FencedRegisterModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:                 partitionByResource,
		Init:                      func() []any { return []any{registerState{}} },
		Step:                      registerStep,
		Hash:                      hashState,
		DescribeOperation:         describeOperation,
		DescribeState:             describeState,
		DescribeOperationMetadata: describeMetadata,
	}
	return nm.ToModel()
}

// opPartition is the operations of one resource, with the StoreOps they
// came from at the same indices.
type opPartition = partition[registerInput, registerOutput, StoreOp]

// encodeOps partitions a history's StoreOps (see encodePartitions). An
// operation with OutcomeUnknown has an open return; a read without an
// answer constrains nothing (the register may hold any value it likes as
// far as that read knows) and is left out.
func encodeOps(h History) []opPartition {
	return encodePartitions(h.Ops, func(op *StoreOp) opRecord {
		return opRecord{resource: op.Resource, client: op.Client, id: op.ID, call: op.Call, ret: op.Return,
			skip: op.Kind == OpRead && op.Outcome != OutcomeAccepted, open: op.Outcome == OutcomeUnknown}
	}, func(op *StoreOp) (registerInput, registerOutput) {
		return registerInput{Resource: op.Resource, Kind: op.Kind, Token: op.Token, Value: op.Value},
			registerOutput{Outcome: op.Outcome, Value: op.ReadValue, Token: op.ReadToken}
	})
}

// DefaultViewTimeout is porcupine's wall-clock budget in
// LinearizabilityInfo and LockLinearizabilityInfo when they are given 0.
// It bounds a report's view only; no verdict depends on it.
const DefaultViewTimeout = 10 * time.Second

// viewTimeout returns the budget to hand porcupine, where 0 means no limit.
func viewTimeout(timeout time.Duration) time.Duration {
	switch {
	case timeout == 0:
		return DefaultViewTimeout
	case timeout < 0:
		return 0
	}
	return timeout
}

// LinearizabilityInfo runs S8's model over the whole history in one
// porcupine call, within timeout of wall-clock time (0: DefaultViewTimeout;
// negative: no limit), and returns everything porcupine.Visualize needs:
// the model, the encoded operations, the result and the linearization
// info. It exists for reports and as a cross-check: Check decides with the
// project's own search, never with porcupine. Porcupine sees program order
// through re-timed operations (see porcupineTimes); exact reports whether
// that encoding orders the ops exactly as Check does (when it is false,
// porcupine is stricter, and may call illegal a history Check passes).
func LinearizabilityInfo(h History, timeout time.Duration) (model porcupine.Model, ops []porcupine.Operation, res porcupine.CheckResult, info porcupine.LinearizationInfo, exact bool) {
	model = FencedRegisterModel()
	ops, exact = boxPartitions(encodeOps(h))
	res, info = porcupine.CheckOperationsVerbose(model, ops, viewTimeout(timeout))
	return model, ops, res, info, exact
}

// boxPartitions concatenates partitions in porcupine's encoding, and says
// whether every one is exact.
func boxPartitions[I, O, S any](parts []partition[I, O, S]) ([]porcupine.Operation, bool) {
	var ops []porcupine.Operation
	exact := true
	for i := range parts {
		ops = append(ops, parts[i].ops()...)
		exact = exact && parts[i].exact
	}
	return ops, exact
}

// checkLinearizable checks S8 with searchLinearization, one search per
// resource. It returns a violation per non-linearizable resource and, for
// each resource whose search ran out of steps, a sentence saying so.
func checkLinearizable(h History, opt Options) ([]Violation, []string) {
	parts := encodeOps(h)
	results := searchPartitions(parts, registerByTokens, registerState{}, registerNext, registerStable, nil, nil, opt)
	var vs []Violation
	var unknown []string
	for i, p := range parts {
		switch results[i].verdict {
		case searchIllegal:
			vs = append(vs, linearizabilityViolation(p, results[i]))
		case searchExhausted, searchMemoryFull:
			unknown = append(unknown, exhaustedSentence(opt, results[i].verdict, len(p.typed), "store", p.resource))
		}
	}
	return vs, unknown
}

// exhaustedSentence says which partition ran out of which budget.
func exhaustedSentence(opt Options, v searchVerdict, n int, what, resource string) string {
	if v == searchMemoryFull {
		return fmt.Sprintf("the linearizability search of the %d %s ops on resource %q reached its bound of %d bytes of memo and work lists (Options.SearchBytes) before deciding", n, what, resource, opt.searchBytes())
	}
	return fmt.Sprintf("the linearizability search of the %d %s ops on resource %q ran out of its budget of %d model steps (Options.Steps) before deciding", n, what, resource, opt.steps())
}

// explainSteps is the step budget the search gets to explain a partition
// the token-order procedure found illegal (the deepest prefix and the ops
// that cannot come next); past it the violation gives the procedure's own
// reason. A refutation is rare, and this bounds what it costs.
const explainSteps = 2_000_000

// searchPartitions decides every partition, in parallel: partitions are
// independent, and a run's resources are few. decide, the token-order
// procedure, decides first; what it leaves undecided, the searches do:
// the quick search proves
// most partitions linearizable in about one pass (and ambiguous lock
// histories the complete search would branch on); searchLinearization
// decides the rest. A panic in a search is raised again here, as a
// *Panic, once every search has ended. Each result depends only on its partition and the
// budgets: the quick search's model steps are charged to the partition's
// step budget (see quickSteps), and the complete search gets the rest.
func searchPartitions[S comparable, I, O, R any](parts []partition[I, O, R], decide func([]typedOp[I, O]) tokenResult, init S, step func([]S, S, I, O) []S, stable func(I, O) bool, covers func(a, b S) bool, coarse func(S) S, opt Options) []searchResult[S] {
	results := make([]searchResult[S], len(parts))
	panics := make([]*Panic, len(parts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					panics[i] = &Panic{Value: r, Stack: debug.Stack()}
				}
			}()
			if opt.SearchHook != nil {
				opt.SearchHook(parts[i].resource)
			}
			total := opt.steps()
			var byTokens tokenResult
			if decide != nil && !opt.SearchOnly {
				byTokens = decide(parts[i].typed)
			}
			switch byTokens.decision {
			case tokenLinearizable:
				results[i] = searchResult[S]{verdict: searchOK, linearized: -1, byTokens: true}
				return
			case tokenIllegal:
				// The search explains the refutation, within a smaller
				// budget; it cannot find a linearization the rules
				// refute (if it did, its witness would stand).
				if total < 0 || total > explainSteps {
					total = explainSteps
				}
			}
			defer func() {
				if byTokens.decision == tokenIllegal && (results[i].verdict == searchExhausted || results[i].verdict == searchMemoryFull) {
					results[i] = searchResult[S]{verdict: searchIllegal, steps: results[i].steps, linearized: -1, byTokens: true,
						why: byTokens.why, involved: byTokens.involved}
				}
			}()
			ok, used := linearizableQuickly(init, step, covers, coarse, parts[i].typed, quickSteps(len(parts[i].typed), total))
			if ok {
				results[i] = searchResult[S]{verdict: searchOK, steps: used, linearized: -1}
				return
			}
			rest := total
			if total >= 0 {
				rest = total - used
			}
			results[i] = searchLinearization(init, step, stable, covers, coarse, parts[i].typed, searchBudget{rest, opt.searchBytes()})
			results[i].steps += used
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	return results
}

// maxDescribedOps caps how many operations a violation's Detail spells out.
const maxDescribedOps = 3

// blockedSentence says how many ops could come next, for violation details.
func blockedSentence(n int) string {
	if n > 1 {
		return fmt.Sprintf("none of the %d ops that could come next fits", n)
	}
	return "the only op that could come next does not fit"
}

// moreSentence names how many ops a detail left out.
func moreSentence(n int) string {
	if n > maxDescribedOps {
		return fmt.Sprintf(" and %d more", n-maxDescribedOps)
	}
	return ""
}

// linearizabilityViolation builds the S8 violation for a resource the
// search found illegal, from the deepest prefix it reached: how many ops
// linearize, the register they leave, and the ops that could come next
// but do not fit.
func linearizabilityViolation(p opPartition, r searchResult[registerState]) Violation {
	if r.why != "" {
		return tokenViolation(propLinearizable, "store ops", "a fenced register", p.resource, len(p.typed), r.why, r.involved, func(i int) (int, string, time.Duration) {
			return p.src(i).ID, describeStoreOp(p.src(i)), p.src(i).Call
		})
	}
	next := make([]StoreOp, len(r.stuck)) // sorted by Call, as p.src is
	for i, j := range r.stuck {
		next[i] = p.src(j)
	}
	ids := make([]int, len(next))
	descs := make([]string, 0, maxDescribedOps)
	for i, op := range next {
		ids[i] = op.ID
		if i < maxDescribedOps {
			descs = append(descs, describeStoreOp(op))
		}
	}
	slices.Sort(ids)
	return Violation{
		Property: propLinearizable,
		At:       next[0].Call,
		Detail: fmt.Sprintf("The %d store ops on resource %q are not linearizable against a fenced register: at most %d of them linearize, leaving the register at %s, and %s (%s%s).",
			len(p.typed), p.resource, r.linearized, describeState(r.state), blockedSentence(len(next)), strings.Join(descs, "; "), moreSentence(len(next))),
		Ops: ids,
	}
}

// describeStoreOp renders a StoreOp for violation details.
func describeStoreOp(op StoreOp) string {
	var what string
	switch {
	case op.Kind == OpWrite:
		what = fmt.Sprintf("write token %d value %d -> %v", op.Token, op.Value, op.Outcome)
	case op.Outcome == OutcomeAccepted:
		what = fmt.Sprintf("read -> value %d from token %d", op.ReadValue, op.ReadToken)
	default:
		what = fmt.Sprintf("read -> %v", op.Outcome)
	}
	ret := "never returned"
	if op.Outcome != OutcomeUnknown {
		ret = "returned " + op.Return.String()
	}
	return fmt.Sprintf("op %d by client %q: %s, called %v, %s", op.ID, op.Client, what, op.Call, ret)
}

// tokenViolation builds the violation of a partition the token-order
// procedure refuted and the search did not explain within its budget:
// the rule's reason and the ops it concerns (partition indices; describe
// gives an op's ID, description and call).
func tokenViolation(property, what, model, resource string, n int, why string, involved []int, describe func(int) (int, string, time.Duration)) Violation {
	ids := make([]int, len(involved))
	descs := make([]string, 0, maxDescribedOps)
	var at time.Duration
	for k, i := range involved {
		id, desc, call := describe(i)
		ids[k] = id
		if k == 0 || call < at {
			at = call
		}
		if k < maxDescribedOps {
			descs = append(descs, desc)
		}
	}
	slices.Sort(ids)
	v := Violation{Property: property, At: at,
		Detail: fmt.Sprintf("The %d %s on resource %q are not linearizable against %s: %s (%s%s).", n, what, resource, model, why, strings.Join(descs, "; "), moreSentence(len(involved)))}
	if property == propLockLinearizable {
		v.LockOps = ids
	} else {
		v.Ops = ids
	}
	return v
}
