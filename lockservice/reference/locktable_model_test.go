package reference

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/lockservice"
)

// The LockTable state-machine test drives the table and a small model with
// the same random sequence of calls and compares them after every step.

var (
	smResources = []string{"r0", "r1", "r2"}
	smClients   = []string{"c0", "c1", "c2"}
)

// smTick is the unit of TTLs and of time steps, coarse enough that time
// often lands exactly on a lease's deadline.
const smTick = 10 * time.Millisecond

type lockOp uint8

const (
	opAcquire lockOp = iota
	opRenew
	opRelease
)

// lockCall is one request as sent, kept so that it can be sent again.
type lockCall struct {
	op  lockOp
	acq lockservice.AcquireRequest
	ren lockservice.RenewRequest
	rel lockservice.ReleaseRequest
}

func (c lockCall) client() string {
	switch c.op {
	case opAcquire:
		return c.acq.Client
	case opRenew:
		return c.ren.Client
	}
	return c.rel.Client
}

func (c lockCall) request() uint64 {
	switch c.op {
	case opAcquire:
		return c.acq.Request
	case opRenew:
		return c.ren.Request
	}
	return c.rel.Request
}

func (c lockCall) String() string {
	switch c.op {
	case opAcquire:
		return fmt.Sprintf("acquire%+v", c.acq)
	case opRenew:
		return fmt.Sprintf("renew%+v", c.ren)
	}
	return fmt.Sprintf("release%+v", c.rel)
}

// lockModel is the specification: a map of leases, the last token and a
// per-client window of the last dedupDepth replies.
type lockModel struct {
	leases    map[string]Lease
	lastToken uint64
	dedup     map[string][]dedupEntry
	highest   map[string]uint64
	forgotten map[string]uint64 // highest request pushed out of the window
}

// stale: a request of an earlier incarnation, at or below one pushed out
// of the window, or older than every request in a full window, is a late
// copy and is not applied.
func (m *lockModel) stale(client string, req uint64) bool {
	if req>>32 < m.highest[client]>>32 || req <= m.forgotten[client] {
		return true
	}
	d := m.dedup[client]
	if len(d) < dedupDepth {
		return false
	}
	for _, e := range d {
		if e.Request <= req {
			return false
		}
	}
	return true
}

func (m *lockModel) seen(client string, req uint64) (lockservice.LockReply, bool) {
	for _, e := range m.dedup[client] {
		if e.Request == req {
			return e.Reply, true
		}
	}
	return lockservice.LockReply{}, false
}

func (m *lockModel) remember(client string, req uint64, r lockservice.LockReply) lockservice.LockReply {
	if m.highest == nil {
		m.highest = map[string]uint64{}
	}
	m.highest[client] = max(m.highest[client], req)
	d := append(m.dedup[client], dedupEntry{Request: req, Reply: r})
	if len(d) > dedupDepth {
		if m.forgotten == nil {
			m.forgotten = map[string]uint64{}
		}
		for _, e := range d[:len(d)-dedupDepth] {
			m.forgotten[client] = max(m.forgotten[client], e.Request)
		}
		d = d[len(d)-dedupDepth:]
	}
	m.dedup[client] = slices.Clone(d)
	return r
}

// acquire returns the expected reply and whether it is a fresh grant.
func (m *lockModel) acquire(r lockservice.AcquireRequest, now time.Duration, token uint64) (lockservice.LockReply, bool) {
	if rep, ok := m.seen(r.Client, r.Request); ok {
		return rep, false
	}
	if m.stale(r.Client, r.Request) {
		return lockservice.LockReply{Request: r.Request, Status: lockservice.Stale}, false
	}
	if l, held := m.leases[r.Resource]; held {
		if l.Holder == r.Client {
			l.TTL, l.Deadline = r.TTL, now+r.TTL
			l.Request = max(l.Request, r.Request)
			m.leases[r.Resource] = l
			return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Granted, Token: l.Token, TTL: r.TTL}), false
		}
		return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Busy}), false
	}
	m.lastToken = token
	m.leases[r.Resource] = Lease{Resource: r.Resource, Holder: r.Client, Token: token, TTL: r.TTL, Deadline: now + r.TTL, Request: r.Request}
	return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Granted, Token: token, TTL: r.TTL}), true
}

func (m *lockModel) renew(r lockservice.RenewRequest, now time.Duration) lockservice.LockReply {
	if rep, ok := m.seen(r.Client, r.Request); ok {
		return rep
	}
	if m.stale(r.Client, r.Request) {
		return lockservice.LockReply{Request: r.Request, Status: lockservice.Stale}
	}
	l, ok := m.leases[r.Resource]
	if !ok || l.Holder != r.Client || l.Token != r.Token || now >= l.Deadline {
		return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.NotHolder})
	}
	l.Deadline = now + l.TTL
	m.leases[r.Resource] = l
	return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Renewed, Token: l.Token, TTL: l.TTL})
}

func (m *lockModel) release(r lockservice.ReleaseRequest) (lockservice.LockReply, *Lease) {
	if rep, ok := m.seen(r.Client, r.Request); ok {
		return rep, nil
	}
	if m.stale(r.Client, r.Request) {
		return lockservice.LockReply{Request: r.Request, Status: lockservice.Stale}, nil
	}
	l, ok := m.leases[r.Resource]
	if !ok || l.Holder != r.Client || l.Token != r.Token {
		return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.NotHolder}), nil
	}
	if r.Request < l.Request {
		// Sent before the holder acquired the lease again: it released an
		// earlier hold, not this one.
		return lockservice.LockReply{Request: r.Request, Status: lockservice.Stale}, nil
	}
	delete(m.leases, r.Resource)
	return m.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Released, Token: l.Token}), &l
}

func (m *lockModel) sortedLeases() []Lease {
	out := make([]Lease, 0, len(m.leases))
	for _, r := range smResources {
		if l, ok := m.leases[r]; ok {
			out = append(out, l)
		}
	}
	return out
}

// lockSM is the harness: the table under test, the model, the clock and
// what has been sent so far.
type lockSM struct {
	tbl      *LockTable
	m        lockModel
	now      time.Duration
	nextReq  map[string]uint64
	calls    map[string][]lockCall // by client, every request applied fresh
	maxToken uint64                // highest token in any reply or lease so far
}

func newLockSM() *lockSM {
	return &lockSM{
		tbl:     NewLockTable(),
		m:       lockModel{leases: map[string]Lease{}, dedup: map[string][]dedupEntry{}},
		nextReq: map[string]uint64{},
		calls:   map[string][]lockCall{},
	}
}

// requestID draws a new request id for client, or (sometimes) one it used
// before, for any kind of request.
func (s *lockSM) requestID(t *rapid.T, client string) uint64 {
	if len(s.calls[client]) > 0 && rapid.IntRange(0, 3).Draw(t, "reuseID") == 0 {
		return rapid.SampledFrom(s.calls[client]).Draw(t, "reused").request()
	}
	s.nextReq[client]++
	return s.nextReq[client]
}

// holderOrClient draws a client, biased towards resource's holder.
func (s *lockSM) holderOrClient(t *rapid.T, resource string) string {
	if l, ok := s.m.leases[resource]; ok && rapid.Bool().Draw(t, "asHolder") {
		return l.Holder
	}
	return rapid.SampledFrom(smClients).Draw(t, "client")
}

// tokenFor draws the current token of resource, a stale one or a random one.
func (s *lockSM) tokenFor(t *rapid.T, resource string) uint64 {
	l, held := s.m.leases[resource]
	switch rapid.IntRange(0, 2).Draw(t, "tokenKind") {
	case 0:
		if held {
			return l.Token
		}
	case 1:
		if held && l.Token > 1 {
			return l.Token - 1
		}
	}
	return rapid.Uint64Range(1, s.m.lastToken+1).Draw(t, "token")
}

// apply sends c to the table and the model and checks the outcome.
func (s *lockSM) apply(t *rapid.T, c lockCall, token uint64) {
	client, req := c.client(), c.request()
	prevReply, repeated := s.m.seen(client, req)
	beforeLeases, beforeLast := s.tbl.Leases(), s.tbl.LastToken()

	var got, want lockservice.LockReply
	switch c.op {
	case opAcquire:
		var fresh bool
		want, fresh = s.m.acquire(c.acq, s.now, token)
		got = s.tbl.Acquire(c.acq, s.now, token)
		if fresh && got.Status == lockservice.Granted && got.Token <= s.maxToken {
			t.Fatalf("%v: fresh grant with token %d, not above the earlier token %d", c, got.Token, s.maxToken)
		}
	case opRenew:
		want = s.m.renew(c.ren, s.now)
		got = s.tbl.Renew(c.ren, s.now)
	case opRelease:
		var wantEnded, gotEnded *Lease
		want, wantEnded = s.m.release(c.rel)
		got, gotEnded = s.tbl.Release(c.rel)
		switch {
		case (wantEnded == nil) != (gotEnded == nil):
			t.Fatalf("%v: ended lease %+v, want %+v", c, gotEnded, wantEnded)
		case wantEnded != nil && *wantEnded != *gotEnded:
			t.Fatalf("%v: ended lease %+v, want %+v", c, *gotEnded, *wantEnded)
		}
	}
	if got != want {
		t.Fatalf("%v at %v: reply %+v, model says %+v", c, s.now, got, want)
	}
	unchanged := func(why string) {
		if after := s.tbl.Leases(); !slices.Equal(after, beforeLeases) || s.tbl.LastToken() != beforeLast {
			t.Fatalf("%v (%s) changed the table: leases %+v → %+v, last token %d → %d",
				c, why, beforeLeases, after, beforeLast, s.tbl.LastToken())
		}
	}
	if repeated {
		if got != prevReply {
			t.Fatalf("%v repeats request %d of %s: reply %+v, first reply was %+v", c, req, client, got, prevReply)
		}
		unchanged("a repeated request")
	} else {
		s.calls[client] = append(s.calls[client], c)
	}
	if got.Status == lockservice.NotHolder {
		unchanged("answered not-holder")
	}
	s.maxToken = max(s.maxToken, got.Token, s.tbl.LastToken())
}

func (s *lockSM) acquire(t *rapid.T) {
	c := lockCall{op: opAcquire, acq: lockservice.AcquireRequest{
		Resource: rapid.SampledFrom(smResources).Draw(t, "resource"),
		Client:   rapid.SampledFrom(smClients).Draw(t, "client"),
		TTL:      smTick * time.Duration(rapid.IntRange(1, 30).Draw(t, "ttlTicks")),
	}}
	c.acq.Request = s.requestID(t, c.acq.Client)
	s.apply(t, c, s.tbl.LastToken()+1)
}

func (s *lockSM) renew(t *rapid.T) {
	res := rapid.SampledFrom(smResources).Draw(t, "resource")
	c := lockCall{op: opRenew, ren: lockservice.RenewRequest{Resource: res, Client: s.holderOrClient(t, res), Token: s.tokenFor(t, res)}}
	c.ren.Request = s.requestID(t, c.ren.Client)
	s.apply(t, c, 0)
}

func (s *lockSM) release(t *rapid.T) {
	res := rapid.SampledFrom(smResources).Draw(t, "resource")
	c := lockCall{op: opRelease, rel: lockservice.ReleaseRequest{Resource: res, Client: s.holderOrClient(t, res), Token: s.tokenFor(t, res)}}
	c.rel.Request = s.requestID(t, c.rel.Client)
	s.apply(t, c, 0)
}

// retry sends an earlier request again, unchanged, as a client's retry or a
// network duplicate would.
func (s *lockSM) retry(t *rapid.T) {
	client := rapid.SampledFrom(smClients).Draw(t, "client")
	if len(s.calls[client]) == 0 {
		t.Skip("nothing sent yet")
	}
	s.apply(t, rapid.SampledFrom(s.calls[client]).Draw(t, "call"), s.tbl.LastToken()+1)
}

func (s *lockSM) advance(t *rapid.T) {
	s.now += smTick * time.Duration(rapid.IntRange(0, 20).Draw(t, "ticks"))
}

func (s *lockSM) expireDue(t *rapid.T) {
	res := rapid.SampledFrom(smResources).Draw(t, "resource")
	got, ok := s.tbl.ExpireDue(res, s.now)
	l, held := s.m.leases[res]
	due := held && s.now >= l.Deadline
	if ok != due || (ok && got != l) {
		t.Fatalf("ExpireDue(%s, %v) = %+v, %v; model lease %+v (held %v)", res, s.now, got, ok, l, held)
	}
	if ok {
		if got.Deadline > s.now {
			t.Fatalf("ExpireDue(%s, %v) removed a lease before its deadline %v", res, s.now, got.Deadline)
		}
		delete(s.m.leases, res)
	}
}

func (s *lockSM) expire(t *rapid.T) {
	res := rapid.SampledFrom(smResources).Draw(t, "resource")
	token := s.tokenFor(t, res)
	got, ok := s.tbl.Expire(res, token, s.now)
	l, held := s.m.leases[res]
	due := held && l.Token == token && s.now >= l.Deadline
	if ok != due || (ok && got != l) {
		t.Fatalf("Expire(%s, %d, %v) = %+v, %v; model lease %+v (held %v)", res, token, s.now, got, ok, l, held)
	}
	if ok {
		delete(s.m.leases, res)
	}
}

// restart round-trips the table through Snapshot and RestoreLockTable,
// through JSON as the server does or in memory, after some downtime.
func (s *lockSM) restart(t *rapid.T) {
	before, last := s.tbl.Leases(), s.tbl.LastToken()
	snap := s.tbl.Snapshot()
	if rapid.Bool().Draw(t, "viaJSON") {
		b, err := json.Marshal(snap)
		if err != nil {
			t.Fatalf("marshal snapshot: %v", err)
		}
		snap = Snapshot{}
		if err := json.Unmarshal(b, &snap); err != nil {
			t.Fatalf("unmarshal snapshot %s: %v", b, err)
		}
	}
	s.now += smTick * time.Duration(rapid.IntRange(0, 20).Draw(t, "downTicks"))
	s.tbl = RestoreLockTable(snap, s.now)

	if s.tbl.LastToken() != last {
		t.Fatalf("restore: last token %d, was %d", s.tbl.LastToken(), last)
	}
	after := s.tbl.Leases()
	if len(after) != len(before) {
		t.Fatalf("restore: leases %+v, were %+v", after, before)
	}
	for i, a := range after {
		b := before[i]
		if a.Resource != b.Resource || a.Holder != b.Holder || a.Token != b.Token || a.TTL != b.TTL {
			t.Fatalf("restore: lease %+v, was %+v", a, b)
		}
		if a.Deadline < b.Deadline {
			t.Fatalf("restore at %v shortened lease %+v: deadline %v, was %v", s.now, a, a.Deadline, b.Deadline)
		}
		if a.Deadline != s.now+a.TTL {
			t.Fatalf("restore at %v: lease %+v should restart at its full TTL", s.now, a)
		}
		l := s.m.leases[a.Resource]
		l.Deadline = a.Deadline
		s.m.leases[a.Resource] = l
	}
}

// check compares the table with the model.
func (s *lockSM) check(t *rapid.T) {
	got := s.tbl.Leases()
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l.Resource] {
			t.Fatalf("two leases on %s: %+v", l.Resource, got)
		}
		seen[l.Resource] = true
		if one, ok := s.tbl.Lease(l.Resource); !ok || one != l {
			t.Fatalf("Lease(%s) = %+v, %v; Leases has %+v", l.Resource, one, ok, l)
		}
		if l.Token > s.tbl.LastToken() {
			t.Fatalf("lease %+v holds a token above the last issued %d", l, s.tbl.LastToken())
		}
	}
	if want := s.m.sortedLeases(); !slices.Equal(got, want) {
		t.Fatalf("leases %+v, model says %+v", got, want)
	}
	if s.tbl.LastToken() != s.m.lastToken {
		t.Fatalf("last token %d, model says %d", s.tbl.LastToken(), s.m.lastToken)
	}
	for _, c := range smClients {
		for _, e := range s.m.dedup[c] {
			if rep, ok := s.tbl.Seen(c, e.Request); !ok || rep != e.Reply {
				t.Fatalf("Seen(%s, %d) = %+v, %v; model remembers %+v", c, e.Request, rep, ok, e.Reply)
			}
		}
	}
}

func TestLockTableAgreesWithModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newLockSM()
		t.Repeat(map[string]func(*rapid.T){
			"acquire":   s.acquire,
			"renew":     s.renew,
			"release":   s.release,
			"retry":     s.retry,
			"advance":   s.advance,
			"expireDue": s.expireDue,
			"expire":    s.expire,
			"restart":   s.restart,
			"":          s.check,
		})
	})
}

func TestLockTablePanicsOnTokenThatDoesNotIncrease(t *testing.T) {
	tbl := NewLockTable()
	tbl.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "c", TTL: time.Second, Request: 1}, 0, 5)
	for _, token := range []uint64{5, 4} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "does not exceed the last issued token 5") {
					t.Errorf("token %d after 5: recovered %v, want a panic naming the broken invariant", token, r)
				}
			}()
			tbl.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "c", TTL: time.Second, Request: 2 + token}, 0, token)
		}()
	}
}

// TestLockTableLateCopyOutsideDedupWindowIsStale: a copy of an acquire that
// arrives after its client made a window's worth of newer requests is not
// applied again (it would grant a lock nobody waits for, as a swarm run
// once showed), nor is a copy from an earlier incarnation of the client.
func TestLockTableLateCopyOutsideDedupWindowIsStale(t *testing.T) {
	tbl := NewLockTable()
	first := tbl.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "c", TTL: time.Second, Request: 1}, 0, 1)
	for i := uint64(0); i < dedupDepth; i++ { // push request 1 out of c's window
		tbl.Renew(lockservice.RenewRequest{Resource: "a", Client: "c", Token: 1, Request: 100 + i}, 0)
	}
	if _, ok := tbl.Seen("c", 1); ok {
		t.Fatalf("request 1 still remembered after %d newer requests", dedupDepth)
	}
	tbl.Release(lockservice.ReleaseRequest{Resource: "a", Client: "c", Token: 1, Request: 200})
	again := tbl.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "c", TTL: time.Second, Request: 1}, 0, 2)
	if first.Token != 1 || again.Status != lockservice.Stale {
		t.Fatalf("first %+v, again %+v: want the late copy answered Stale", first, again)
	}
	if _, held := tbl.Lease("a"); held || tbl.LastToken() != 1 {
		t.Fatalf("the stale copy changed the table: last token %d", tbl.LastToken())
	}
	// A new incarnation's request makes the old incarnation's copies stale
	// at once, window or not.
	tbl.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "e", TTL: time.Second, Request: 1<<32 | 1}, 0, 2)
	tbl.Release(lockservice.ReleaseRequest{Resource: "b", Client: "e", Token: 2, Request: 2<<32 | 1})
	if got := tbl.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "e", TTL: time.Second, Request: 1<<32 | 2}, 0, 3); got.Status != lockservice.Stale {
		t.Fatalf("a copy from an earlier incarnation: got %+v, want Stale", got)
	}
}

// TestLockTableLateCopyBehindALateOldRequestIsStale is the standard run's
// seed 31: acquire 533 was granted and later pushed out of the window; a
// late copy of the older request 532 was applied meanwhile (not-holder) and
// sat in the window, so "older than every request in the window" no longer
// caught a late copy of 533 — which granted a lock nobody waited for.
func TestLockTableLateCopyBehindALateOldRequestIsStale(t *testing.T) {
	tbl := NewLockTable()
	tbl.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "c", TTL: time.Second, Request: 533}, 0, 1)
	tbl.Release(lockservice.ReleaseRequest{Resource: "a", Client: "c", Token: 1, Request: 534})
	tbl.Release(lockservice.ReleaseRequest{Resource: "a", Client: "c", Token: 1, Request: 532}) // a late copy: not-holder
	for i := uint64(0); i < dedupDepth-1; i++ {                                                 // push 533 (and 534) out, 532 stays
		tbl.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "c", TTL: time.Second, Request: 540 + i}, 0, 2+i)
	}
	if _, ok := tbl.Seen("c", 533); ok {
		t.Fatalf("request 533 still remembered")
	}
	if _, ok := tbl.Seen("c", 532); !ok {
		t.Fatalf("request 532 no longer remembered; the test no longer builds seed 31's window")
	}
	if got := tbl.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "c", TTL: time.Second, Request: 533}, 0, 100); got.Status != lockservice.Stale {
		t.Fatalf("a late copy of the forgotten acquire 533: got %+v, want Stale", got)
	}
	if _, held := tbl.Lease("a"); held {
		t.Fatalf("the late copy granted the lock")
	}
}
