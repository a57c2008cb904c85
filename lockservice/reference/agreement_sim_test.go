package reference

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/sim"
)

// agreementTap keeps what replicas report for S9 and S10, and the grants'
// indexes, and passes every event on.
type agreementTap struct {
	next    lockservice.Observer
	applies []lockservice.Event // EvEntryApplied, in report order
	elected []lockservice.Event // EvElected
	grants  []lockservice.Event // EvGranted
}

func (a *agreementTap) Observe(e lockservice.Event) {
	switch e.Kind {
	case lockservice.EvEntryApplied:
		a.applies = append(a.applies, e)
	case lockservice.EvElected:
		a.elected = append(a.elected, e)
	case lockservice.EvGranted:
		a.grants = append(a.grants, e)
	}
	a.next.Observe(e)
}

// Every replica reports every entry it applies — index, term and the
// digest of the entry's bytes on disk — in log order from index 1, and
// again from index 1 when it replays its log after a restart, with the same
// entries; every election it wins, once per term; and each grant with its
// entry's index, which is the grant's token.
func TestReplicaReportsAppliesAndElections(t *testing.T) {
	tap := &agreementTap{}
	g := newReplicaGroup(t, 3, groupOpts{seed: 5, net: sim.DefaultNetwork(), edit: func(rc *ReplicaConfig) {
		tap.next, rc.Observer = rc.Observer, tap
	}})
	p, _ := simtest.AddProbe(t, g.w, "p")
	lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	for i, r := range []string{"r1", "r2"} {
		p.SendAt(t0+time.Duration(i)*20*time.Millisecond, lead, lockservice.AcquireRequest{Resource: r, Client: "c" + r, TTL: time.Second, Request: uint64(i + 1)})
	}
	crashAt := t0 + 100*time.Millisecond
	g.w.At(crashAt, "crash every replica", func() {
		for _, id := range g.ids {
			g.w.Crash(id)
		}
	})
	g.w.At(crashAt+time.Second, "restart every replica", func() {
		for _, id := range g.ids {
			g.w.Restart(id)
		}
	})
	g.runTo(t, crashAt+time.Second+time.Millisecond)
	lead2, term2 := g.awaitLeader(t, g.ids, term+1, crashAt+3*time.Second)
	g.runTo(t, g.w.Now()+100*time.Millisecond)

	// Per replica: index 1, 2, … before the crash, and again from 1 after.
	seen := map[uint64]lockservice.Event{} // index → the first report of it
	runs := map[string][]uint64{}
	for _, e := range tap.applies {
		if f, ok := seen[e.Index]; ok && (f.Term != e.Term || f.Digest != e.Digest) {
			t.Errorf("index %d: %s reported term %d digest %x, %s term %d digest %x", e.Index, f.Node, f.Term, f.Digest, e.Node, e.Term, e.Digest)
		} else if !ok {
			seen[e.Index] = e
		}
		rs := runs[e.Node]
		switch {
		case e.Index == 1:
			rs = append(rs, 1) // the first apply, or a restart's replay

		case len(rs) == 0 || rs[len(rs)-1] != e.Index-1:
			t.Fatalf("%s reported index %d after %v: want consecutive indexes from 1", e.Node, e.Index, rs)
		default:
			rs[len(rs)-1] = e.Index
		}
		runs[e.Node] = rs
	}
	for _, id := range g.ids {
		name := g.w.Name(id)
		rs := runs[name]
		if len(rs) != 2 || rs[0] < 3 || rs[1] < rs[0] {
			t.Errorf("%s applied runs %v, want two (before the crash and the replay), the first with the 2 grants", name, rs)
		}
		for _, e := range diskEntries(t, g.w.Disk(id)) {
			if f, ok := seen[e.Index]; ok && (f.Term != e.Term || f.Digest != CommandDigest(e.Data)) {
				t.Errorf("%s: index %d on disk is term %d digest %x, reported term %d digest %x", name, e.Index, e.Term, CommandDigest(e.Data), f.Term, f.Digest)
			}
		}
	}

	want := []string{fmt.Sprintf("%s@%d", g.w.Name(lead), term), fmt.Sprintf("%s@%d", g.w.Name(lead2), term2)}
	var got []string
	for _, e := range tap.elected {
		got = append(got, fmt.Sprintf("%s@%d", e.Node, e.Term))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("elections %v, want %v", got, want)
	}
	if len(tap.grants) < 2*3 {
		t.Fatalf("got %d grant reports, want each of 2 grants from 3 replicas", len(tap.grants))
	}
	for _, e := range tap.grants {
		if e.Index == 0 || e.Index != e.Token {
			t.Errorf("grant %+v: want its entry's index, the token", e)
		}
	}
}
