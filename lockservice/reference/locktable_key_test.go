package reference

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
)

// TestKeyedAcquireAppliesOncePerKey: an acquire retried under the same key
// (the HTTP API's request_id) but a new request number (the front end
// numbers every submission afresh) is answered from the table's memory —
// the first grant, even after it expired and another client held the
// lock — and never granted a second time. The client's renewals and
// releases do not push the key out; a restart from a snapshot keeps it;
// the holder's acquire under a new key is a second acquire (Busy), and a
// busy answer is not remembered.
func TestKeyedAcquireAppliesOncePerKey(t *testing.T) {
	tb := NewLockTable()
	acq := func(client, key string, req, token uint64) lockservice.LockReply {
		return tb.Acquire(lockservice.AcquireRequest{Resource: "r", Client: client, TTL: time.Second, Request: req, Key: key}, 0, token)
	}
	want := func(what string, got lockservice.LockReply, status lockservice.Status, token, req uint64) {
		t.Helper()
		if got.Status != status || got.Token != token || got.Request != req {
			t.Fatalf("%s: %+v, want %v token %d for request %#x", what, got, status, token, req)
		}
	}
	want("alice's acquire", acq("alice", "k1", 1<<32|1, 5), lockservice.Granted, 5, 1<<32|1)
	// The answer is lost; the lease expires; bob takes the lock and
	// releases it; alice's renewals of the lease she never heard of fail.
	tb.ExpireToken("r", 5)
	want("bob's acquire", acq("bob", "b1", 1<<32|2, 7), lockservice.Granted, 7, 1<<32|2)
	if rep, _ := tb.Release(lockservice.ReleaseRequest{Resource: "r", Client: "bob", Token: 7, Request: 1<<32 | 3}); rep.Status != lockservice.Released {
		t.Fatalf("bob's release: %+v", rep)
	}
	for i := range uint64(2 * dedupDepth) {
		tb.Renew(lockservice.RenewRequest{Resource: "r", Client: "alice", Token: 5, Request: 1<<32 | 10 + i}, 0)
	}
	// alice's retry, at another replica's front end: the first grant.
	want("alice's retry", acq("alice", "k1", 2<<32|1, 9), lockservice.Granted, 5, 2<<32|1)
	if l, held := tb.Lease("r"); held || tb.LastToken() != 7 {
		t.Fatalf("after the retry: lease %+v (held %v), last token %d; want no lease, last token 7", l, held, tb.LastToken())
	}
	// A new key is a new acquire; the holder's next key is refused.
	want("alice's second acquire", acq("alice", "k2", 2<<32|2, 11), lockservice.Granted, 11, 2<<32|2)
	want("alice's third acquire, held by her second", acq("alice", "k3", 2<<32|3, 13), lockservice.Busy, 11, 2<<32|3) // her own token
	tb = RestoreLockTable(tb.Snapshot(), 0)
	want("k2 retried after a restart", acq("alice", "k2", 3<<32|1, 15), lockservice.Granted, 11, 3<<32|1)
	want("k1 retried after a restart", acq("alice", "k1", 3<<32|2, 15), lockservice.Granted, 5, 3<<32|2)
	want("k3 retried after a restart", acq("alice", "k3", 3<<32|3, 15), lockservice.Busy, 11, 3<<32|3)
	if l, _ := tb.Lease("r"); l.Token != 11 || l.Key != "k2" || tb.LastToken() != 11 {
		t.Fatalf("lease %+v, last token %d; want k2's grant, token 11", l, tb.LastToken())
	}
	// Another client's key of the same name is not alice's.
	want("bob under alice's key", acq("bob", "k2", 3<<32|4, 15), lockservice.Busy, 0, 3<<32|4)
	// A busy answer is settled (as by lockd): a late copy of the same
	// attempt, once the lock is free, is answered busy again, never
	// granted a lock its client was told was busy; a new key is granted.
	if rep, _ := tb.Release(lockservice.ReleaseRequest{Resource: "r", Client: "alice", Token: 11, Request: 3<<32 | 5}); rep.Status != lockservice.Released {
		t.Fatalf("alice's release: %+v", rep)
	}
	want("bob's late copy once free", acq("bob", "k2", 3<<32|6, 15), lockservice.Busy, 0, 3<<32|6)
	want("bob's new attempt once free", acq("bob", "k4", 3<<32|7, 15), lockservice.Granted, 15, 3<<32|7)
}

// TestGrantedKeyOutlivesBusyPolls: a polling client's busy answers do not
// push the key of its last grant out of the table's memory. Swarm seed 67:
// c4 was granted under one key, its grant came too late to use, and it
// polled on, told busy (by its own lease) a dozen times; a late copy of the
// granted attempt then reached the leader and, its key forgotten, was
// granted a second time (S11). Busy keys are still remembered, each window
// to its own depth: the last busyKeyDepth polls.
func TestGrantedKeyOutlivesBusyPolls(t *testing.T) {
	tb := NewLockTable()
	acq := func(key string, req, token uint64) lockservice.LockReply {
		return tb.Acquire(lockservice.AcquireRequest{Resource: "r", Client: "c4", TTL: time.Second, Request: req, Key: key}, 0, token)
	}
	if rep := acq("g", 1<<32|1, 5); rep.Status != lockservice.Granted || rep.Token != 5 {
		t.Fatalf("the first acquire: %+v", rep)
	}
	polls := busyKeyDepth + dedupDepth
	for i := range polls {
		if rep := acq(fmt.Sprintf("p%d", i), 1<<32|uint64(2+i), 6); rep.Status != lockservice.Busy {
			t.Fatalf("poll %d: %+v, want busy (held by its own earlier attempt)", i, rep)
		}
	}
	tb.ExpireToken("r", 5)
	if rep := acq("g", 2<<32|1, 7); rep.Status != lockservice.Granted || rep.Token != 5 {
		t.Fatalf("a late copy of the granted attempt: %+v, want its first grant (token 5) from memory", rep)
	}
	if l, held := tb.Lease("r"); held {
		t.Fatalf("the late copy took the free lock again: %+v", l)
	}
	// Busy answers are settled as far back as seed 91814's copy: ten polls
	// on, a late copy of an attempt answered busy is answered busy again,
	// never granted the free lock.
	if rep := acq(fmt.Sprintf("p%d", polls-11), 2<<32|2, 7); rep.Status != lockservice.Busy {
		t.Fatalf("a late copy of the poll eleven back: %+v, want busy from memory", rep)
	}
	// The latest busy keys are remembered (settled busy), the oldest gone.
	last := fmt.Sprintf("p%d", polls-1)
	if rep := acq(last, 2<<32|3, 7); rep.Status != lockservice.Busy {
		t.Fatalf("a late copy of the last poll: %+v, want busy from memory", rep)
	}
	if _, ok := tb.SeenKey("c4", "r", "p0"); ok {
		t.Fatalf("the first of %d polls is still remembered: the busy window is unbounded", polls)
	}
}

// TestUnkeyedSnapshotUnchanged: a table that never saw a key snapshots
// as before keys existed (the single-node server persists it; the
// simulator's disk bytes, and so its trace hashes, are over it).
func TestUnkeyedSnapshotUnchanged(t *testing.T) {
	tb := NewLockTable()
	tb.Acquire(lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: time.Second, Request: 1}, 0, 1)
	b, err := json.Marshal(tb.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"last_token":1,"leases":[{"resource":"r","holder":"c","token":1,"ttl":1000000000,"request":1}],"dedup":{"c":[{"request":1,"reply":{"Request":1,"Status":1,"Token":1,"TTL":1000000000,"Err":"","Leader":0}}]},"highest":{"c":1}}`
	if string(b) != want {
		t.Fatalf("snapshot\n%s\nwant\n%s", b, want)
	}
}

// TestKeyIsPerResource: a request_id names an attempt on the resource in
// its URL, so the same client and key on another resource is another
// attempt (as lockd, which keeps the id with the resource's lease): it
// must be decided on that resource, never answered with the first
// resource's grant — a client told "granted" for a lock another holds.
func TestKeyIsPerResource(t *testing.T) {
	tb := NewLockTable()
	rep := tb.Acquire(lockservice.AcquireRequest{Resource: "a", Client: "me", TTL: time.Second, Request: 1, Key: "1"}, 0, 2)
	if rep.Status != lockservice.Granted || rep.Token != 2 {
		t.Fatalf("me on a: %+v", rep)
	}
	if rep := tb.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "you", TTL: time.Second, Request: 1, Key: "x"}, 0, 3); rep.Status != lockservice.Granted {
		t.Fatalf("you on b: %+v", rep)
	}
	rep = tb.Acquire(lockservice.AcquireRequest{Resource: "b", Client: "me", TTL: time.Second, Request: 2, Key: "1"}, 0, 4)
	if rep.Status != lockservice.Busy {
		t.Errorf("me on b (held by you) with the key of my acquire of a: %+v, want busy", rep)
	}
	if l, _ := tb.Lease("b"); l.Holder != "you" {
		t.Errorf("b's lease %+v, want you's", l)
	}
}
