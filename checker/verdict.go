package checker

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
)

// VerdictKind classifies the result of a check, so that callers can tell a
// refutation from a proof and from an inconclusive run.
type VerdictKind uint8

// The kinds of verdict. They carry a Verdict prefix because the type
// Violation already takes that name.
const (
	// VerdictPass means every property held.
	VerdictPass VerdictKind = iota
	// VerdictViolation means at least one safety property was refuted.
	VerdictViolation
	// VerdictLiveness means every safety property was proven but the run
	// failed to make progress after its heal (with safety unknown, the
	// verdict stays VerdictUnknown and carries the liveness failure). Check never produces it;
	// Combine does, from Check's verdict and CheckLiveness's result.
	VerdictLiveness
	// VerdictUnknown means no violation was found but a check could not
	// finish (a linearizability search ran out of steps), so safety is not proven.
	VerdictUnknown
	// VerdictCrash means the run itself panicked (the service, a client,
	// the harness or the checker), so nothing was judged. Check never
	// produces it; the harness does, for the one seed that crashed.
	VerdictCrash
)

// String returns "pass", "violation", "liveness", "unknown" or "crash", the words
// reports and JSON use.
func (k VerdictKind) String() string {
	switch k {
	case VerdictPass:
		return "pass"
	case VerdictViolation:
		return "violation"
	case VerdictLiveness:
		return "liveness"
	case VerdictUnknown:
		return "unknown"
	case VerdictCrash:
		return "crash"
	}
	return fmt.Sprintf("VerdictKind(%d)", uint8(k))
}

// MarshalText encodes the kind as its String, so that saved verdicts stay
// readable and do not depend on the numbering of the constants.
func (k VerdictKind) MarshalText() ([]byte, error) {
	switch k {
	case VerdictPass, VerdictViolation, VerdictLiveness, VerdictUnknown, VerdictCrash:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("checker: invalid VerdictKind %d", uint8(k))
}

// UnmarshalText decodes a kind written by MarshalText, so that saved verdicts
// can be compared with new ones.
func (k *VerdictKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "pass":
		*k = VerdictPass
	case "violation":
		*k = VerdictViolation
	case "liveness":
		*k = VerdictLiveness
	case "unknown":
		*k = VerdictUnknown
	case "crash":
		*k = VerdictCrash
	default:
		return fmt.Errorf("checker: invalid VerdictKind %q", b)
	}
	return nil
}

// SafetyProperties are the names of the safety properties a violation
// may refute, in order: Check's S1–S11 and CheckLeaseSafety's L1.
func SafetyProperties() []string {
	return []string{propTokens, propGrantOverlap, propStoreMonotonic, propStoreGrantee, propDurable,
		propCurrentGrant, propLockLinearizable, propLinearizable, propElection, propStateMachine, propRequestOnce, propLeaseSafety}
}

// LivenessProperty is the property of the violation CheckLiveness reports.
const LivenessProperty = propLiveness

// Violation is one refutation of a property, with enough context (time, step,
// a one-sentence detail and the operations involved) to find it in a trace.
type Violation struct {
	// Property is the property refuted, "S1".."S11", or "liveness" for the
	// violation CheckLiveness reports.
	Property string `json:"property"`
	// At is the true time of the offending event.
	At time.Duration `json:"at"`
	// Step is the simulator step of the offending event, 0 if the event has
	// no step (store operations do not).
	Step uint64 `json:"step"`
	// Detail is one sentence naming the tokens, clients, resources and times.
	Detail string `json:"detail"`
	// Ops lists the IDs of the StoreOps involved, if any.
	Ops []int `json:"ops,omitempty"`
	// LockOps lists the IDs of the LockOps involved, if any.
	LockOps []int `json:"lock_ops,omitempty"`
}

// Verdict is the outcome of Check: its kind plus every violation found, so
// that one run reports all its failures rather than the first.
type Verdict struct {
	Kind VerdictKind `json:"kind"`
	// Violations holds every violation found, ordered by property, then At.
	Violations []Violation `json:"violations,omitempty"`
	// Unknown says why a linearizability check was inconclusive. It is set
	// when the verdict is VerdictUnknown (kept by Combine, which lets no
	// liveness failure outrank it); it is empty otherwise.
	Unknown string `json:"unknown,omitempty"`
	// Liveness is the liveness failure Combine merged in, if any. Check
	// never sets it.
	Liveness *Violation `json:"liveness,omitempty"`
	// Metrics measures the run without judging it.
	Metrics Metrics `json:"metrics"`
}

// Metrics are measurements of a run that are reported, never failed.
type Metrics struct {
	// BeliefOverlap measures the windows in which two clients believed
	// they held the same lock.
	BeliefOverlap OverlapStats `json:"belief_overlap"`
}

// Property returns the first safety violation's property, else "liveness"
// if the verdict is a liveness failure, else "", so that callers and tests
// can name the failure in one word. An unknown verdict names no property,
// even with a liveness failure merged in: its headline is that safety was
// not proven.
func (v Verdict) Property() string {
	switch {
	case len(v.Violations) > 0:
		return v.Violations[0].Property
	case v.Liveness != nil && v.Kind == VerdictLiveness:
		return v.Liveness.Property
	}
	return ""
}

// Options tunes Check; the zero value is ready to use. It holds no
// wall-clock budget: every budget that can change a verdict counts model
// steps, so that a verdict is a function of the history (of the seed),
// whatever the machine's load.
type Options struct {
	// Steps is the budget of model steps of each linearizability search
	// (one per resource, for S7 and for S8). 0 means DefaultSteps; a
	// negative value means no limit. A search that runs out makes the
	// verdict VerdictUnknown, saying which resource and budget.
	Steps int64
	// SearchBytes bounds the memory of each linearizability search,
	// counted from the lengths of what it keeps (deterministic, unlike the
	// runtime's figures). 0 means DefaultSearchBytes; a negative value
	// means no limit. A search that reaches it makes the verdict
	// VerdictUnknown, saying which resource and bound.
	SearchBytes int64
	// SearchOnly leaves the token-order procedure out: every partition is
	// decided by the searches alone, as before it existed. It is for
	// cross-checks (the procedure must agree with the complete search
	// wherever the search decides) and for tests of the search's budgets.
	SearchOnly bool
	// SearchHook, if set, is called with the resource at the start of
	// each partition's search, in the goroutine that searches it. It is for
	// tests: a panic in it stands for a panic in the search, which must
	// reach Check's caller (see Panic).
	SearchHook func(resource string)
}

// Panic is a panic in one of the goroutines Check searches in, raised
// again in Check's goroutine so that its caller can recover it (a
// panic in another goroutine kills the process): Value is what was
// raised and Stack the stack of the goroutine it was raised in.
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) String() string { return fmt.Sprint(p.Value) }

// searchBytes returns the byte bound to hand the search, where negative
// means no limit.
func (o Options) searchBytes() int64 {
	if o.SearchBytes == 0 {
		return DefaultSearchBytes
	}
	return o.SearchBytes
}

// steps returns the budget to hand the search, where negative means no
// limit.
func (o Options) steps() int64 {
	if o.Steps == 0 {
		return DefaultSteps
	}
	return o.Steps
}

// Check judges a history against every safety property (S1–S11) and returns
// the verdict: VerdictViolation if any property is refuted, else
// VerdictUnknown if a linearizability search ran out of steps or bytes, else
// VerdictPass. It never judges liveness (see CheckLiveness and Combine), but
// it fills Verdict.Metrics whatever the verdict. It never mutates h.
func Check(h History, opt Options) Verdict {
	h = h.facts()
	var vs []Violation
	var lockLin, lin []Violation
	var lockUnknown, unknown []string
	var metrics Metrics
	inParallel(
		func() { lockLin, lockUnknown = checkLockLinearizable(h, opt) },
		func() { lin, unknown = checkLinearizable(h, opt) },
		func() {
			vs = append(vs, checkTokens(h.Grants)...)
			vs = append(vs, checkGrantOverlap(h.Grants)...)
			vs = append(vs, checkStoreMonotonic(h.Applies)...)
			byToken := grantsByToken(h.Grants) // S4, S5 and S6 look grants up by token
			vs = append(vs, checkStoreGrantee(h.Applies, byToken)...)
			vs = append(vs, checkDurable(h, byToken)...)
			vs = append(vs, checkCurrentGrant(h, byToken)...)
			vs = append(vs, checkElections(h.Elections)...)
			vs = append(vs, checkEntryApplies(h.EntryApplies)...)
			vs = append(vs, checkRequestsOnce(h.Grants)...)
			vs = append(vs, checkGrantsAnswerAcquires(h)...)
			metrics.BeliefOverlap = BeliefOverlap(h)
		},
	)
	vs = append(vs, lockLin...)
	vs = append(vs, lin...)
	unknown = append(lockUnknown, unknown...)
	sortViolations(vs)

	switch {
	case len(vs) > 0:
		return Verdict{Kind: VerdictViolation, Violations: vs, Metrics: metrics}
	case len(unknown) > 0:
		return Verdict{Kind: VerdictUnknown, Unknown: strings.Join(unknown, "; "), Metrics: metrics}
	}
	return Verdict{Kind: VerdictPass, Metrics: metrics}
}

// Concurrently runs independent checks at once and waits for all of them
// (see inParallel): a caller that judges a run with several of the
// checker's functions (Check, CheckLeaseSafety, CheckLiveness) gets the
// verdict in about the time of the longest. The checks must only read
// what they share. Never call it from inside the simulation.
func Concurrently(checks ...func()) { inParallel(checks...) }

// inParallel runs the checker's independent parts at once (they only
// read the history) and waits for all of them: the checker's wall time
// is then close to its longest part's, not their sum, on a machine with
// cores to spare. A panic in a part is raised again in the caller's
// goroutine, as a *Panic (see Panic), once every part has ended; the
// first part's panic wins, so which one is raised does not depend on
// timing.
func inParallel(parts ...func()) {
	panics := make([]*Panic, len(parts))
	var wg sync.WaitGroup
	for i, f := range parts {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					if p, ok := r.(*Panic); ok {
						panics[i] = p
						return
					}
					panics[i] = &Panic{Value: r, Stack: debug.Stack()}
				}
			}()
			f()
		})
	}
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
}

// sortViolations orders violations by property, then At, then Step, then
// Detail, so that the output is total-ordered and hence deterministic.
func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		return cmp.Or(
			comparePropertyNames(a.Property, b.Property),
			cmp.Compare(a.At, b.At),
			cmp.Compare(a.Step, b.Step),
			strings.Compare(a.Detail, b.Detail),
			slices.Compare(a.Ops, b.Ops),
			slices.Compare(a.LockOps, b.LockOps),
		)
	})
}

// comparePropertyNames orders "S2" before "S10" by comparing lengths first.
func comparePropertyNames(a, b string) int {
	// The S properties (safety of the store and the service) come first,
	// then L1 (lease safety inside the fault model), then anything else.
	rank := func(p string) int {
		switch {
		case strings.HasPrefix(p, "S"):
			return 0
		case strings.HasPrefix(p, "L"):
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}
