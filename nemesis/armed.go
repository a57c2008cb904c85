package nemesis

import "time"

// Armed holds a schedule's triggers until their moments come. It is the
// matching both worlds share: the simulator's Watch tells it the moments
// the run reports and schedules what it returns on the world's clock; the
// live runner tells it the moments its clients report and carries out
// what it returns on the machine's. It keeps no clock of its own: the
// caller passes the instant of each moment, on the run's timeline.
type Armed struct {
	ops []Op // in time order
	// live are the indices into ops of the triggers that can still fire
	// (not fired, window not over), in order; liveSet says live was made.
	// Every moment of a run comes here (an append is one, tens of
	// thousands a run), so a trigger leaves live for good once it fired or
	// its window closed, and a moment before the next window costs one
	// comparison.
	live    []int
	liveSet bool
}

// Arm returns the triggers of s (the operations with When), in time order
// (stable), armed.
func Arm(s Schedule) *Armed {
	a := &Armed{}
	for _, op := range s.Sorted() {
		if op.When != "" {
			a.ops = append(a.ops, op)
		}
	}
	return a
}

// Triggers returns the armed triggers, in time order.
func (a *Armed) Triggers() Schedule {
	if a == nil {
		return nil
	}
	return a.ops
}

// Notice tells the triggers of a moment at now: it returns, in schedule
// order, every armed trigger of the moment's kind not yet fired whose
// window [At, At+Within] holds now, as the fault it becomes — At the
// instant it is to be carried out (now + After), Node the moment's
// subject if the trigger named Subject, When, Within and After cleared.
// Each trigger fires once.
func (a *Armed) Notice(now time.Duration, m Moment) Schedule {
	if a == nil || len(a.ops) == 0 {
		return nil
	}
	if !a.liveSet {
		a.live, a.liveSet = make([]int, len(a.ops)), true
		for i := range a.live {
			a.live[i] = i
		}
	}
	// ops is in time order, so no window has opened before the first
	// live trigger's.
	if len(a.live) == 0 || now < time.Duration(a.ops[a.live[0]].At) {
		return nil
	}
	var fired Schedule
	keep := a.live[:0]
	for _, i := range a.live {
		op := a.ops[i]
		if now > time.Duration(op.At+op.Within) {
			continue // its window closed: it never fires
		}
		if op.When != m.Kind || now < time.Duration(op.At) {
			keep = append(keep, i)
			continue
		}
		fire := op
		fire.At, fire.When, fire.Within, fire.After = Duration(now)+op.After, "", 0, 0
		if fire.Node == Subject {
			fire.Node = m.Subject
		}
		fired = append(fired, fire)
	}
	a.live = keep
	return fired
}
