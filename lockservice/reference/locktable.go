package reference

import (
	"fmt"
	"slices"
	"time"

	"github.com/fencesim/fencesim/lockservice"
)

// Lease is one grant: who holds a resource, with which fencing token, until
// when by the server's monotonic clock.
type Lease struct {
	Resource string        `json:"resource"`
	Holder   string        `json:"holder"`
	Token    uint64        `json:"token"`
	TTL      time.Duration `json:"ttl"`
	Deadline time.Duration `json:"-"` // server monotonic; not persisted: a restart restarts the lease
	// Request is the holder's request that granted the lease or last
	// granted it again (a holder's fresh acquire): a release the holder
	// sent before it ended an earlier hold, not this one.
	Request uint64 `json:"request,omitempty"`
	// Key is the Key of the acquire that granted the lease, if it had one
	// (the HTTP API's request_id): the holder's acquire under another Key
	// is a second acquire, refused as Busy, not the first one retried.
	Key string `json:"key,omitempty"`
}

// dedupDepth is how many recent replies the table keeps per client. A
// client retries only its latest requests, so a short window is enough and
// the table stays bounded.
const dedupDepth = 8

// busyKeyDepth is how many keyed acquires answered busy the table keeps
// per client (rememberAcquire). A polling client is told busy every few
// tens of milliseconds while another holds its resource, and a late copy
// of any of those attempts, once the lock is free, must be answered busy
// again: 32 cover one to three seconds of polling, the longest the
// swarm's delays and pauses hold a copy back (swarm seed 91814 and guided
// run 98699 of 0.17's sweeps: a copy 0.6 s late, ten polls on, granted).
const busyKeyDepth = 32

type dedupEntry struct {
	Request uint64                `json:"request"`
	Reply   lockservice.LockReply `json:"reply"`
}

// keyEntry is the answer to a keyed acquire (lockservice.AcquireRequest.Key): a grant, or a settled busy.
// Keyed acquires have their own window: the front end that sends them
// numbers every submission afresh, so the request-number window cannot
// recognise a retry, and the client's renewals and releases must not push
// an unanswered acquire out of memory. A key names an attempt on one
// resource (the HTTP API's request_id goes with the resource in the URL,
// as lockd keeps it with the resource's lease): the same key on another
// resource is another attempt.
type keyEntry struct {
	Key      string                `json:"key"`
	Resource string                `json:"resource"`
	Reply    lockservice.LockReply `json:"reply"`
}

// LockTable is the lock state machine shared by the single-node server and
// (later) the replicated one: pure, no I/O and no clock. The caller passes
// the server's monotonic time and, for grants, the fencing token to issue —
// the single node's synced counter, or the log index under Raft. Requests
// must have passed Limits; the table re-checks and panics on a token that
// does not increase, since that is a broken invariant, not bad input.
type LockTable struct {
	leases    map[string]*Lease
	lastToken uint64
	clients   map[string]*clientMemory // what the table remembers of each client
	// order is clients' names sorted, for the snapshot codec; clients
	// are never forgotten, so it is stale exactly when it is shorter.
	order []string

	// Rules are the decisions a variant of the service replaces; the
	// server that owns the table sets them (configuration, not state).
	Rules TableRules
}

// NewLockTable returns an empty table that has issued no token.
func NewLockTable() *LockTable {
	return &LockTable{leases: map[string]*Lease{}, clients: map[string]*clientMemory{}}
}

// clientMemory is what the table keeps of one client, in one map entry so
// that answering a request looks the client up once.
type clientMemory struct {
	dedup     []dedupEntry // the last dedupDepth replies, oldest first
	highest   uint64       // the highest request id applied
	forgotten uint64       // the highest request id pushed out of dedup
	// keys are the keyed acquires' answers, oldest first: the last
	// dedupDepth granted and the last busyKeyDepth busy (rememberAcquire).
	keys []keyEntry
	// enc is this client's part of the snapshot codec's encoding while
	// encoded is set (appendState); every change clears encoded. A replica
	// of the simulation snapshots every few entries, which touch a few
	// clients: the others' parts are copied, not encoded again.
	enc     []byte
	encoded bool
}

// client returns the memory of client, making it if asked to.
func (t *LockTable) client(client string, make bool) *clientMemory {
	m := t.clients[client]
	if m == nil && make {
		m = &clientMemory{dedup: newDedup()}
		t.clients[client] = m
	}
	return m
}

func newDedup() []dedupEntry { return make([]dedupEntry, 0, dedupDepth+1) }

// LastToken is the highest token the table has issued.
func (t *LockTable) LastToken() uint64 { return t.lastToken }

// Lease returns the current lease on resource, if any (it may be past its
// deadline until ExpireDue or Expire removes it).
func (t *LockTable) Lease(resource string) (Lease, bool) {
	l, ok := t.leases[resource]
	if !ok {
		return Lease{}, false
	}
	return *l, true
}

// Leases returns every current lease, sorted by resource.
func (t *LockTable) Leases() []Lease {
	// The resources are sorted by the standard library, not by a
	// comparator of this package: a comparator's calls depend on the
	// order the map gave, and the search's branch coverage (package
	// coverage/branches) must be a function of the run.
	resources := make([]string, 0, len(t.leases))
	for r := range t.leases { //detlint:sorted (sorted below)
		resources = append(resources, r)
	}
	slices.Sort(resources)
	out := make([]Lease, 0, len(resources))
	for _, r := range resources {
		out = append(out, *t.leases[r])
	}
	return out
}

// Seen returns the reply already given to client's request, if the table
// still remembers it. A retried or duplicated request gets this reply
// instead of being applied again.
func (t *LockTable) Seen(client string, request uint64) (lockservice.LockReply, bool) {
	if m := t.clients[client]; m != nil {
		for i := range m.dedup {
			if m.dedup[i].Request == request {
				return m.dedup[i].Reply, true
			}
		}
	}
	return lockservice.LockReply{}, false
}

// SeenKey returns the reply already given to client's acquire of
// resource with key (lockservice.AcquireRequest.Key), if the table still
// remembers it.
func (t *LockTable) SeenKey(client, resource, key string) (lockservice.LockReply, bool) {
	if m := t.clients[client]; m != nil && key != "" {
		for i := range m.keys {
			if m.keys[i].Key == key && m.keys[i].Resource == resource {
				return m.keys[i].Reply, true
			}
		}
	}
	return lockservice.LockReply{}, false
}

// SeenAcquire returns the reply already given to r: by its request number,
// or by its key when it has one. The reply carries r's request number.
func (t *LockTable) SeenAcquire(r lockservice.AcquireRequest) (lockservice.LockReply, bool) {
	if rep, ok := t.Seen(r.Client, r.Request); ok {
		return rep, true
	}
	if rep, ok := t.SeenKey(r.Client, r.Resource, r.Key); ok {
		rep.Request = r.Request // the number the asker waits on
		return rep, true
	}
	return lockservice.LockReply{}, false
}

// stale reports whether request is a late copy of one its client
// abandoned long ago: from an earlier incarnation of the client (request
// ids carry the incarnation in their high 32 bits), at or below a request
// already pushed out of the client's dedup window, or older than every
// request in the full window. Such a copy, delayed in the network or in a
// deposed leader's log, must not be applied: the window that would have
// answered it from memory has moved on, and applying it would grant a lock
// nobody waits for. The pushed-out watermark matters because the window is
// kept in apply order, not request order: a late copy of an old request
// that was applied (as not-holder, say) sits in the window and would make
// a copy of a newer, already forgotten acquire look recent (swarm seed 31
// of the standard run). A request merely reordered with a concurrent one
// of the same client stays above both and is applied. Seen must have been
// asked first.
func (t *LockTable) stale(client string, request uint64) bool {
	m := t.clients[client]
	if m == nil {
		return false
	}
	if request>>32 < m.highest>>32 || request <= m.forgotten {
		return true
	}
	d := m.dedup
	if len(d) < dedupDepth {
		return false
	}
	oldest := d[0].Request
	for _, e := range d[1:] {
		oldest = min(oldest, e.Request)
	}
	return request < oldest
}

func (t *LockTable) staleReply(request uint64) lockservice.LockReply {
	return lockservice.LockReply{Request: request, Status: lockservice.Stale}
}

func (t *LockTable) remember(client string, request uint64, r lockservice.LockReply) lockservice.LockReply {
	m := t.client(client, true)
	m.encoded = false // rememberAcquire's keys change it after this too
	m.highest = max(m.highest, request)
	d := append(m.dedup, dedupEntry{Request: request, Reply: r})
	if len(d) > dedupDepth {
		for _, e := range d[:len(d)-dedupDepth] {
			m.forgotten = max(m.forgotten, e.Request)
		}
		d = slices.Delete(d, 0, len(d)-dedupDepth)
	}
	m.dedup = d
	return r
}

// rememberAcquire is remember, and for a keyed acquire also its key,
// granted or busy. A keyed Busy is settled, as lockd settles a held
// answer: the front end submits a late copy of the attempt (delayed or
// duplicated on its way, or taken by a node paused meanwhile) under a
// new request number, which the number's window cannot recognise, and
// granting that copy once the lock is free would grant a lock nobody
// waits for, to an attempt its client was told was busy. A client asks
// again under a new request id after busy (the shipped client does).
//
// Granted and busy keys are kept in windows of their own (dedupDepth
// and busyKeyDepth): a polling client is told busy many times a second,
// and in one window of 8 its busy answers pushed the key of its last
// grant out within a few polls, so a late copy of that attempt was
// granted a second time — a lease its client never asked for again
// (swarm seed 67, caught by S11 once grants named their keys). A client
// is granted at most once per hold, so a late copy of a grant would now
// have to outlive dedupDepth of its client's holds, and one of a busy
// answer busyKeyDepth of its polls. The windows count, they do not time:
// a copy held back longer still is applied (lockd, which keeps request
// ids for a minute, bounds them by time; the table has no clock).
func (t *LockTable) rememberAcquire(r lockservice.AcquireRequest, rep lockservice.LockReply) lockservice.LockReply {
	t.remember(r.Client, r.Request, rep)
	if r.Key != "" && (rep.Status == lockservice.Granted || rep.Status == lockservice.Busy) {
		m := t.client(r.Client, false)
		m.keys = append(m.keys, keyEntry{Key: r.Key, Resource: r.Resource, Reply: rep})
		m.keys = dropOldestPastDepth(m.keys, rep.Status)
	}
	return rep
}

// dropOldestPastDepth drops the oldest key answered status once keys hold
// more than its window's depth of them; keys answered otherwise stay.
func dropOldestPastDepth(keys []keyEntry, status lockservice.Status) []keyEntry {
	depth := dedupDepth
	if status == lockservice.Busy {
		depth = busyKeyDepth
	}
	n, first := 0, -1
	for i := range keys {
		if keys[i].Reply.Status == status {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n <= depth {
		return keys
	}
	return slices.Delete(keys, first, first+1)
}

// ExpireDue removes the lease on resource if its deadline has passed at
// now, and returns it.
func (t *LockTable) ExpireDue(resource string, now time.Duration) (Lease, bool) {
	l, ok := t.leases[resource]
	if !ok || now < l.Deadline {
		return Lease{}, false
	}
	delete(t.leases, resource)
	t.lapsed(*l)
	return *l, true
}

func (t *LockTable) lapsed(l Lease) {
	if t.Rules.Lapsed != nil {
		t.Rules.Lapsed(l)
	}
}

// replays reports whether a remembered request of kind is answered from
// memory (TableRules.Replays).
func (t *LockTable) replays(kind CommandKind) bool {
	return t.Rules.Replays == nil || t.Rules.Replays(kind)
}

// Acquire grants resource to the request's client with token if the
// resource is free, else answers Busy. Expired leases must have been removed
// with ExpireDue first: the table never decides on its own that time passed.
// token must exceed every token issued before.
func (t *LockTable) Acquire(r lockservice.AcquireRequest, now time.Duration, token uint64) lockservice.LockReply {
	if t.replays(CmdAcquire) {
		if rep, ok := t.SeenAcquire(r); ok {
			return rep
		}
	}
	return t.acquireUnseen(r, now, token)
}

// acquireUnseen is Acquire of a request SeenAcquire does not remember (or
// that the table's rules do not replay): the replica asks SeenAcquire
// itself first, and each look scans the client's windows.
func (t *LockTable) acquireUnseen(r lockservice.AcquireRequest, now time.Duration, token uint64) lockservice.LockReply {
	if t.replays(CmdAcquire) && t.stale(r.Client, r.Request) {
		return t.staleReply(r.Request)
	}
	if l, held := t.leases[r.Resource]; held {
		if l.Holder == r.Client && r.Key != "" && l.Key != "" && r.Key != l.Key {
			// The holder's acquire under another key than the one that
			// granted the lease, and not remembered: a second acquire
			// (the HTTP API's contract, as lockd's), decided here in the
			// log like any other, on every replica alike. The answer names
			// the asker's own token (LockReply.Token).
			return t.rememberAcquire(r, lockservice.LockReply{Request: r.Request, Status: lockservice.Busy, Token: l.Token})
		}
		if l.Holder == r.Client {
			// A fresh attempt by the holder (its earlier reply was lost):
			// the grant stands, restarted like a renewal, because the
			// client will measure its lease from this request's start.
			l.TTL, l.Deadline = r.TTL, now+r.TTL
			l.Request = max(l.Request, r.Request)
			return t.rememberAcquire(r, lockservice.LockReply{Request: r.Request, Status: lockservice.Granted, Token: l.Token, TTL: l.TTL})
		}
		return t.rememberAcquire(r, lockservice.LockReply{Request: r.Request, Status: lockservice.Busy})
	}
	if t.Rules.Issue != nil {
		token = t.Rules.Issue(r.Resource, token)
	}
	if token <= t.lastToken {
		msg := fmt.Sprintf("lockservice: token %d does not exceed the last issued token %d", token, t.lastToken)
		if t.Rules.Broken == nil {
			panic(msg)
		}
		t.Rules.Broken(msg)
	}
	t.lastToken = max(t.lastToken, token)
	t.leases[r.Resource] = &Lease{Resource: r.Resource, Holder: r.Client, Token: token, TTL: r.TTL, Deadline: now + r.TTL, Request: r.Request, Key: r.Key}
	return t.rememberAcquire(r, lockservice.LockReply{Request: r.Request, Status: lockservice.Granted, Token: token, TTL: r.TTL})
}

// Renew restarts the lease of token at its full TTL from now — r.TTL if
// given, which becomes the lease's TTL, else the one it has — if token is
// the current, unexpired grant and client its holder.
func (t *LockTable) Renew(r lockservice.RenewRequest, now time.Duration) lockservice.LockReply {
	if rep, ok := t.Seen(r.Client, r.Request); ok {
		return rep
	}
	if t.stale(r.Client, r.Request) {
		return t.staleReply(r.Request)
	}
	l, ok := t.leases[r.Resource]
	if !ok && t.Rules.Revive != nil {
		if e, revived := t.Rules.Revive(r); revived {
			l, ok = &e, true
			l.Deadline = now
			t.leases[r.Resource] = l
		}
	}
	if !ok || l.Token != r.Token || l.Holder != r.Client || now >= l.Deadline && !t.Rules.RenewLate {
		return t.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.NotHolder})
	}
	if r.TTL > 0 {
		l.TTL = r.TTL
	}
	l.Deadline = now + l.TTL
	return t.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Renewed, Token: l.Token, TTL: l.TTL})
}

// Release frees resource if token is the current grant and client its
// holder. It returns the lease it ended, if any.
func (t *LockTable) Release(r lockservice.ReleaseRequest) (lockservice.LockReply, *Lease) {
	if rep, ok := t.Seen(r.Client, r.Request); ok {
		return rep, nil
	}
	if t.stale(r.Client, r.Request) {
		return t.staleReply(r.Request), nil
	}
	l, ok := t.leases[r.Resource]
	if !ok {
		return t.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.NotHolder}), nil
	}
	switch t.releaseCheck(*l, r) {
	case lockservice.Released:
	case lockservice.Stale:
		return t.staleReply(r.Request), nil
	default:
		return t.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.NotHolder}), nil
	}
	delete(t.leases, r.Resource)
	return t.remember(r.Client, r.Request, lockservice.LockReply{Request: r.Request, Status: lockservice.Released, Token: l.Token}), l
}

// releaseCheck is the table's release rule (TableRules.ReleaseCheck).
func (t *LockTable) releaseCheck(l Lease, r lockservice.ReleaseRequest) lockservice.Status {
	if t.Rules.ReleaseCheck != nil {
		return t.Rules.ReleaseCheck(l, r)
	}
	return releaseCheck(l, r)
}

// Releases reports whether Release(r) would end the current lease if it
// were applied now, without applying it: the leader asks, before it
// proposes a release, whether the entry should carry a hand-over.
func (t *LockTable) Releases(r lockservice.ReleaseRequest) bool {
	if _, ok := t.Seen(r.Client, r.Request); ok || t.stale(r.Client, r.Request) {
		return false
	}
	l, ok := t.leases[r.Resource]
	return ok && t.releaseCheck(*l, r) == lockservice.Released
}

// Expire removes the lease with token on resource if it is still current
// and due at now. A stale Expire (the lease was renewed, released or
// re-granted since) does nothing.
func (t *LockTable) Expire(resource string, token uint64, now time.Duration) (Lease, bool) {
	l, ok := t.leases[resource]
	if !ok || l.Token != token {
		return Lease{}, false
	}
	return t.ExpireDue(resource, now)
}

// ExpireToken removes the grant with token on resource, whatever the time:
// under Raft the leader's clock decided, and applying a committed Expire
// must not depend on the applying replica's clock. A stale token (the lease
// was released or re-granted since) does nothing.
func (t *LockTable) ExpireToken(resource string, token uint64) (Lease, bool) {
	l, ok := t.leases[resource]
	if !ok || l.Token != token {
		return Lease{}, false
	}
	delete(t.leases, resource)
	t.lapsed(*l)
	return *l, true
}

// Snapshot is the table's durable form.
type Snapshot struct {
	LastToken uint64                  `json:"last_token"`
	Leases    []Lease                 `json:"leases"`
	Dedup     map[string][]dedupEntry `json:"dedup"`
	Highest   map[string]uint64       `json:"highest"`
	Forgotten map[string]uint64       `json:"forgotten,omitempty"`
	Keys      map[string][]keyEntry   `json:"keys,omitempty"`
}

// Snapshot captures the table for the disk (encoding/json sorts map keys).
func (t *LockTable) Snapshot() Snapshot {
	s := Snapshot{LastToken: t.lastToken, Leases: t.Leases(), Dedup: map[string][]dedupEntry{},
		Highest: map[string]uint64{}, Forgotten: map[string]uint64{}}
	for c, m := range t.clients { //detlint:sorted (into maps)
		s.Dedup[c] = slices.Clone(m.dedup) // a snapshot never shares state with the table
		s.Highest[c] = m.highest
		if m.forgotten > 0 {
			s.Forgotten[c] = m.forgotten
		}
		if len(m.keys) > 0 {
			if s.Keys == nil {
				s.Keys = map[string][]keyEntry{}
			}
			s.Keys[c] = slices.Clone(m.keys)
		}
	}
	return s
}

// RestoreLockTable rebuilds a table from a snapshot. Every lease restarts
// at its full TTL from now: a restarted server may extend a lease, never
// shorten it, since it cannot know how much of it ran while it was down.
func RestoreLockTable(s Snapshot, now time.Duration) *LockTable {
	t := NewLockTable()
	t.lastToken = s.LastToken
	for _, l := range s.Leases {
		l.Deadline = now + l.TTL
		t.leases[l.Resource] = &l
	}
	for c, d := range s.Dedup { //detlint:sorted (into a map)
		t.client(c, true).dedup = append(newDedup(), d...)
	}
	for c, h := range s.Highest { //detlint:sorted (into a map)
		t.client(c, true).highest = h
	}
	for c, f := range s.Forgotten { //detlint:sorted (into a map)
		t.client(c, true).forgotten = f
	}
	for c, k := range s.Keys { //detlint:sorted (into a map)
		t.client(c, true).keys = slices.Clone(k)
	}
	return t
}
