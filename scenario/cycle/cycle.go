// Package cycle is the client workload's decisions, one definition for the
// simulator and the live runner: cycles of acquire → WritesPerHold fenced
// writes, each after WorkDuration of work, with a watchdog that stops
// writing once the lease may be gone → read → release → ThinkTime; a hold
// ends early when the store fences the client out or a renewal is refused.
//
// Machine is a pure state machine, one per client: no goroutines, no clock
// of its own, no randomness but what its Config hands it. Each Step takes
// what happened (an Event: a wait ended, an operation's result, with the
// client's clock reading) and returns what to do next (an Action: wait d,
// acquire, renew, write, read, release, lose the belief, done). Each world
// executes the actions its own way:
//
//   - the simulator's workload (scenarios/workload) runs them as process
//     code in the event loop, over the simulated lock client
//     (lockservice/lockclient), arming its timers and sending its messages;
//   - the live runner (package live) runs them as blocking commands to a
//     client process (package live/liveclient; for fencesim's services the
//     shipped Go client, lockapi/lockclient), recording each in the
//     history.
//
// Where the two worlds differ for a reason, Config says so and why (see
// Config's per-world fields); the decisions are the same.
package cycle

import (
	"fmt"
	"time"
)

// Why a hold ends: the Reason of a Release or Lose action, recorded as the
// belief's end (checker.Belief.Reason).
const (
	// ReasonReleasing: the hold's writes are done; it is read and released.
	ReasonReleasing = "releasing"
	// ReasonWatchdog: the lease may be gone (the safe point is past, or
	// would be before the next unit of work ends).
	ReasonWatchdog = "watchdog"
	// ReasonFencedOut: the store refused a write's token: someone else
	// holds the lock.
	ReasonFencedOut = "fenced-out"
	// ReasonRenewRefused: a renewal was refused or went unanswered.
	ReasonRenewRefused = "renew-refused"
	// ReasonRunEnded: the run ended during the hold.
	ReasonRunEnded = "run-ended"
)

// Rand is the randomness the jittered waits draw from (math/rand/v2's
// *Rand satisfies it).
type Rand interface {
	Int64N(n int64) int64
}

// Config is one client's workload and how its world runs it.
type Config struct {
	StartDelay time.Duration // before the first acquire
	Cycles     int           // acquire/work/release cycles to run; 0: until the run ends
	// WritesPerHold is the fenced writes of each hold.
	WritesPerHold int
	// WorkDuration is the time between the watchdog check that starts a unit
	// of work and the write that ends it: a pause inside it is exactly
	// Kleppmann's stale-holder case.
	WorkDuration time.Duration
	ThinkTime    time.Duration // between cycles

	// --- per world ---

	// ThinkJitter adds up to this much (uniform, drawn from Rand) to each
	// ThinkTime. Live sets it (a quarter of the TTL): real clients that
	// release at the same think time win the resource back in step, and a
	// waiting client starves, which the liveness phase would report; the
	// simulated lock client's own jittered backoff already breaks the
	// lockstep there, and a draw here would change every seed's trace.
	ThinkJitter time.Duration
	// Backoff, plus up to BackoffJitter (drawn from Rand), is the wait
	// before acquiring again after a Refused acquire. Live's client
	// process tries each acquire command once, so the workload retries;
	// the simulated lock client retries by itself (its own jittered
	// backoff, lockservice.ClientConfig) and reports only a grant or an
	// invalid request, never Refused.
	Backoff, BackoffJitter time.Duration
	// Rand is drawn from for ThinkJitter and BackoffJitter (required
	// when either is set). Live seeds it from the plan's seed and the
	// client's index, so a seed's draws are the same in every run.
	Rand Rand

	// Renew, when set, makes the machine keep the lease itself: before a
	// unit of work it renews once the last grant's or renewal's call is
	// more than Renew old, and its watchdog's safe point is that call +
	// Safe. 0: the lock library keeps the lease — it renews by itself,
	// runs its own watchdog (Event.Until is its deadline) and reports a
	// loss as Lost. The simulated lock client is such a library. The
	// live runner drives its client process command by command and sees
	// no timer of the library inside it (for the shipped client, a renew
	// command answers with the library's next automatic renewal; for a
	// target's own Locker it is the renewal), so it renews and judges the
	// lease itself.
	Renew time.Duration
	// Safe is how long after a grant's or renewal's call the lease is
	// safe to use (with Renew): TTL·(1−ρ) − margin.
	Safe time.Duration
	// WorkAhead makes the watchdog look ahead: a unit of work starts only
	// if it ends before the safe point (now + WorkDuration), not merely
	// if the safe point is not past yet. Live sets it: its work runs
	// inside the client process (the write command's work window), where
	// nothing can stop it once begun. In the simulator the lock client's
	// watchdog fires at the deadline and, by ending the belief (Lost),
	// cancels the pending work, so the check before the work only asks
	// whether the deadline is past.
	WorkAhead bool
	// ReleaseAfterLoss makes a hold that ended early (watchdog, fenced
	// out, renewal refused, run ended) end as a finished one does: read,
	// then release (unless the service said the client no longer holds
	// it), the belief ending between the two. Live sets it: its client
	// process keeps its lease alive until told to release (the shipped
	// client renews by itself), so a hold the harness stopped believing
	// in must be released, or the other clients would wait on it for the
	// rest of the run. The simulated lock client stops renewing when the
	// belief ends (Lose) and the lease expires on its own: the hold ends
	// there, with neither read nor release.
	ReleaseAfterLoss bool
}

// Validate reports a Config the machine cannot run.
func (c Config) Validate() error {
	switch {
	case c.Cycles < 0 || c.WritesPerHold < 0:
		return fmt.Errorf("cycle: negative cycles (%d) or writes per hold (%d)", c.Cycles, c.WritesPerHold)
	case c.StartDelay < 0 || c.WorkDuration < 0 || c.ThinkTime < 0 || c.ThinkJitter < 0 || c.Backoff < 0 || c.BackoffJitter < 0 || c.Renew < 0:
		return fmt.Errorf("cycle: a negative duration in %+v", c)
	case (c.ThinkJitter > 0 || c.BackoffJitter > 0) && c.Rand == nil:
		return fmt.Errorf("cycle: jittered waits need a Rand")
	case c.Renew > 0 && c.Safe <= 0:
		return fmt.Errorf("cycle: a lease kept by the workload (Renew %v) needs a positive Safe, not %v", c.Renew, c.Safe)
	}
	return nil
}

// EventKind is what happened.
type EventKind uint8

const (
	Start        EventKind = iota + 1 // the client started
	Woke                              // the last Wait ended
	Granted                           // the acquire was granted (Event.Call: its call)
	Refused                           // the acquire was not granted (busy, or no answer)
	Invalid                           // the service refused the acquire as invalid: retrying cannot help
	Renewed                           // the renewal was granted (Event.Call: its call)
	RenewRefused                      // the renewal was refused or unanswered (Event.NotHolder: definitely refused)
	Wrote                             // the write was accepted, or its outcome is unknown
	Fenced                            // the store refused the write's token
	WriteInvalid                      // the store refused the write as invalid
	ReadDone                          // the read ended (answered or not)
	Released                          // the release ended (answered or given up)
	Lost                              // the belief ended without a release (after Lose, or the library's own watchdog or renewal)
)

var eventNames = [...]string{"", "start", "woke", "granted", "refused", "invalid", "renewed", "renew-refused",
	"wrote", "fenced", "write-invalid", "read-done", "released", "lost"}

func (k EventKind) String() string { return name(eventNames[:], int(k), "event") }

// name is names[i], or what (i) for a number without a name.
func name(names []string, i int, what string) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", what, i)
}

// Event is one Step's input.
type Event struct {
	Kind EventKind
	// Now is the client's monotonic clock as the event is handled.
	Now time.Duration
	// Call is when the granted acquire or the renewal was sent (Granted,
	// Renewed): the lease counts from it.
	Call time.Duration
	// Until is the lock library's watchdog deadline, when the library
	// keeps the lease (Config.Renew 0): the lease is safe before it.
	Until time.Duration
	// Over: the run is over; nothing new starts (live: the workload's
	// time is up). A hold in progress ends with ReasonRunEnded.
	Over bool
	// NotHolder: the renewal was definitely refused (RenewRefused): the
	// service no longer counts the client as the holder, so there is
	// nothing to release.
	NotHolder bool
}

// ActionKind is what to do.
type ActionKind uint8

const (
	None    ActionKind = iota // nothing: the event changed nothing (a late answer of an ended hold)
	Wait                      // wait Action.D, then Step(Woke)
	Acquire                   // acquire the lock, then Step(Granted | Refused | Invalid)
	Renew                     // renew the lease, then Step(Renewed | RenewRefused)
	Write                     // work Action.D, then write under the hold's token; then Step(Wrote | Fenced | WriteInvalid)
	Read                      // read the store, then Step(ReadDone)
	Release                   // stop believing (Action.Reason) and release; then Step(Released)
	Lose                      // stop believing (Action.Reason) without releasing; then Step(Lost)
	Done                      // the workload is finished
	Stop                      // the service refuses what the workload asks: stop everything
)

var actionNames = [...]string{"none", "wait", "acquire", "renew", "write", "read", "release", "lose", "done", "stop"}

func (k ActionKind) String() string { return name(actionNames[:], int(k), "action") }

// Action is one Step's output.
type Action struct {
	Kind ActionKind
	// D is the wait (Wait) or the work before the write (Write).
	D time.Duration
	// Reason is why the belief ends (Release, Lose): one of the Reason
	// constants.
	Reason string
}

func (a Action) String() string {
	switch a.Kind {
	case Wait, Write:
		return fmt.Sprintf("%v %v", a.Kind, a.D)
	case Release, Lose:
		return fmt.Sprintf("%v %s", a.Kind, a.Reason)
	}
	return a.Kind.String()
}

// Machine is one client's workload. Its zero value is not usable: New.
type Machine struct {
	cfg Config

	cycle    int  // cycles begun
	writes   int  // writes of the current hold that ended
	held     bool // granted, and neither released nor lost since
	retrying bool // the Wait under way is a backoff: Woke acquires again in the same cycle
	done     bool
	// from is the call of the grant or the last renewal (a lease the
	// machine keeps: Config.Renew).
	from time.Duration
	// ending is why the hold ends once its read is done, release whether
	// that end releases (Config.ReleaseAfterLoss).
	ending  string
	release bool
}

// New returns the machine of cfg's workload; the first Step is Start.
func New(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{cfg: cfg}, nil
}

// Held reports whether the client believes it holds the lock: granted, and
// neither released nor lost since.
func (m *Machine) Held() bool { return m.held }

// Cycles is the number of cycles begun.
func (m *Machine) Cycles() int { return m.cycle }

// Finished reports whether the machine said Done or Stop.
func (m *Machine) Finished() bool { return m.done }

// Step takes what happened and returns what to do next. An event the
// machine does not expect where it is (a late answer of a hold that ended)
// is answered None, as are all once it is finished.
func (m *Machine) Step(e Event) Action {
	if m.done {
		return Action{}
	}
	switch e.Kind {
	case Start:
		return m.wait(m.cfg.StartDelay, 0)
	case Woke:
		if m.retrying {
			m.retrying = false
			if e.Over {
				return m.finish(Done)
			}
			return Action{Kind: Acquire}
		}
		return m.beginCycle(e)
	case Granted:
		m.held, m.writes, m.from = true, 0, e.Call
		m.ending, m.release = "", true
		return m.unit(e, false)
	case Refused:
		m.retrying = true
		return m.wait(m.cfg.Backoff, m.cfg.BackoffJitter)
	case Invalid, WriteInvalid:
		m.held = false
		return m.finish(Stop)
	case Renewed:
		if !m.held {
			return Action{}
		}
		m.from = e.Call
		return m.unit(e, true)
	case RenewRefused:
		if !m.held {
			return Action{}
		}
		return m.loss(ReasonRenewRefused, !e.NotHolder)
	case Wrote:
		if !m.held {
			return Action{} // the hold ended while the write was out: nothing more
		}
		if m.writes < m.cfg.WritesPerHold {
			m.writes++
			return m.unit(e, false)
		}
		// An answer past the hold's writes (one that came back late, to a
		// hold granted since): the hold is over.
		return m.end(ReasonReleasing, true)
	case Fenced:
		if !m.held {
			return Action{}
		}
		return m.loss(ReasonFencedOut, true)
	case ReadDone:
		if !m.held {
			return Action{}
		}
		reason, release := m.ending, m.release
		if reason == "" {
			reason = ReasonReleasing
		}
		return m.end(reason, release)
	case Released, Lost:
		m.held = false
		return m.wait(m.cfg.ThinkTime, m.cfg.ThinkJitter)
	}
	panic(fmt.Sprintf("cycle: unknown event %v", e.Kind))
}

// beginCycle acquires for the next cycle, or finishes after the last one.
func (m *Machine) beginCycle(e Event) Action {
	if e.Over || m.cfg.Cycles > 0 && m.cycle >= m.cfg.Cycles {
		return m.finish(Done)
	}
	m.cycle++
	return Action{Kind: Acquire}
}

// unit decides the next step of a hold at e.Now: the next unit of work
// (renewing first when the machine keeps the lease and it is due), or the
// read once the writes are done, or the hold's end when the lease may be
// gone or the run is over. Just renewed, the renewal is not due and the
// run's end waits for the write (as the live runner always did).
func (m *Machine) unit(e Event, renewed bool) Action {
	more := m.writes < m.cfg.WritesPerHold
	if more && !renewed {
		if e.Over {
			return m.loss(ReasonRunEnded, true)
		}
		if m.cfg.Renew > 0 && e.Now-m.from > m.cfg.Renew {
			return Action{Kind: Renew}
		}
	}
	var ahead time.Duration
	if more && m.cfg.WorkAhead {
		ahead = m.cfg.WorkDuration
	}
	// Past the safe point, or on it: the simulator's watchdog (Holding:
	// now < deadline) is the rule; the live runner's own check was
	// now+work > safe point, which differs only at the same nanosecond.
	if e.Now+ahead >= m.until(e) {
		return m.loss(ReasonWatchdog, true)
	}
	if !more {
		return Action{Kind: Read}
	}
	return Action{Kind: Write, D: m.cfg.WorkDuration}
}

// until is the lease's safe point: the library's watchdog deadline, or
// the last grant's or renewal's call + Safe when the machine keeps it.
func (m *Machine) until(e Event) time.Duration {
	if m.cfg.Renew > 0 {
		return m.from + m.cfg.Safe
	}
	return e.Until
}

// loss ends the hold early for reason: at once, without a release (the
// library's lease then expires on its own), or, with ReleaseAfterLoss,
// after the read, releasing unless the service no longer counts the
// client as the holder.
func (m *Machine) loss(reason string, release bool) Action {
	if !m.cfg.ReleaseAfterLoss {
		m.held = false
		return Action{Kind: Lose, Reason: reason}
	}
	m.ending, m.release = reason, release
	return Action{Kind: Read}
}

// end ends the hold: the belief ends for reason, and the lock is released
// if release.
func (m *Machine) end(reason string, release bool) Action {
	m.held, m.ending = false, ""
	if release {
		return Action{Kind: Release, Reason: reason}
	}
	return Action{Kind: Lose, Reason: reason}
}

// wait waits d plus up to jitter (drawn from Rand).
func (m *Machine) wait(d, jitter time.Duration) Action {
	if jitter > 0 {
		d += time.Duration(m.cfg.Rand.Int64N(int64(jitter) + 1))
	}
	return Action{Kind: Wait, D: d}
}

func (m *Machine) finish(k ActionKind) Action {
	m.done = true
	return Action{Kind: k}
}
