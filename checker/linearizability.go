package checker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

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

// opPartition is the operations of one resource in porcupine's encoding, with
// the StoreOps they came from at the same indices.
type opPartition = partition[registerInput, registerOutput, StoreOp]

// encodeOps converts a history's StoreOps to porcupine operations (see
// encodePartitions). An operation with OutcomeUnknown gets an open return.
func encodeOps(h History) []opPartition {
	return encodePartitions(h.Ops, h.End, func(op StoreOp) opRecord {
		return opRecord{resource: op.Resource, client: op.Client, id: op.ID, call: op.Call, ret: op.Return,
			open: op.Outcome == OutcomeUnknown}
	}, func(op StoreOp) (registerInput, registerOutput) {
		return registerInput{Resource: op.Resource, Kind: op.Kind, Token: op.Token, Value: op.Value},
			registerOutput{Outcome: op.Outcome, Value: op.ReadValue, Token: op.ReadToken}
	})
}

// LinearizabilityInfo runs the S8 check over the whole history in one
// porcupine call and returns everything porcupine.Visualize needs: the model,
// the encoded operations, the result and the linearization info. It exists
// for reports; Check runs the same model per resource so that it can say
// which resource failed or timed out.
func LinearizabilityInfo(h History, opt Options) (porcupine.Model, []porcupine.Operation, porcupine.CheckResult, porcupine.LinearizationInfo) {
	model := FencedRegisterModel()
	var ops []porcupine.Operation
	for _, p := range encodeOps(h) {
		ops = append(ops, p.ops()...)
	}
	res, info := porcupine.CheckOperationsVerbose(model, ops, opt.timeout())
	return model, ops, res, info
}

// partitionResult is the outcome of checking one resource.
type partitionResult struct {
	res  porcupine.CheckResult
	info porcupine.LinearizationInfo
}

// checkLinearizable checks S8, one porcupine call per resource run in
// parallel. It returns a violation per non-linearizable resource and, for
// each resource whose check timed out, a sentence saying so.
func checkLinearizable(h History, opt Options) ([]Violation, []string) {
	parts := encodeOps(h)
	model := FencedRegisterModel()
	timeout := opt.timeout()

	results := checkPartitions(model, len(parts), func(i int) bool {
		return linearizableQuickly(registerState{}, registerNext, parts[i].typed)
	}, func(i int) []porcupine.Operation { return parts[i].ops() }, opt)

	var vs []Violation
	var unknown []string
	for i, p := range parts {
		switch results[i].res {
		case porcupine.Illegal:
			vs = append(vs, linearizabilityViolation(model, p, results[i].info))
		case porcupine.Unknown:
			unknown = append(unknown, fmt.Sprintf("porcupine timed out after %v checking the %d store ops on resource %q", timeout, len(p.typed), p.resource))
		}
	}
	return vs, unknown
}

// checkPartitions runs one porcupine check per partition (per resource),
// in parallel: partitions are independent, and a run's resources are few.
// A partition that a quick search proves linearizable skips porcupine;
// only the others (in practice, the ones about to fail) pay for its
// search.
func checkPartitions(model porcupine.Model, n int, quick func(i int) bool, ops func(i int) []porcupine.Operation, opt Options) []partitionResult {
	timeout := opt.timeout()
	results := make([]partitionResult, n)
	var wg sync.WaitGroup
	for i := range n {
		if !opt.Exhaustive && quick(i) {
			results[i] = partitionResult{res: porcupine.Ok}
			continue
		}
		part := ops(i) // boxed here, not in the goroutine: ops caches
		wg.Go(func() {
			res, info := porcupine.CheckOperationsVerbose(model, part, timeout)
			results[i] = partitionResult{res: res, info: info}
		})
	}
	wg.Wait()
	return results
}

// maxDescribedOps caps how many operations a violation's Detail spells out.
const maxDescribedOps = 3

// stuckOps explains why porcupine found a partition illegal. It takes the
// longest partial linearization porcupine found (the lexically smallest among
// equals, for determinism), replays it to get the model's state, and returns
// the indices, in ops, of the ops that could come next in real-time order
// but that no state reached fits: the earliest place the history goes wrong.
func stuckOps(model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) (linearized int, state any, next []int) {
	var best []int
	if partials := info.PartialLinearizations(); len(partials) > 0 {
		for _, seq := range partials[0] {
			if len(seq) > len(best) || len(seq) == len(best) && slices.Compare(seq, best) < 0 {
				best = seq
			}
		}
	}

	state = model.Init()
	done := make([]bool, len(ops))
	for _, i := range best {
		_, state = model.Step(state, ops[i].Input, ops[i].Output)
		done[i] = true
	}
	minReturn := int64(math.MaxInt64)
	for i, op := range ops {
		if !done[i] {
			minReturn = min(minReturn, op.Return)
		}
	}
	for i, op := range ops {
		if !done[i] && op.Call <= minReturn {
			next = append(next, i)
		}
	}
	if len(next) == 0 { // defensive: porcupine said illegal, so some op is left
		for i := range ops {
			next = append(next, i)
		}
	}
	return len(best), state, next
}

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

// linearizabilityViolation builds the S8 violation for a resource porcupine
// found illegal, naming the ops stuckOps finds.
func linearizabilityViolation(model porcupine.Model, p opPartition, info porcupine.LinearizationInfo) Violation {
	linearized, state, idx := stuckOps(model, p.ops(), info)
	next := make([]StoreOp, len(idx)) // sorted by Call, as p.src is
	for i, j := range idx {
		next[i] = p.src[j]
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
			len(p.typed), p.resource, linearized, model.DescribeState(state), blockedSentence(len(next)), strings.Join(descs, "; "), moreSentence(len(next))),
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
