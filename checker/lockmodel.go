package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// propLockLinearizable is S7: per resource, the lock operations as the
// clients saw them are linearizable against a fenced mutex whose lease may
// expire at any moment. It catches a service that answers in a way no single
// lock could, judged only from client observations; S5 and S6 judge the
// service's own records.
//
// The model's state is (holder, token, last token granted). Expiry is a
// non-deterministic release: before any operation the holder may have lost
// the lock. Then:
//
//   - acquire by c → granted(t): the lock is free and t is above the last
//     token (a fresh grant), or c already holds it and t is its token (a
//     holder's fresh attempt is answered with the same grant);
//   - acquire → busy: someone other than c holds the lock;
//   - renew(t) by c → renewed: c holds the lock with t;
//   - release(t) by c → released: c holds the lock with t; the lock is free;
//   - renew or release → not-holder: c does not hold the lock with t, which
//     expiry always allows (but which rules out renewing t afterwards);
//   - invalid answers change nothing;
//   - unknown, overloaded, not-leader and stale answers are ambiguous: the
//     operation has an open return and may or may not take effect. Such an
//     answer speaks for one copy of the request
//     only, and the client may have sent others under the same request id
//     (retries after a timeout, duplicates on the wire) that did take
//     effect. An ambiguous acquire that took effect granted a token the
//     client never learned; the model then knows only a lower bound for it.
//
// Renewals never change the state (expiry is already free to happen at any
// moment), so renewals whose answer is not renewed or not-holder, and
// invalid requests, constrain nothing and are left out of the check.
const propLockLinearizable = "S7"

// lockState is one resource of the fenced mutex. Holder is "" when the lock
// is free. Token 0 while held means the holder's token is unknown (from an
// ambiguous acquire) and at least Last. Last is the highest token granted on
// the resource, or a lower bound of it once an unknown token was granted.
type lockState struct {
	Holder string
	Token  uint64
	Last   uint64
}

// lockInput is what a client sent; Resource is carried so that the history
// can be partitioned by resource.
type lockInput struct {
	Resource string
	Client   string
	Kind     LockKind
	Token    uint64 // renew, release: the token sent
}

// lockOutput is what a client observed.
type lockOutput struct {
	Outcome LockStatus
	Token   uint64 // acquire: the token granted
}

// lockEffect is what an answer means for the model.
type lockEffect uint8

const (
	effNothing    lockEffect = iota // changes nothing, constrains nothing
	effGranted                      // acquire granted
	effBusy                         // acquire busy
	effRenewed                      // renew renewed
	effReleased                     // release released
	effNotHolder                    // renew or release not-holder
	effAmbiguous                    // may or may not have taken effect
	effImpossible                   // an answer the service never gives to this kind
)

// lockEffectOf classifies an answer to an operation of kind k.
func lockEffectOf(k LockKind, out LockStatus) lockEffect {
	switch out {
	case LockInvalid:
		return effNothing
	case LockUnknown, LockOverloaded, LockNotLeader, LockStale:
		if k == LockRenew {
			return effNothing // a renewal changes no state either way
		}
		return effAmbiguous
	}
	switch {
	case k == LockAcquire && out == LockGranted:
		return effGranted
	case k == LockAcquire && out == LockBusy:
		return effBusy
	case k == LockRenew && out == LockRenewed:
		return effRenewed
	case k == LockRelease && out == LockReleased:
		return effReleased
	case (k == LockRenew || k == LockRelease) && out == LockNotHolder:
		return effNotHolder
	}
	return effImpossible
}

// holds reports whether client may hold the lock with token in state p.
func (p lockState) holds(client string, token uint64) bool {
	return p.Holder == client && (p.Token == token || p.Token == 0 && token >= p.Last)
}

// lockStep is the nondeterministic step of the fenced mutex: every state the
// mutex may be in after the operation, or none if the observed answer is
// impossible.
func lockStep(state, input, output any) []any {
	var buf [4]lockState
	return boxStates(lockNext(buf[:0], state.(lockState), input.(lockInput), output.(lockOutput)))
}

// lockNext appends to dst the distinct states s may move to (lockStep on
// concrete types, for the quick search): at most two candidates — s as is,
// or with its lease expired — each with at most two successors.
func lockNext(dst []lockState, s lockState, in lockInput, out lockOutput) []lockState {
	eff := lockEffectOf(in.Kind, out.Outcome)
	start := len(dst)
	add := func(x lockState) {
		if !slices.Contains(dst[start:], x) {
			dst = append(dst, x)
		}
	}
	candidates := [2]lockState{s, {Last: s.Last}}
	nc := 1
	if s.Holder != "" {
		nc = 2
	}
	for _, p := range candidates[:nc] {
		switch eff {
		case effNothing:
			add(p)
		case effGranted:
			switch {
			case p.Holder == "" && out.Token > p.Last:
				add(lockState{Holder: in.Client, Token: out.Token, Last: out.Token})
			case p.holds(in.Client, out.Token):
				add(lockState{Holder: in.Client, Token: out.Token, Last: max(p.Last, out.Token)})
			}
		case effBusy:
			if p.Holder != "" && p.Holder != in.Client {
				add(p)
			}
		case effRenewed:
			if p.holds(in.Client, in.Token) {
				add(lockState{Holder: in.Client, Token: in.Token, Last: max(p.Last, in.Token)})
			}
		case effReleased:
			if p.holds(in.Client, in.Token) {
				add(lockState{Last: max(p.Last, in.Token)})
			}
		case effNotHolder:
			if p.Holder != in.Client || p.Token != in.Token {
				add(p)
			}
		case effAmbiguous:
			add(p)
			switch {
			case in.Kind == LockAcquire && p.Holder == "":
				add(lockState{Holder: in.Client, Last: p.Last + 1})
			case in.Kind == LockRelease && p.holds(in.Client, in.Token):
				add(lockState{Last: max(p.Last, in.Token)})
			}
		}
	}
	return dst
}

// lockStable reports whether an op, wherever lockNext leaves the state
// unchanged, leaves unchanged every state it may be placed in later (see
// searchLinearization): an answer that changes nothing (effNothing), busy
// and not-holder (each keeps the state or refuses it), and renewed: a
// renewal of token t leaves the state as is only where its holder holds
// t, so Last >= t; later the renewal changes the state only where the
// holder's token is unknown and Last <= t, but an unknown token comes
// from an ambiguous acquire, which sets Last above every token before,
// and Last never falls. A grant is not stable: a grant of the token the
// client holds leaves the state as is now, and grants it afresh later.
func lockStable(in lockInput, out lockOutput) bool {
	switch lockEffectOf(in.Kind, out.Outcome) {
	case effNothing, effBusy, effNotHolder, effRenewed:
		return true
	}
	return false
}

// lockCovers is the mutex's simulation preorder for the search: a state
// with the same holder and token and a lower bound Last on the tokens
// granted accepts every sequence of answers the other accepts, since Last
// only ever bars tokens (a fresh grant must exceed it, an unknown token is
// at least it) and every step keeps the order (it sets Last to the same
// token, to the max of it and the same token, or adds one to it).
func lockCovers(a, b lockState) bool {
	return a.Holder == b.Holder && a.Token == b.Token && a.Last <= b.Last
}

// lockClass is the part of a state lockCovers needs equal.
func lockClass(s lockState) lockState { return lockState{Holder: s.Holder, Token: s.Token} }

func hashLockState(state any) uint64 {
	s := state.(lockState)
	h := uint64(14695981039346656037)
	for i := 0; i < len(s.Holder); i++ {
		h ^= uint64(s.Holder[i])
		h *= 1099511628211
	}
	for _, x := range [...]uint64{s.Token, s.Last} {
		h ^= x
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// describeLockOperation renders an operation for porcupine's visualization.
func describeLockOperation(input, output any) string {
	in := input.(lockInput)
	out := output.(lockOutput)
	switch {
	case in.Kind == LockAcquire && out.Outcome == LockGranted:
		return fmt.Sprintf("acquire(%q) by %q -> granted token %d", in.Resource, in.Client, out.Token)
	case in.Kind == LockAcquire:
		return fmt.Sprintf("acquire(%q) by %q -> %s", in.Resource, in.Client, out.Outcome)
	}
	return fmt.Sprintf("%v(%q, token %d) by %q -> %s", in.Kind, in.Resource, in.Token, in.Client, out.Outcome)
}

// describeLockState renders one possible mutex state.
func describeLockState(state any) string {
	s := state.(lockState)
	switch {
	case s.Holder == "":
		return fmt.Sprintf("free (last token %d)", s.Last)
	case s.Token == 0:
		return fmt.Sprintf("held by %q with a token it never learned, at least %d", s.Holder, s.Last)
	}
	return fmt.Sprintf("held by %q with token %d (last token %d)", s.Holder, s.Token, s.Last)
}

// describeLockStates renders the set of states the nondeterministic mutex
// may be in, for violation details.
func describeLockStates(states any) string {
	ss, ok := states.([]any)
	if !ok {
		return describeLockState(states)
	}
	descs := make([]string, len(ss))
	for i, s := range ss {
		descs[i] = describeLockState(s)
	}
	slices.Sort(descs)
	return strings.Join(descs, " or ")
}

// partitionLocksByResource splits a lock history per resource: resources
// are independent mutexes, so the history is linearizable iff every
// partition is.
var partitionLocksByResource = partitionBy(func(in any) string { return in.(lockInput).Resource })

// FencedMutexModel returns the porcupine model S7 checks against, so that
// callers can replay or visualize a check. Its state per resource is
// (holder, token, last token), initially free with last token 0; the holder
// may lose the lock before any operation. Operations must come from
// LockLinearizabilityInfo's encoding of LockOps.
func FencedMutexModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:                 partitionLocksByResource,
		Init:                      func() []any { return []any{lockState{}} },
		Step:                      lockStep,
		Hash:                      hashLockState,
		DescribeOperation:         describeLockOperation,
		DescribeState:             describeLockState,
		DescribeOperationMetadata: describeMetadata,
	}
	return nm.ToModel()
}

// lockPartition is the lock operations of one resource, with the LockOps
// they came from at the same indices.
type lockPartition = partition[lockInput, lockOutput, LockOp]

// encodeLockOps partitions a history's LockOps (see encodePartitions).
// Operations that constrain nothing are left out — among them every
// renewal without an answer, the lock's only query — and ambiguous ones
// have an open return. Ambiguous releases are left out too, exactly: a
// release of token t by c that takes effect at some point leaves the
// mutex free with last token max(L, t); an expiry at the same point
// leaves it free with last token L ≤ that, a state that covers it (see
// lockCovers: every sequence of answers accepted from the release's
// state is accepted from the expiry's), and expiry is free to happen at
// any point. So a linearization with the release taking effect gives one
// without it, and the search need not branch on it: an ambiguous release
// among ambiguous acquires was much of what made the search explode.
func encodeLockOps(h History) []lockPartition {
	return encodePartitions(h.LockOps, func(op *LockOp) opRecord {
		eff := lockEffectOf(op.Kind, op.Outcome)
		return opRecord{resource: op.Resource, client: op.Client, id: op.ID, call: op.Call, ret: op.Return,
			skip: eff == effNothing || eff == effAmbiguous && op.Kind == LockRelease, open: eff == effAmbiguous}
	}, func(op *LockOp) (lockInput, lockOutput) {
		return lockInput{Resource: op.Resource, Client: op.Client, Kind: op.Kind, Token: lockSentToken(*op)},
			lockOutput{Outcome: op.Outcome, Token: lockGrantedToken(*op)}
	})
}

// lockSentToken is the token a renew or release sent (0 for an acquire).
func lockSentToken(op LockOp) uint64 {
	if op.Kind == LockAcquire {
		return 0
	}
	return op.Token
}

// lockGrantedToken is the token an acquire returned (0 otherwise).
func lockGrantedToken(op LockOp) uint64 {
	if op.Kind == LockAcquire {
		return op.Token
	}
	return 0
}

// LockLinearizabilityInfo is LinearizabilityInfo for S7's model: one
// porcupine call over the whole lock history, for reports and as a
// cross-check. Lock operations that constrain nothing (see S7) are not
// among the returned operations.
func LockLinearizabilityInfo(h History, timeout time.Duration) (model porcupine.Model, ops []porcupine.Operation, res porcupine.CheckResult, info porcupine.LinearizationInfo, exact bool) {
	model = FencedMutexModel()
	ops, exact = boxPartitions(encodeLockOps(h))
	res, info = porcupine.CheckOperationsVerbose(model, ops, viewTimeout(timeout))
	return model, ops, res, info, exact
}

// checkLockLinearizable checks S7 with searchLinearization, one search per
// resource. It returns a violation per non-linearizable resource and, for
// each resource whose search ran out of steps, a sentence saying so.
func checkLockLinearizable(h History, opt Options) ([]Violation, []string) {
	parts := encodeLockOps(h)
	results := searchPartitions(parts, lockByTokens, lockState{}, lockNext, lockStable, lockCovers, lockClass, opt)
	var vs []Violation
	var unknown []string
	for i, p := range parts {
		switch results[i].verdict {
		case searchIllegal:
			vs = append(vs, lockViolation(p, results[i]))
		case searchExhausted, searchMemoryFull:
			unknown = append(unknown, exhaustedSentence(opt, results[i].verdict, len(p.typed), "lock", p.resource))
		}
	}
	return vs, unknown
}

// lockViolation builds the S7 violation for a resource the search found
// illegal, from the deepest prefix it reached.
func lockViolation(p lockPartition, r searchResult[lockState]) Violation {
	if r.why != "" {
		return tokenViolation(propLockLinearizable, "lock ops", "a fenced mutex", p.resource, len(p.typed), r.why, r.involved, func(i int) (int, string, time.Duration) {
			return p.src(i).ID, describeLockOp(p.src(i)), p.src(i).Call
		})
	}
	ids := make([]int, len(r.stuck))
	descs := make([]string, 0, maxDescribedOps)
	for i, j := range r.stuck {
		ids[i] = p.src(j).ID
		if i < maxDescribedOps {
			descs = append(descs, describeLockOp(p.src(j)))
		}
	}
	slices.Sort(ids)
	return Violation{
		Property: propLockLinearizable,
		At:       p.src(r.stuck[0]).Call,
		Detail: fmt.Sprintf("The %d lock ops on resource %q are not linearizable against a fenced mutex: at most %d of them linearize, leaving the lock %s, and %s (%s%s).",
			len(p.typed), p.resource, r.linearized, describeLockState(r.state), blockedSentence(len(r.stuck)), strings.Join(descs, "; "), moreSentence(len(r.stuck))),
		LockOps: ids,
	}
}

// describeLockOp renders a LockOp for violation details.
func describeLockOp(op LockOp) string {
	var what string
	switch {
	case op.Kind == LockAcquire && op.Outcome == LockGranted:
		what = fmt.Sprintf("acquire -> granted token %d", op.Token)
	case op.Kind == LockAcquire:
		what = fmt.Sprintf("acquire -> %s", op.Outcome)
	default:
		what = fmt.Sprintf("%v token %d -> %s", op.Kind, op.Token, op.Outcome)
	}
	ret := "never returned"
	switch {
	case lockEffectOf(op.Kind, op.Outcome) == effAmbiguous && op.Outcome != LockUnknown:
		ret = "returned " + op.Return.String() + " (ambiguous)"
	case op.Outcome != LockUnknown:
		ret = "returned " + op.Return.String()
	}
	return fmt.Sprintf("lock op %d by client %q: %s, called %v, %s", op.ID, op.Client, what, op.Call, ret)
}
