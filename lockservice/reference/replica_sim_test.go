package reference

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/fakeclock"
	"github.com/fencesim/fencesim/internal/simtest"
	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/scenarios/workload"
	"github.com/fencesim/fencesim/sim"
)

// Process-level tests of the replicated lock service: a Raft group of
// Replicas (3 or 5) in a sim.World with probes, clients and a fenced store,
// faults injected with w.At. Helpers are in replica_harness_test.go.

// A 3- and a 5-replica group elect exactly one leader within 1 s of true
// time, and keep it; a request sent to a follower is answered NotLeader
// naming that leader, and grants nothing.
func TestReplicaGroupElectsOneLeaderAndFollowersRedirect(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("replicas=%d/seed=%d", n, seed), func(t *testing.T) {
				g := newReplicaGroup(t, n, groupOpts{seed: seed, net: sim.DefaultNetwork(), trace: true})
				p, _ := simtest.AddProbe(t, g.w, "p")
				lead, term := g.awaitLeader(t, g.ids, 1, time.Second)
				g.runTo(t, time.Second)
				if b := g.believers(); len(b) != 1 || b[lead] != term {
					t.Fatalf("at 1s the replicas leading are %v, want only %d (elected in term %d at or before %v)", b, lead, term, g.w.Now())
				}
				followers := g.others(lead)
				for i, f := range followers {
					p.SendAt(time.Second, f, lockservice.AcquireRequest{Resource: "r", Client: "p", TTL: time.Second, Request: uint64(i + 1)})
				}
				g.runTo(t, time.Second+100*time.Millisecond)

				for i, f := range followers {
					rep := p.OnlyLockReply(t, uint64(i+1))
					if rep.Status != lockservice.NotLeader || rep.Leader != lead {
						t.Errorf("follower %d answered %+v, want not-leader naming leader %d", f, rep, lead)
					}
				}
				if b := g.believers(); len(b) != 1 || b[lead] != term {
					t.Errorf("the leader changed without a fault: leading now %v, want %d in term %d", b, lead, term)
				}
				if grants := g.rec.grants(); len(grants) != 0 {
					t.Errorf("requests sent to followers were granted: %+v", grants)
				}
				if hasWarnings(g.trace) {
					t.Errorf("warnings in the trace")
				}
			})
		}
	}
}

// A grant answered by the leader is applied by every replica: each table
// shows the same holder and token, and the token is the log index of the
// acquire that granted it, so tokens are positive and increase with every
// grant (with gaps where other entries sit: the leader's empty entry,
// refused acquires).
func TestReplicaGrantIsAppliedEverywhereWithLogIndexToken(t *testing.T) {
	steps := []struct {
		client, resource string
		want             lockservice.Status
	}{
		{"c1", "r1", lockservice.Granted},
		{"c2", "r2", lockservice.Granted},
		{"c3", "r1", lockservice.Busy}, // an entry too: the next token skips its index
		{"c1", "r3", lockservice.Granted},
		{"c2", "r1", lockservice.Busy},
		{"c3", "r4", lockservice.Granted},
	}
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			g := newReplicaGroup(t, n, groupOpts{seed: 11, net: sim.DefaultNetwork()})
			p, _ := simtest.AddProbe(t, g.w, "p")
			lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
			start := g.w.Now() + 10*time.Millisecond
			for i, s := range steps {
				p.SendAt(start+time.Duration(i)*50*time.Millisecond, lead,
					lockservice.AcquireRequest{Resource: s.resource, Client: s.client, TTL: 30 * time.Second, Request: uint64(i + 1)})
			}
			g.runTo(t, start+time.Duration(len(steps))*50*time.Millisecond+200*time.Millisecond)

			var last uint64
			holders := map[string]lockservice.LockReply{}
			var granted []uint64
			for i, s := range steps {
				rep := p.OnlyLockReply(t, uint64(i+1))
				if rep.Status != s.want {
					t.Fatalf("step %d (%s acquires %s): %+v, want %v", i, s.client, s.resource, rep, s.want)
				}
				if rep.Status != lockservice.Granted {
					continue
				}
				if rep.Token == 0 || rep.Token <= last {
					t.Errorf("step %d: token %d, want > 0 and above the previous grant's %d", i, rep.Token, last)
				}
				last = rep.Token
				holders[s.resource] = rep
				granted = append(granted, rep.Token)
				for _, id := range g.ids {
					c, ok := commandAt(t, g.w.Disk(id), rep.Token)
					if !ok || c.Kind != CmdAcquire || c.Client != s.client || c.Resource != s.resource || c.Request != uint64(i+1) {
						t.Errorf("replica %d's log at index %d (the token) holds %+v (found %v), want step %d's acquire", id, rep.Token, c, ok, i)
					}
				}
			}
			if granted[1]-granted[0] < 1 || granted[2]-granted[1] < 2 {
				t.Errorf("tokens %v: the busy acquire between the 2nd and 3rd grant must take an index", granted)
			}
			for _, id := range g.ids {
				r := g.replica(id)
				for res, rep := range holders { //detlint:sorted (test assertions only)
					l, ok := r.Table().Lease(res)
					want := steps[rep.Request-1].client
					if !ok || l.Holder != want || l.Token != rep.Token {
						t.Errorf("replica %d: lease on %s is %+v (held %v), want %s with token %d", id, res, l, ok, want, rep.Token)
					}
				}
				if got := r.Table().LastToken(); got != last {
					t.Errorf("replica %d issued up to token %d, want %d", id, got, last)
				}
			}
			g.checkTablesAgree(t)
			var observed []uint64
			for _, c := range g.rec.grants() {
				observed = append(observed, c.Token)
			}
			if !slices.Equal(observed, granted) {
				t.Errorf("the service reported grants %v, the leader answered %v", observed, granted)
			}
			perToken := map[uint64]int{}
			for _, c := range g.rec.Of("granted") {
				perToken[c.Token]++
			}
			for _, tok := range granted {
				if perToken[tok] != n {
					t.Errorf("token %d was reported %d times, want once by each of the %d replicas", tok, perToken[tok], n)
				}
			}
		})
	}
}

// The leader crashes right after proposing a client's acquire (the
// instant its append leaves). The client library retries elsewhere with
// the same request id and is granted exactly once. If the append reached
// the followers, the new leader commits it and the token is its index; if
// it died with the leader, the retry is proposed again, and the old
// leader's uncommitted entry is replaced when it restarts. A later copy of
// the request gets the identical reply.
func TestReplicaLeaderCrashMidAcquireGrantsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		lost bool // the leader's appends die with it
	}{
		{"append reached the followers", false},
		{"append lost with the leader", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const d = time.Millisecond
			g := newReplicaGroup(t, 3, groupOpts{seed: 3, net: fixedLatency(d)})
			store := addStore(t, g.w, g.rec)
			p, _ := simtest.AddProbe(t, g.w, "p")
			old, oldTerm := g.awaitLeader(t, g.ids, 1, time.Second)

			cfg := workload.DefaultConfig("a", append([]sim.NodeID{old}, g.others(old)...), store, "r")
			cfg.Observer, cfg.StartDelay, cfg.TTL = g.rec, 10*time.Millisecond, 2*time.Second
			sendAt := g.w.Now() + cfg.StartDelay
			a := simtest.AddNode(t, g.w, "a", func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{})

			// The acquire arrives at sendAt+d and is proposed at once: crash
			// just after, while the appends are on the wire.
			crashAt := sendAt + d + time.Microsecond
			var atCrash []loggedCommand
			var commitAtCrash uint64
			g.w.At(crashAt, "crash the leader", func() {
				g.w.Crash(old)
				if tc.lost {
					for _, o := range g.others(old) {
						g.w.Block(old, o)
					}
				}
				atCrash = diskCommands(t, g.w.Disk(old))
				commitAtCrash = diskHardState(t, g.w.Disk(old)).Commit
			})
			restartAt := crashAt + time.Second
			g.w.At(restartAt, "restart the old leader", func() { g.w.Heal(); g.w.Restart(old) })
			g.runTo(t, restartAt+2*time.Second)

			// The crash came after the proposal and before its commit.
			if len(atCrash) != 1 || atCrash[0].Kind != CmdAcquire || atCrash[0].Client != "a" {
				t.Fatalf("the old leader's log at the crash holds %+v, want exactly a's acquire", atCrash)
			}
			k, kTerm := atCrash[0].index, atCrash[0].term
			if kTerm != oldTerm || commitAtCrash >= k {
				t.Fatalf("a's acquire at index %d term %d, commit %d at the crash; want it uncommitted in term %d", k, kTerm, commitAtCrash, oldTerm)
			}
			grants := g.rec.grants()
			if len(grants) != 1 || grants[0].Client != "a" || grants[0].Resource != "r" {
				t.Fatalf("grants %+v, want exactly one, to a on r", grants)
			}
			tok := grants[0].Token
			if grants[0].At <= crashAt {
				t.Errorf("a was granted at %v, before the leader crashed at %v", grants[0].At, crashAt)
			}
			if tc.lost && tok == k {
				t.Errorf("token %d is the index of the entry that died with the leader", tok)
			}
			if !tc.lost && tok != k {
				t.Errorf("token %d, want %d: the new leader commits the replicated entry", tok, k)
			}
			var acq []lockReturn
			for _, r := range g.rec.returns {
				if r.op == lockservice.OpAcquire {
					acq = append(acq, r)
				}
			}
			if len(acq) != 1 || acq[0].status != lockservice.Granted || acq[0].token != tok {
				t.Fatalf("the client's acquire returned %+v, want once, granted with token %d", acq, tok)
			}
			if !g.w.Process(a).(*workload.Client).Done() {
				t.Errorf("the client did not finish its cycle")
			}
			for _, id := range g.ids {
				held := slices.ContainsFunc(diskEntries(t, g.w.Disk(id)), func(e raft.Entry) bool { return e.Index == k && e.Term == kTerm })
				if held == tc.lost {
					t.Errorf("replica %d holds the old leader's entry (index %d, term %d): %v, want %v", id, k, kTerm, held, !tc.lost)
				}
			}
			want := diskLogBytes(g.w.Disk(g.ids[0]))
			for _, id := range g.ids[1:] {
				if got := diskLogBytes(g.w.Disk(id)); !slices.Equal(got, want) {
					t.Errorf("replica %d's log differs from replica 0's:\n%v\nvs\n%v", id, got, want)
				}
			}
			g.checkTablesAgree(t)
			checkGrantsFromDistinctRequests(t, grants, g.w.Disk(g.ids[0]))
			for _, c := range diskCommands(t, g.w.Disk(g.ids[0])) {
				if c.Kind == CmdAcquire && c.Request != acq[0].request {
					t.Errorf("the log holds an acquire %+v with another request id than %d: a retry must reuse it", c, acq[0].request)
				}
			}

			// Later copies of the request get the identical reply.
			lead, _ := g.awaitLeader(t, g.ids, 1, g.w.Now())
			copyAt := g.w.Now() + 10*time.Millisecond
			retry := lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: cfg.TTL, Request: acq[0].request}
			p.SendAt(copyAt, lead, retry)
			p.SendAt(copyAt+20*time.Millisecond, lead, retry)
			g.runTo(t, copyAt+100*time.Millisecond)
			wantRep := lockservice.LockReply{Request: retry.Request, Status: lockservice.Granted, Token: tok, TTL: cfg.TTL}
			if got := p.LockReplies(retry.Request); len(got) != 2 || got[0] != wantRep || got[1] != wantRep {
				t.Errorf("later copies got %+v, want twice %+v", got, wantRep)
			}
			if n := len(g.rec.grants()); n != 1 {
				t.Errorf("%d grants after the copies, want still 1", n)
			}
		})
	}
}

// An isolated old leader cannot grant: the acquire of a probe that reaches
// only it is proposed but never committed, gets no reply, and once the
// leader has stepped down (CheckQuorum) a retry gets NotLeader. The
// majority elects a new leader that grants the resource to another client.
// After the heal the old leader's uncommitted entry is gone from every log,
// and no table shows a grant from it.
func TestReplicaIsolatedOldLeaderCannotGrant(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			g := newReplicaGroup(t, n, groupOpts{seed: 4, net: sim.DefaultNetwork()})
			pa, paID := simtest.AddProbe(t, g.w, "pa")
			pb, _ := simtest.AddProbe(t, g.w, "pb")
			old, oldTerm := g.awaitLeader(t, g.ids, 1, time.Second)
			T := g.w.Now() + 10*time.Millisecond
			g.w.At(T, "isolate the leader with pa", func() {
				g.isolate(old, paID)
				g.isolate(paID, old)
			})
			acquire := lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: 30 * time.Second, Request: 1}
			pa.SendAt(T+time.Millisecond, old, acquire)
			var proposed []loggedCommand
			var stillLeading bool
			g.w.At(T+50*time.Millisecond, "inspect the old leader", func() {
				proposed = diskCommands(t, g.w.Disk(old))
				stillLeading, _ = g.replica(old).IsLeader()
			})
			g.runTo(t, T+60*time.Millisecond)
			var k, kTerm uint64
			for _, c := range proposed {
				if c.Client == "a" {
					k, kTerm = c.index, c.term
				}
			}
			if k == 0 || !stillLeading {
				t.Fatalf("50 ms into the isolation the old leader (leading: %v) logged %+v; want a's acquire proposed", stillLeading, proposed)
			}
			if c := diskHardState(t, g.w.Disk(old)).Commit; c >= k {
				t.Fatalf("the isolated leader committed up to %d, past a's acquire at %d", c, k)
			}

			newLead, _ := g.awaitLeader(t, g.others(old), oldTerm+1, T+2*time.Second)
			pb.SendAt(g.w.Now()+time.Millisecond, newLead, lockservice.AcquireRequest{Resource: "r", Client: "b", TTL: 30 * time.Second, Request: 1})
			retryAt := max(g.w.Now(), T+500*time.Millisecond)
			pa.SendAt(retryAt, old, acquire)
			healAt := retryAt + 200*time.Millisecond
			var leadingAtHeal bool
			g.w.At(healAt, "heal", func() {
				leadingAtHeal, _ = g.replica(old).IsLeader()
				g.w.Heal()
			})
			g.runTo(t, healAt+time.Second)

			if leadingAtHeal {
				t.Errorf("the isolated old leader still believed it led at the heal, %v after isolation", healAt-T)
			}
			reps := pa.LockReplies(1)
			if len(reps) != 1 || reps[0].Status != lockservice.NotLeader {
				t.Errorf("pa's replies %+v, want none to the first copy and not-leader to the retry", reps)
			}
			b := pb.OnlyLockReply(t, 1)
			if b.Status != lockservice.Granted {
				t.Fatalf("b's acquire on the majority: %+v, want granted", b)
			}
			grants := g.rec.grants()
			if len(grants) != 1 || grants[0].Client != "b" || grants[0].Token != b.Token {
				t.Errorf("grants %+v, want only b's token %d", grants, b.Token)
			}
			want := diskLogBytes(g.w.Disk(newLead))
			for _, id := range g.ids {
				for _, c := range diskCommands(t, g.w.Disk(id)) {
					if c.Client == "a" {
						t.Errorf("replica %d's log still holds a's acquire %+v", id, c)
					}
				}
				for _, e := range diskEntries(t, g.w.Disk(id)) {
					if e.Index == k && e.Term == kTerm {
						t.Errorf("replica %d still holds the old leader's entry at index %d term %d", id, k, kTerm)
					}
				}
				if got := diskLogBytes(g.w.Disk(id)); !slices.Equal(got, want) {
					t.Errorf("replica %d's log differs from the new leader's", id)
				}
				l, ok := g.replica(id).Table().Lease("r")
				if !ok || l.Holder != "b" || l.Token != b.Token {
					t.Errorf("replica %d: lease on r is %+v (held %v), want b's token %d", id, l, ok, b.Token)
				}
			}
			g.checkTablesAgree(t)
		})
	}
}

// Every replica crashes and restarts from disk. Each rebuilds exactly the
// table it had by replaying its log; the leases held at the crash are held
// again after the restart — the new leader restarts each at its full TTL,
// although their original TTL ran out while the group was down — so
// another client is refused until that TTL has run out, and granted after
// it, with a token above every earlier one.
func TestReplicaAllRestartFromDisk(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			const ttl = 2 * time.Second
			g := newReplicaGroup(t, n, groupOpts{seed: 5, net: sim.DefaultNetwork()})
			p, _ := simtest.AddProbe(t, g.w, "p")
			lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
			t0 := g.w.Now() + 10*time.Millisecond
			res := []string{"r1", "r2", "r3"}
			for i, r := range res {
				p.SendAt(t0+time.Duration(i)*20*time.Millisecond, lead,
					lockservice.AcquireRequest{Resource: r, Client: "c" + r[1:], TTL: ttl, Request: uint64(i + 1)})
			}
			g.runTo(t, t0+100*time.Millisecond)
			tok := map[string]uint64{}
			for i, r := range res {
				rep := p.OnlyLockReply(t, uint64(i+1))
				if rep.Status != lockservice.Granted {
					t.Fatalf("acquire of %s: %+v, want granted", r, rep)
				}
				tok[r] = rep.Token
			}
			p.SendAt(g.w.Now()+time.Millisecond, lead, lockservice.ReleaseRequest{Resource: "r2", Client: "c2", Token: tok["r2"], Request: 4})
			p.SendAt(g.w.Now()+2*time.Millisecond, lead, lockservice.RenewRequest{Resource: "r3", Client: "c3", Token: tok["r3"], Request: 5})
			g.runTo(t, g.w.Now()+200*time.Millisecond)
			if rep := p.OnlyLockReply(t, 4); rep.Status != lockservice.Released {
				t.Fatalf("release of r2: %+v", rep)
			}
			if rep := p.OnlyLockReply(t, 5); rep.Status != lockservice.Renewed {
				t.Fatalf("renewal of r3: %+v", rep)
			}

			before := g.checkTablesAgree(t)
			if len(before.Leases) != 2 || before.Leases[0].Resource != "r1" || before.Leases[1].Resource != "r3" {
				t.Fatalf("leases before the crash %+v, want r1 and r3", before.Leases)
			}
			pre := map[sim.NodeID]Snapshot{}
			for _, id := range g.ids {
				pre[id] = g.replica(id).Table().Snapshot()
			}
			crashAt := g.w.Now() + 10*time.Millisecond
			restartAt := t0 + ttl + 500*time.Millisecond // past every lease's original end
			g.w.At(crashAt, "crash every replica", func() {
				for _, id := range g.ids {
					g.w.Crash(id)
				}
			})
			g.w.At(restartAt, "restart every replica", func() {
				for _, id := range g.ids {
					g.w.Restart(id)
				}
			})
			replayed := map[sim.NodeID]uint64{}
			g.w.At(restartAt+time.Microsecond, "read the replayed tables", func() {
				for _, id := range g.ids {
					if r := g.replica(id); r != nil {
						replayed[id] = r.applied
					}
				}
			})
			g.runTo(t, restartAt+time.Millisecond)
			for _, id := range g.ids {
				// At once a replica replays its log up to the commit index
				// it persisted (a change of commit alone is not synced);
				// the rest applies when the new leader commits, below.
				want := diskHardState(t, g.w.Disk(id)).Commit
				if got, ok := replayed[id]; !ok || got != want || want == 0 {
					t.Errorf("replica %d replayed its log up to %d (%v), want its persisted commit %d", id, got, ok, want)
				}
			}
			if ended := g.rec.service(); slices.ContainsFunc(ended, func(c simtest.ObsCall) bool {
				return c.Kind == "ended" && (c.Token == tok["r1"] || c.Token == tok["r3"])
			}) {
				t.Fatalf("a lease held at the crash ended before the restart: %+v", ended)
			}

			newLead, _ := g.awaitLeader(t, g.ids, 1, restartAt+2*time.Second)
			elected := g.w.Now() // within a millisecond after the election
			g.runTo(t, elected+50*time.Millisecond)
			for _, id := range g.ids {
				// Once the new leader commits, everything committed before
				// the crash is applied again, on every replica.
				if got := g.replica(id).Table().Snapshot(); !reflect.DeepEqual(got, pre[id]) {
					t.Errorf("replica %d after the new leader's first commit\n%+v\nwant the table it had at the crash\n%+v", id, got, pre[id])
				}
			}
			p.SendAt(elected+ttl-100*time.Millisecond, newLead, lockservice.AcquireRequest{Resource: "r1", Client: "d", TTL: ttl, Request: 6})
			p.SendAt(elected+ttl-100*time.Millisecond, newLead, lockservice.AcquireRequest{Resource: "r3", Client: "d", TTL: ttl, Request: 7})
			p.SendAt(elected+ttl+100*time.Millisecond, newLead, lockservice.AcquireRequest{Resource: "r1", Client: "d", TTL: ttl, Request: 8})
			g.runTo(t, elected+ttl+200*time.Millisecond)

			for _, req := range []uint64{6, 7} {
				if rep := p.OnlyLockReply(t, req); rep.Status != lockservice.Busy {
					t.Errorf("acquire %d by d before the new leader's TTL ran out: %+v, want busy", req, rep)
				}
			}
			rep := p.OnlyLockReply(t, 8)
			if rep.Status != lockservice.Granted || rep.Token <= before.LastToken {
				t.Errorf("acquire of r1 by d after the TTL: %+v, want granted with a token above %d", rep, before.LastToken)
			}
			for _, r := range []string{"r1", "r3"} {
				e, ok := g.rec.ended(tok[r])
				if !ok || e.Reason != "expired" || e.At < elected-time.Millisecond+ttl || e.At > elected+ttl+50*time.Millisecond {
					t.Errorf("lease on %s (token %d) ended %+v (%v), want expired one TTL after the election at ≈%v", r, tok[r], e, ok, elected)
				}
			}
			if b := g.believers(); len(b) != 1 {
				t.Errorf("leaders at the end: %v", b)
			}
			g.checkTablesAgree(t)
		})
	}
}

// sendToLeader makes p send msg at true time at to whichever replica leads
// then (replica 0 if none does, which answers not-leader and fails the
// test's expectations).
func (g *replicaGroup) sendToLeader(p *simtest.Probe, at time.Duration, msg sim.Message) {
	g.w.At(at, fmt.Sprintf("probe sends %T to the leader", msg), func() {
		to := g.ids[0]
		if id, _, ok := g.soleLeader(g.ids, 1); ok {
			to = id
		}
		p.Env.Send(to, msg)
	})
}

// On a network that delivers every message twice and holds half of them
// back by up to 20 ms, clients contending for two resources each finish
// their cycles, every (client, request) is granted at most once, and the
// grants keep S1: tokens strictly increase and grants of a resource never
// overlap. A probe's acquire delivered again after its newer release gets
// the identical reply and grants nothing.
func TestReplicaDuplicatedAndReorderedRequestsApplyOnce(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			net := sim.DefaultNetwork()
			net.DuplicateProbability, net.ReorderProbability, net.ReorderDelayMax = 1, 0.5, 20*time.Millisecond
			g := newReplicaGroup(t, 3, groupOpts{seed: seed, net: net})
			store := addStore(t, g.w, g.rec)
			p, _ := simtest.AddProbe(t, g.w, "p")
			const cycles = 3
			names := []string{"c1", "c2", "c3", "c4"}
			var clients []sim.NodeID
			for i, name := range names {
				cfg := workload.DefaultConfig(name, g.ids, store, []string{"r1", "r2"}[i%2])
				cfg.Observer, cfg.Cycles, cfg.StartDelay = g.rec, cycles, time.Duration(300+10*i)*time.Millisecond
				clients = append(clients, simtest.AddNode(t, g.w, name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{}))
			}
			g.awaitLeader(t, g.ids, 1, time.Second)
			t1 := g.w.Now() + 10*time.Millisecond
			acquire := lockservice.AcquireRequest{Resource: "q", Client: "p", TTL: 30 * time.Second, Request: 10}
			g.sendToLeader(p, t1, acquire)
			g.runTo(t, t1+300*time.Millisecond)
			first := p.LockReplies(10)
			if len(first) == 0 || first[0].Status != lockservice.Granted {
				t.Fatalf("the probe's acquire got %+v, want granted", first)
			}
			g.sendToLeader(p, g.w.Now(), lockservice.ReleaseRequest{Resource: "q", Client: "p", Token: first[0].Token, Request: 11})
			g.runTo(t, g.w.Now()+300*time.Millisecond)
			g.sendToLeader(p, g.w.Now(), acquire) // older, after the newer release
			g.runTo(t, 15*time.Second)

			for i, id := range clients {
				if !g.w.Process(id).(*workload.Client).Done() {
					t.Errorf("%s did not finish its %d cycles", names[i], cycles)
				}
			}
			if reps := p.LockReplies(10); len(reps) < 2 || slices.ContainsFunc(reps, func(r lockservice.LockReply) bool { return r != first[0] }) {
				t.Errorf("copies of the probe's acquire got %+v, want all identical to %+v", reps, first[0])
			}
			if reps := p.LockReplies(11); len(reps) == 0 || slices.ContainsFunc(reps, func(r lockservice.LockReply) bool { return r.Status != lockservice.Released }) {
				t.Errorf("the probe's release got %+v, want released", reps)
			}
			grants := g.rec.grants()
			perClient := map[string]int{}
			for _, c := range grants {
				perClient[c.Client]++
			}
			for _, name := range names {
				if perClient[name] != cycles {
					t.Errorf("%s was granted %d times, want %d", name, perClient[name], cycles)
				}
			}
			if perClient["p"] != 1 {
				t.Errorf("the probe was granted %d times, want once", perClient["p"])
			}
			if n := checkGrantOrder(t, g.rec.service()); n != len(grants) {
				t.Errorf("checked %d grants of %d", n, len(grants))
			}
			lead, _ := g.awaitLeader(t, g.ids, 1, g.w.Now())
			checkGrantsFromDistinctRequests(t, grants, g.w.Disk(lead))
			// The run exercised what it is about: copies of a request that
			// reached the leader while the first was in flight were logged
			// twice, and applied once.
			logged := map[simtest.OpKey]int{}
			for _, c := range diskCommands(t, g.w.Disk(lead)) {
				if c.Kind != CmdExpire {
					logged[simtest.OpKey{Client: c.Client, Request: c.Request}]++
				}
			}
			twice := 0
			for _, n := range logged { //detlint:sorted (a count)
				if n > 1 {
					twice++
				}
			}
			if twice == 0 || g.w.Stats().Network.Duplicated == 0 {
				t.Errorf("no request was logged twice (%d copies made): the run did not exercise duplicates in flight", g.w.Stats().Network.Duplicated)
			}
			t.Logf("%d of %d requests logged twice", twice, len(logged))
			byReq := map[simtest.OpKey]uint64{}
			for _, r := range g.rec.returns {
				if r.op != lockservice.OpAcquire || r.status != lockservice.Granted {
					continue
				}
				k := simtest.OpKey{Client: r.client, Request: r.request}
				if prev, ok := byReq[k]; ok {
					t.Errorf("%s's acquire %d returned granted twice (tokens %d, %d)", r.client, r.request, prev, r.token)
				}
				byReq[k] = r.token
			}
			snap := g.checkTablesAgree(t)
			if l, held := g.replica(lead).Table().Lease("q"); held {
				t.Errorf("the replayed acquire re-granted q: %+v", l)
			}
			if len(snap.Leases) != 0 {
				t.Errorf("leases still held after every client finished: %+v", snap.Leases)
			}
		})
	}
}

// timed is a message for the probe to send at an offset.
type timed struct {
	after time.Duration
	msg   sim.Message
}

// A copy of a request that reaches the leader while the first copy is
// still uncommitted is proposed again; applying that second entry is a
// replay from the dedup table, which must change nothing: it must not
// restart the lease (its Expire is measured from the entry that started
// it), and when the resource has changed hands in between, it must not
// disarm the new holder's timer, or that lease never expires while the
// leader leads. Every copy in a script arrives within 0.3 ms, before the
// first commits (2 ms on this network).
func TestReplicaDuplicateInFlightChangesNoLease(t *testing.T) {
	const d = time.Millisecond
	const ttl = time.Second
	const gap = 100 * time.Microsecond
	cases := []struct {
		name string
		// script is sent once a's acquire (request 1) was granted tok.
		script func(tok uint64) []timed
		// holder is whose lease must end "expired" one TTL after the entry
		// that started it; startedBy is the request that started it.
		holder    string
		startedBy uint64
		renewals  int // effective renewals, each reported by every replica
	}{
		{"acquire copies", nil, "a", 1, 0},
		{"renewal copies", func(tok uint64) []timed {
			renew := lockservice.RenewRequest{Resource: "r", Client: "a", Token: tok, Request: 2}
			return []timed{{0, renew}, {3 * gap, renew}}
		}, "a", 2, 1},
		{"renewal copy after a release and a new grant", func(tok uint64) []timed {
			renew := lockservice.RenewRequest{Resource: "r", Client: "a", Token: tok, Request: 2}
			return []timed{
				{0, renew},
				{gap, lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: tok, Request: 3}},
				{2 * gap, lockservice.AcquireRequest{Resource: "r", Client: "b", TTL: ttl, Request: 4}},
				{3 * gap, renew}, // the network's late copy
			}
		}, "b", 4, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newReplicaGroup(t, 3, groupOpts{seed: 1, net: fixedLatency(d)})
			p, _ := simtest.AddProbe(t, g.w, "p")
			lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
			t0 := g.w.Now() + 10*time.Millisecond
			acquire := lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: ttl, Request: 1}
			p.SendAt(t0, lead, acquire)
			if tc.script == nil {
				p.SendAt(t0+3*gap, lead, acquire)
			}
			g.runTo(t, t0+50*time.Millisecond)
			a := p.LockReplies(1)
			if len(a) == 0 || a[0].Status != lockservice.Granted {
				t.Fatalf("a's acquire: %+v", a)
			}
			t1 := g.w.Now() + 10*time.Millisecond
			if tc.script != nil {
				for _, m := range tc.script(a[0].Token) {
					p.SendAt(t1+m.after, lead, m.msg)
				}
			}
			later := lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: ttl, Request: 5}
			p.SendAt(t1+ttl+200*time.Millisecond, lead, later)
			g.runTo(t, t1+ttl+300*time.Millisecond)

			// The copies were proposed twice: the case tests what it says.
			copies := map[simtest.OpKey]int{}
			for _, c := range diskCommands(t, g.w.Disk(lead)) {
				copies[simtest.OpKey{Client: c.Client, Request: c.Request}]++
			}
			dup := simtest.OpKey{Client: "a", Request: 1}
			if tc.script != nil {
				dup = simtest.OpKey{Client: "a", Request: 2}
			}
			if copies[dup] != 2 {
				t.Fatalf("the leader logged %d entries for %+v, want 2 (the copy must arrive while the first is in flight)", copies[dup], dup)
			}
			var started simtest.ObsCall
			switch {
			case tc.holder == "a" && tc.startedBy == 1:
				started = g.rec.grants()[0]
			case tc.holder == "a":
				if len(g.rec.renewed) == 0 {
					t.Fatalf("a's renewal was not applied")
				}
				started = g.rec.renewed[0]
				started.Token = a[0].Token
			default:
				gs := g.rec.grants()
				if len(gs) < 2 || gs[1].Client != tc.holder {
					t.Fatalf("grants %+v, want %s's second", gs, tc.holder)
				}
				started = gs[1]
			}
			e, ok := g.rec.ended(started.Token)
			if want := started.At + ttl + 2*d; !ok || e.Reason != "expired" || e.At != want {
				t.Errorf("%s's lease (token %d, started at %v) ended %+v (%v); want expired at exactly %v, one TTL after the entry that started it (+%v to commit the Expire)",
					tc.holder, started.Token, started.At, e, ok, want, 2*d)
			}
			if rep := p.LockReplies(5); len(rep) != 1 || rep[0].Status != lockservice.Granted || rep[0].Token <= started.Token {
				t.Errorf("c's acquire after the lease's TTL: %+v, want granted with a newer token", rep)
			}
			if n := len(g.rec.renewed); n != tc.renewals*len(g.ids) {
				t.Errorf("%d renewal reports, want %d (each effective renewal once per replica): %+v", n, tc.renewals*len(g.ids), g.rec.renewed)
			}
			for _, r := range p.Lock {
				if r.Msg.Request == 2 && r.Msg.Status != lockservice.Renewed {
					t.Errorf("a copy of the renewal was answered %+v, want renewed", r.Msg)
				}
			}
			g.checkTablesAgree(t)
		})
	}
}

// In a 5-replica group the leader and one follower are cut off together.
// The minority leader appends entries that cannot commit and its follower
// persists them; the majority elects a leader and commits fewer entries
// than the minority appended, so the minority's logs are longer and
// conflict. After the heal both minority logs are cut back and overwritten
// until they are the new leader's, key for key and byte for byte, and
// every table matches.
func TestReplicaDivergentLogIsRepaired(t *testing.T) {
	g := newReplicaGroup(t, 5, groupOpts{seed: 7, net: sim.DefaultNetwork()})
	pm, pmID := simtest.AddProbe(t, g.w, "pm") // on the minority side
	pM, pMID := simtest.AddProbe(t, g.w, "pM") // on the majority side
	old, oldTerm := g.awaitLeader(t, g.ids, 1, time.Second)
	pM.SendAt(g.w.Now()+time.Millisecond, old, lockservice.AcquireRequest{Resource: "x", Client: "base", TTL: time.Minute, Request: 1})
	g.runTo(t, g.w.Now()+100*time.Millisecond)
	base := pM.OnlyLockReply(t, 1)
	if base.Status != lockservice.Granted {
		t.Fatalf("the first acquire: %+v", base)
	}

	f := g.others(old)[0]
	majority := g.others(old, f)
	T := g.w.Now() + 10*time.Millisecond
	g.w.At(T, "partition the leader and one follower from the rest", func() {
		g.w.Partition([]sim.NodeID{old, f, pmID}, append(slices.Clone(majority), pMID))
	})
	const divergent = 8
	for i := range divergent {
		pm.SendAt(T+time.Millisecond+time.Duration(i)*100*time.Microsecond, old,
			lockservice.AcquireRequest{Resource: fmt.Sprintf("m%d", i), Client: fmt.Sprintf("m%d", i), TTL: time.Minute, Request: 1})
	}
	g.runTo(t, T+50*time.Millisecond)
	isMinority := func(c loggedCommand) bool { return len(c.Client) == 2 && c.Client[0] == 'm' }
	var onF []loggedCommand
	for _, c := range diskCommands(t, g.w.Disk(f)) {
		if isMinority(c) {
			onF = append(onF, c)
		}
	}
	if len(onF) != divergent {
		t.Fatalf("the minority follower persisted %d of the minority leader's %d entries: %+v", len(onF), divergent, onF)
	}
	if c := diskHardState(t, g.w.Disk(f)).Commit; c >= onF[0].index {
		t.Fatalf("the minority follower committed up to %d, past the minority's first entry %d", c, onF[0].index)
	}

	newLead, _ := g.awaitLeader(t, majority, oldTerm+1, T+3*time.Second)
	for i := range 2 {
		pM.SendAt(g.w.Now()+time.Duration(i+1)*time.Millisecond, newLead,
			lockservice.AcquireRequest{Resource: fmt.Sprintf("M%d", i), Client: fmt.Sprintf("M%d", i), TTL: time.Minute, Request: uint64(2 + i)})
	}
	g.runTo(t, g.w.Now()+200*time.Millisecond)
	var majorityTokens []uint64
	for i := range 2 {
		rep := pM.OnlyLockReply(t, uint64(2+i))
		if rep.Status != lockservice.Granted {
			t.Fatalf("majority acquire %d: %+v", i, rep)
		}
		majorityTokens = append(majorityTokens, rep.Token)
	}
	leaderLog, fLog := diskEntries(t, g.w.Disk(newLead)), diskEntries(t, g.w.Disk(f))
	if len(fLog) <= len(leaderLog) {
		t.Fatalf("before the heal the minority follower's log (%d entries) is not longer than the leader's (%d): the repair would not cut it back",
			len(fLog), len(leaderLog))
	}
	if slices.Equal(diskLogBytes(g.w.Disk(f))[:len(leaderLog)], diskLogBytes(g.w.Disk(newLead))) {
		t.Fatalf("before the heal the minority follower's log does not conflict with the leader's")
	}

	healAt := g.w.Now() + 10*time.Millisecond
	g.w.At(healAt, "heal", g.w.Heal)
	g.runTo(t, healAt+time.Second)

	if b := g.believers(); len(b) != 1 || func() bool { _, ok := b[newLead]; return !ok }() {
		t.Fatalf("leaders after the heal %v, want %d alone", b, newLead)
	}
	want := diskLogBytes(g.w.Disk(newLead))
	for _, id := range g.ids {
		got := diskLogBytes(g.w.Disk(id))
		if !slices.Equal(got, want) {
			t.Errorf("replica %d's persisted log after the heal:\n%s\nwant the leader's:\n%s", id, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if c := g.replica(id).node.Status().Commit; c != uint64(len(want)) {
			t.Errorf("replica %d has committed up to %d, want the whole log %d", id, c, len(want))
		}
		for _, c := range diskCommands(t, g.w.Disk(id)) {
			if isMinority(c) {
				t.Errorf("replica %d's log still holds the minority's entry %+v", id, c)
			}
		}
	}
	granted := map[string]uint64{}
	for _, c := range g.rec.grants() {
		granted[c.Client] = c.Token
	}
	wantGranted := map[string]uint64{"base": base.Token, "M0": majorityTokens[0], "M1": majorityTokens[1]}
	if len(g.rec.grants()) != 3 || !reflect.DeepEqual(granted, wantGranted) {
		t.Errorf("grants %v, want %v", granted, wantGranted)
	}
	if snap := g.checkTablesAgree(t); len(snap.Leases) != 3 {
		t.Errorf("leases %+v, want base's and the majority's two", snap.Leases)
	}
}

// Holders come first at the ingress bound: with IngressDepth 2 and two
// acquires in flight, a holder's release and renewal sent in the same
// instant are proposed (up to twice the bound) while a third acquire is
// shed; with both in flight too, a third holder's request is shed. The
// release frees the lock it names.
func TestReplicaIngressAdmitsHoldersFirst(t *testing.T) {
	g := newReplicaGroup(t, 3, groupOpts{seed: 3, net: fixedLatency(time.Millisecond),
		edit: func(c *ReplicaConfig) { c.IngressDepth = 2 }})
	p, _ := simtest.AddProbe(t, g.w, "p")
	g.awaitLeader(t, g.ids, 1, time.Second)
	t0 := g.w.Now() + 10*time.Millisecond
	for i, r := range []string{"h1", "h2", "h3"} {
		g.sendToLeader(p, t0+time.Duration(i)*50*time.Millisecond, lockservice.AcquireRequest{Resource: r, Client: "p", TTL: 30 * time.Second, Request: uint64(1 + i)})
	}
	g.runTo(t, t0+300*time.Millisecond)
	var tokens []uint64
	for req := uint64(1); req <= 3; req++ {
		reps := p.LockReplies(req)
		if len(reps) == 0 || reps[0].Status != lockservice.Granted {
			t.Fatalf("acquire %d got %+v, want granted", req, reps)
		}
		tokens = append(tokens, reps[0].Token)
	}
	// One instant: two acquires (they fill the bound), a release, a
	// renewal (both past it), another acquire (shed), a second release (at
	// twice the bound: shed).
	t1 := g.w.Now() + 10*time.Millisecond
	g.sendToLeader(p, t1, lockservice.AcquireRequest{Resource: "x", Client: "p", TTL: 30 * time.Second, Request: 9})
	g.sendToLeader(p, t1, lockservice.AcquireRequest{Resource: "z", Client: "p", TTL: 30 * time.Second, Request: 10})
	g.sendToLeader(p, t1, lockservice.ReleaseRequest{Resource: "h1", Client: "p", Token: tokens[0], Request: 11})
	g.sendToLeader(p, t1, lockservice.RenewRequest{Resource: "h2", Client: "p", Token: tokens[1], TTL: 30 * time.Second, Request: 12})
	g.sendToLeader(p, t1, lockservice.AcquireRequest{Resource: "y", Client: "p", TTL: 30 * time.Second, Request: 13})
	g.sendToLeader(p, t1, lockservice.ReleaseRequest{Resource: "h3", Client: "p", Token: tokens[2], Request: 14})
	g.runTo(t, t1+300*time.Millisecond)
	want := map[uint64]lockservice.Status{9: lockservice.Granted, 10: lockservice.Granted, 11: lockservice.Released, 12: lockservice.Renewed,
		13: lockservice.Overloaded, 14: lockservice.Overloaded}
	for req := uint64(9); req <= 14; req++ {
		reps := p.LockReplies(req)
		if len(reps) != 1 || reps[0].Status != want[req] {
			t.Errorf("request %d got %+v, want one reply %v", req, reps, want[req])
		}
	}
	lead, _, _ := g.soleLeader(g.ids, 1)
	if _, held := g.replica(lead).Table().Lease("h1"); held {
		t.Errorf("h1 is still held after its release was admitted")
	}
}

// With IngressDepth 2, a burst of 20 acquires (20 clients, 20 resources)
// reaches the leader in one instant: it proposes 2 and sheds exactly 18 at
// once as Overloaded, never holding more than 2 in flight. The clients
// back off and retry with new request ids; every one ends up granted
// exactly once and finishes its cycle, and no request is granted twice:
// overload costs throughput, never safety.
func TestReplicaIngressShedsTheExcessAndKeepsSafety(t *testing.T) {
	const d = time.Millisecond
	const burst, depth = 20, 2
	g := newReplicaGroup(t, 3, groupOpts{seed: 8, net: fixedLatency(d), trace: true,
		edit: func(c *ReplicaConfig) { c.IngressDepth = depth }})
	store := addStore(t, g.w, g.rec)
	lead, _ := g.awaitLeader(t, g.ids, 1, time.Second)
	servers := append([]sim.NodeID{lead}, g.others(lead)...)
	const delay = 10 * time.Millisecond
	sendAt := g.w.Now() + delay
	var clients []sim.NodeID
	for i := range burst {
		cfg := workload.DefaultConfig(fmt.Sprintf("c%02d", i), servers, store, fmt.Sprintf("r%02d", i))
		cfg.Observer, cfg.StartDelay = g.rec, delay
		clients = append(clients, simtest.AddNode(t, g.w, cfg.Name, func() sim.Process { return workload.New(cfg, nil) }, fakeclock.Config{}))
	}
	done := func() bool {
		return !slices.ContainsFunc(clients, func(id sim.NodeID) bool {
			c, ok := g.w.Process(id).(*workload.Client) // nil until it has started
			return !ok || !c.Done()
		})
	}
	for !done() && g.w.Now() < sendAt+30*time.Second {
		g.runTo(t, g.w.Now()+100*time.Millisecond)
	}
	if !done() {
		t.Fatalf("the clients did not all finish within 30 s")
	}

	// The burst arrives at sendAt+d: 2 proposals, 18 sheds at that instant;
	// the sheds' replies arrive d later, the grants once the two commit.
	var shedAtBurst int
	for _, l := range g.logsSince(t, g.w.Name(lead), "replica.shed", 0) {
		if l.Attrs["inflight"] != fmt.Sprint(depth) {
			t.Errorf("%v: shed with %s in flight, want %d", l.At, l.Attrs["inflight"], depth)
		}
		if l.At == sendAt+d {
			shedAtBurst++
		}
	}
	if shedAtBurst != burst-depth {
		t.Errorf("the leader shed %d requests of the burst, want exactly %d", shedAtBurst, burst-depth)
	}
	var overloadedFirst, grantedFirst, overloaded int
	for _, r := range g.rec.returns {
		if r.op != lockservice.OpAcquire {
			continue
		}
		switch {
		case r.status == lockservice.Overloaded && r.at == sendAt+2*d:
			overloadedFirst++
		case r.status == lockservice.Granted && r.at == sendAt+4*d:
			grantedFirst++
		}
		if r.status == lockservice.Overloaded {
			overloaded++
		}
	}
	if overloadedFirst != burst-depth || grantedFirst != depth {
		t.Errorf("the burst's answers: %d overloaded at %v and %d granted at %v, want %d and %d",
			overloadedFirst, sendAt+2*d, grantedFirst, sendAt+4*d, burst-depth, depth)
	}
	grants := g.rec.grants()
	perClient := map[string]int{}
	for _, c := range grants {
		perClient[c.Client]++
	}
	for i := range burst {
		if name := fmt.Sprintf("c%02d", i); perClient[name] != 1 {
			t.Errorf("%s was granted %d times, want once", name, perClient[name])
		}
	}
	grantedReturns := map[string]int{}
	for _, r := range g.rec.returns {
		if r.op == lockservice.OpAcquire && r.status == lockservice.Granted {
			grantedReturns[r.client]++
		}
	}
	if len(grantedReturns) != burst || slices.ContainsFunc(clients, func(id sim.NodeID) bool { return grantedReturns[g.w.Name(id)] != 1 }) {
		t.Errorf("granted returns per client %v, want one each", grantedReturns)
	}
	checkGrantOrder(t, g.rec.service())
	checkGrantsFromDistinctRequests(t, grants, g.w.Disk(lead))
	t.Logf("%d overloaded answers in all; the last client finished by %v", overloaded, g.w.Now()-sendAt)
}

// The leader times each lease on its own monotonic clock: it proposes the
// Expire exactly one TTL after it applied the grant (one TTL of true time
// with no drift, TTL/1.1 on a clock 10% fast), and the lease ends when the
// Expire commits, 2 ms later on this network. A renewal applied before the
// timer fires restarts it; a renewal proposed before the Expire but
// committed after it still wins, because the Expire names the grant it
// measured and is then stale; a renewal arriving after the Expire
// committed is refused.
func TestReplicaLeaseExpiresOnLeaderClockAndRenewalMakesExpireStale(t *testing.T) {
	const d = time.Millisecond
	const ttl = time.Second
	cases := []struct {
		name    string
		ppm     int64
		renewAt time.Duration      // after the grant's apply at the leader; 0: none
		answer  lockservice.Status // the renewal's
	}{
		{"no renewal", 0, 0, 0},
		{"no renewal, clocks 10% fast", 100_000, 0, 0},
		{"renewal halfway", 0, ttl / 2, lockservice.Renewed},
		{"renewal racing the Expire", 0, ttl - 2*d, lockservice.Renewed},
		{"renewal after the Expire", 0, ttl + 5*d, lockservice.NotHolder},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newReplicaGroup(t, 3, groupOpts{seed: 9, net: fixedLatency(d), clock: fakeclock.Config{DriftPPM: tc.ppm}})
			p, _ := simtest.AddProbe(t, g.w, "p")
			lead, leadTerm := g.awaitLeader(t, g.ids, 1, time.Second)
			grantAt := time.Duration(-1)
			g.rec.OnGranted = func(_, _ string, token uint64) {
				if grantAt >= 0 {
					return
				}
				grantAt = g.w.Now()
				if tc.renewAt > 0 {
					p.SendAt(grantAt+tc.renewAt, lead, lockservice.RenewRequest{Resource: "r", Client: "a", Token: token, Request: 2})
				}
			}
			t0 := g.w.Now() + 10*time.Millisecond
			p.SendAt(t0, lead, lockservice.AcquireRequest{Resource: "r", Client: "a", TTL: ttl, Request: 1})
			g.runTo(t, t0+3*ttl)

			if b := g.believers(); len(b) != 1 || b[lead] != leadTerm {
				t.Fatalf("the leader changed: %v", b)
			}
			acq := p.OnlyLockReply(t, 1)
			if acq.Status != lockservice.Granted || grantAt != t0+3*d {
				t.Fatalf("acquire %+v applied at %v, want granted and applied at %v", acq, grantAt, t0+3*d)
			}
			start := grantAt // when the leader started timing the lease
			if tc.answer != 0 {
				rep := p.OnlyLockReply(t, 2)
				if rep.Status != tc.answer {
					t.Fatalf("renewal answered %+v, want %v", rep, tc.answer)
				}
			}
			if tc.answer == lockservice.Renewed {
				if len(g.rec.renewed) == 0 {
					t.Fatalf("no renewal reported")
				}
				start = g.rec.renewed[0].At
				if want := grantAt + tc.renewAt + 3*d; start != want {
					t.Errorf("renewal applied at %v, want %v", start, want)
				}
			}
			trueTTL := time.Duration(int64(ttl) * 1_000_000 / (1_000_000 + tc.ppm))
			want := start + trueTTL + 2*d
			e, ok := g.rec.ended(acq.Token)
			if !ok || e.Reason != "expired" || e.At < want-time.Microsecond || e.At > want+time.Microsecond {
				t.Errorf("the lease ended %+v (%v), want expired at %v: %v after the leader started timing it at %v, +%v to commit the Expire",
					e, ok, want, trueTTL, start, 2*d)
			}
			var expires []loggedCommand
			var renewIndex uint64
			for _, c := range diskCommands(t, g.w.Disk(lead)) {
				switch c.Kind {
				case CmdExpire:
					expires = append(expires, c)
				case CmdRenew:
					renewIndex = c.index
				}
			}
			if tc.name == "renewal racing the Expire" {
				// The first timer fired after the renewal was proposed and
				// before it committed: its Expire follows the renewal in the
				// log and names the grant, so it was stale when applied.
				if len(expires) != 2 || expires[0].Since != acq.Token || expires[0].index <= renewIndex || expires[1].Since != renewIndex {
					t.Errorf("Expires %+v with the renewal at %d; want a stale one for the grant after the renewal, then one for the renewal", expires, renewIndex)
				}
			} else if len(expires) != 1 {
				t.Errorf("Expires %+v, want exactly one", expires)
			}
		})
	}
}
