package cycle

import (
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// maxRand draws the largest value every time, so a jittered wait shows its
// jitter whole; draws counts them.
type maxRand struct{ draws int }

func (r *maxRand) Int64N(n int64) int64 { r.draws++; return n - 1 }

// sim is the simulator's configuration (scenarios/workload): the lock
// library keeps the lease, a loss ends the hold at once.
func sim() Config {
	return Config{Cycles: 1, WritesPerHold: 2, WorkDuration: 20 * ms, ThinkTime: 50 * ms}
}

// live is the live runner's (package live): the machine keeps the lease,
// looks ahead over the work, releases after a loss, jitters its waits.
func live() Config {
	return Config{Cycles: 1, WritesPerHold: 2, WorkDuration: 20 * ms, ThinkTime: 50 * ms,
		ThinkJitter: 250 * ms, Backoff: 100 * ms, BackoffJitter: 250 * ms, Rand: &maxRand{},
		Renew: 333 * ms, Safe: 900 * ms, WorkAhead: true, ReleaseAfterLoss: true}
}

// step is one Step of a script: the event and the action it must answer.
type step struct {
	ev   Event
	want Action
}

func ev(k EventKind, now time.Duration) Event { return Event{Kind: k, Now: now} }

// until is an event of a lock library whose watchdog's deadline is u.
func until(k EventKind, now, u time.Duration) Event { return Event{Kind: k, Now: now, Until: u} }

func wait(d time.Duration) Action  { return Action{Kind: Wait, D: d} }
func act(k ActionKind) Action      { return Action{Kind: k} }
func write() Action                { return Action{Kind: Write, D: 20 * ms} }
func release(reason string) Action { return Action{Kind: Release, Reason: reason} }
func lose(reason string) Action    { return Action{Kind: Lose, Reason: reason} }
func granted(now, call time.Duration) Event {
	return Event{Kind: Granted, Now: now, Call: call}
}

// run plays script on a new machine of cfg, failing at the first action
// that differs. A script that does not begin with Start begins at the
// first acquire: Start, then Woke at 0 (cfg's StartDelay is 0).
func run(t *testing.T, cfg Config, script []step) *Machine {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(script) == 0 || script[0].ev.Kind != Start {
		script = append([]step{{ev(Start, 0), wait(0)}, {ev(Woke, 0), act(Acquire)}}, script...)
	}
	for i, s := range script {
		if got := m.Step(s.ev); got != s.want {
			t.Fatalf("step %d: %v at %v: got %v, want %v", i, s.ev.Kind, s.ev.Now, got, s.want)
		}
	}
	return m
}

// The machine's rules, each shown by a script that a machine without the
// rule fails.
func TestRules(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		script []step
	}{
		{"a cycle: acquire, writes after their work, read, release, think, done", sim(), []step{
			{ev(Start, 0), wait(0)},
			{ev(Woke, 0), act(Acquire)},
			{until(Granted, 10*ms, 900*ms), write()},
			{until(Wrote, 40*ms, 900*ms), write()},
			{until(Wrote, 70*ms, 900*ms), act(Read)},
			{until(ReadDone, 80*ms, 900*ms), release(ReasonReleasing)},
			{ev(Released, 90*ms), wait(50 * ms)},
			{ev(Woke, 140*ms), act(Done)},
			{ev(Woke, 150*ms), act(None)},
		}},
		{"the start delay comes first", func() Config { c := sim(); c.StartDelay = 7 * ms; return c }(), []step{
			{ev(Start, 0), wait(7 * ms)},
		}},
		{"library lease: past its deadline, no work starts (watchdog)", sim(), []step{
			{until(Granted, 10*ms, 900*ms), write()},
			{until(Wrote, 900*ms, 900*ms), lose(ReasonWatchdog)},
			{ev(Lost, 900*ms), wait(50 * ms)},
		}},
		{"library lease: the watchdog is checked before the read too", sim(), []step{
			{until(Granted, 10*ms, 900*ms), write()},
			{until(Wrote, 40*ms, 900*ms), write()},
			{until(Wrote, 901*ms, 900*ms), lose(ReasonWatchdog)},
		}},
		{"library lease: before the deadline a work starts even if it ends past it (the library's watchdog cancels it)", sim(), []step{
			{until(Granted, 890*ms, 900*ms), write()},
		}},
		{"own lease: a write whose work would end past the safe point does not start", live(), []step{
			{granted(300*ms, 0), write()},                    // 300+20 < 900
			{ev(Wrote, 880*ms), act(Renew)},                  // due first
			{Event{Kind: Renewed, Now: 885 * ms}, act(Read)}, // renewed from call 0: 885+20 ≥ 900
			{ev(ReadDone, 890*ms), release(ReasonWatchdog)},
			{ev(Released, 895*ms), wait(300 * ms)}, // think + the whole jitter
		}},
		{"own lease: renewed, the safe point moves to the renewal's call + Safe", live(), []step{
			{granted(0, 0), write()},
			{ev(Wrote, 400*ms), act(Renew)},
			{Event{Kind: Renewed, Now: 890 * ms, Call: 400 * ms}, write()}, // not renewed again though 490 ms late
			{ev(Wrote, 920*ms), act(Read)},
			{ev(ReadDone, 930*ms), release(ReasonReleasing)},
		}},
		{"own lease: no renewal before the read, and none while young", live(), []step{
			{granted(10*ms, 0), write()},
			{ev(Wrote, 333*ms), write()}, // 333 is not more than Renew
			{ev(Wrote, 600*ms), act(Read)},
		}},
		{"renew refused, not the holder: read, then the belief ends with no release", live(), []step{
			{granted(0, 0), write()},
			{ev(Wrote, 400*ms), act(Renew)},
			{Event{Kind: RenewRefused, Now: 410 * ms, NotHolder: true}, act(Read)},
			{ev(ReadDone, 420*ms), lose(ReasonRenewRefused)},
			{ev(Lost, 420*ms), wait(300 * ms)},
			{ev(Woke, 720*ms), act(Done)},
		}},
		{"renew unanswered: the service may still count the client the holder, so it releases", live(), []step{
			{granted(0, 0), write()},
			{ev(Wrote, 400*ms), act(Renew)},
			{ev(RenewRefused, 410*ms), act(Read)},
			{ev(ReadDone, 420*ms), release(ReasonRenewRefused)},
		}},
		{"library: its own renewal refused is a Lost, answered by the think time", sim(), []step{
			{until(Granted, 0, 900*ms), write()},
			{ev(Lost, 300*ms), wait(50 * ms)},
			{until(Wrote, 310*ms, 900*ms), act(None)}, // the write that was out: nothing more
			{ev(Woke, 350*ms), act(Done)},
		}},
		{"fenced out, library: the hold ends at once, no read, no release", sim(), []step{
			{until(Granted, 0, 900*ms), write()},
			{until(Fenced, 30*ms, 900*ms), lose(ReasonFencedOut)},
			{ev(Lost, 30*ms), wait(50 * ms)},
		}},
		{"fenced out, own lease: no more writes; read, release", live(), []step{
			{granted(0, 0), write()},
			{ev(Fenced, 30*ms), act(Read)},
			{ev(ReadDone, 40*ms), release(ReasonFencedOut)},
		}},
		{"cycles: each acquire after the think time counts one, retries do not", func() Config { c := live(); c.Cycles = 2; c.WritesPerHold = 1; return c }(), []step{
			{ev(Refused, 5*ms), wait(350 * ms)}, // backoff + the whole jitter
			{ev(Woke, 355*ms), act(Acquire)},    // the same cycle
			{granted(360*ms, 355*ms), write()},
			{ev(Wrote, 390*ms), act(Read)},
			{ev(ReadDone, 400*ms), release(ReasonReleasing)},
			{ev(Released, 410*ms), wait(300 * ms)},
			{ev(Woke, 710*ms), act(Acquire)}, // cycle 2
			{granted(720*ms, 710*ms), write()},
			{ev(Fenced, 750*ms), act(Read)},
			{ev(ReadDone, 760*ms), release(ReasonFencedOut)},
			{ev(Released, 770*ms), wait(300 * ms)},
			{ev(Woke, 1070*ms), act(Done)},
		}},
		{"the run's end: a hold ends (run-ended) and nothing new starts", live(), []step{
			{granted(0, 0), write()},
			{Event{Kind: Wrote, Now: 30 * ms, Over: true}, act(Read)},
			{ev(ReadDone, 40*ms), release(ReasonRunEnded)},
			{ev(Released, 50*ms), wait(300 * ms)},
			{Event{Kind: Woke, Now: 60 * ms, Over: true}, act(Done)},
		}},
		{"the run's end during a backoff: done", live(), []step{
			{ev(Refused, 5*ms), wait(350 * ms)},
			{Event{Kind: Woke, Now: 6 * ms, Over: true}, act(Done)},
		}},
		{"an invalid request stops the workload for good", sim(), []step{
			{ev(Invalid, 5*ms), act(Stop)},
			{ev(Woke, 6*ms), act(None)},
		}},
		{"a store answer past the hold's writes (late, to a new hold) ends it", func() Config { c := sim(); c.WritesPerHold = 0; return c }(), []step{
			{until(Granted, 0, 900*ms), act(Read)},
			{until(Wrote, 5*ms, 900*ms), release(ReasonReleasing)},
			{until(ReadDone, 6*ms, 900*ms), act(None)},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, c.cfg, c.script) })
	}
}

// Without jitter configured nothing is drawn: the simulator's seeds owe
// their traces to the lock client's draws alone.
func TestNoJitterNoDraw(t *testing.T) {
	r := &maxRand{}
	cfg := sim()
	cfg.Rand = r
	run(t, cfg, []step{
		{until(Granted, 0, 900*ms), write()},
		{until(Fenced, 30*ms, 900*ms), lose(ReasonFencedOut)},
		{ev(Lost, 30*ms), wait(50 * ms)},
	})
	if r.draws != 0 {
		t.Errorf("%d draws without jitter", r.draws)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Cycles = -1 }, "negative cycles"},
		{func(c *Config) { c.WorkDuration = -ms }, "negative duration"},
		{func(c *Config) { c.Rand = nil }, "need a Rand"},
		{func(c *Config) { c.Safe = 0 }, "positive Safe"},
	} {
		cfg := live()
		c.edit(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error saying %q", err, c.want)
		}
	}
	if _, err := New(live()); err != nil {
		t.Errorf("live's configuration: %v", err)
	}
}
