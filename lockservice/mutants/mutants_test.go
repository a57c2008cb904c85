package mutants

import (
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockservice"
	"github.com/fencesim/fencesim/lockservice/fencedstore"
	"github.com/fencesim/fencesim/lockservice/reference"
)

// TestMutantCatalogue: every name parses, every entry says what it
// plants, and every planted bug injects something.
func TestMutantCatalogue(t *testing.T) {
	seen := map[lockservice.Mutant]bool{}
	for _, m := range Mutants() {
		if seen[m.Name] || m.Description == "" || strings.ContainsAny(string(m.Name), " \t\n") {
			t.Errorf("bad or repeated entry %+v", m)
		}
		seen[m.Name] = true
		if got, err := ParseMutant(string(m.Name)); err != nil || got != m.Name {
			t.Errorf("ParseMutant(%q) = %q, %v", m.Name, got, err)
		}
		if inj, ok := injections[m.Name]; !ok || inj.replica == nil && inj.server == nil && inj.table == nil && inj.store == nil && inj.client == nil && inj.lockd == nil && inj.redis == nil && inj.front == nil {
			t.Errorf("%s injects nothing: mutants.go's injections must say what it replaces", m.Name)
		}
	}
	if len(injections) != len(Mutants()) {
		t.Errorf("%d injections for %d planted bugs", len(injections), len(Mutants()))
	}
	for _, name := range []lockservice.Mutant{"store-no-fence", "store-fence-volatile", "store-fence-strict-gt", "token-wallclock",
		"token-local-counter", "token-unsynced", "token-reuse-on-reacquire", "ack-before-commit", "stale-leader-grants",
		"wait-skips-lease-check", "renew-after-expiry", "release-no-owner-check", "expiry-wallclock",
		"client-no-drift-margin", "no-retry-dedup", "quorum-off-by-one"} {
		if !seen[name] {
			t.Errorf("the catalogue lacks %s (issue 6)", name)
		}
	}
	if _, err := ParseMutant("no-such-bug"); err == nil || !strings.Contains(err.Error(), "store-no-fence") {
		t.Errorf("ParseMutant of an unknown name: %v, want an error listing the known ones", err)
	}
}

// TestLateReleaseDoesNotEndANewerHold: a release the holder gave up on,
// arriving after the holder acquired the lease again (the same grant, a
// newer request), is stale: it must not end the hold the client now
// believes in. (The swarm found it with the lease-safety property L1.)
func TestLateReleaseDoesNotEndANewerHold(t *testing.T) {
	tbl := reference.NewLockTable()
	ttl := time.Second
	if r := tbl.Acquire(lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: ttl, Request: 1}, 0, 10); r.Status != lockservice.Granted {
		t.Fatalf("acquire: %+v", r)
	}
	// The release (request 2) is delayed; the client gives up on it and
	// acquires again (request 3): the same grant, restarted.
	if r := tbl.Acquire(lockservice.AcquireRequest{Resource: "r", Client: "c", TTL: ttl, Request: 3}, 0, 11); r.Status != lockservice.Granted || r.Token != 10 {
		t.Fatalf("re-acquire: %+v, want the standing grant 10", r)
	}
	if r, ended := tbl.Release(lockservice.ReleaseRequest{Resource: "r", Client: "c", Token: 10, Request: 2}); r.Status != lockservice.Stale || ended != nil {
		t.Fatalf("late release: %+v ended %v, want stale and nothing ended", r, ended)
	}
	if _, held := tbl.Lease("r"); !held {
		t.Fatal("the late release ended the newer hold")
	}
	if r, ended := tbl.Release(lockservice.ReleaseRequest{Resource: "r", Client: "c", Token: 10, Request: 4}); r.Status != lockservice.Released || ended == nil {
		t.Fatalf("release: %+v, want released", r)
	}
}

// TestMutantsChangeTheTables: each table-level planted bug does what it
// names, and only under its name.
func TestMutantsChangeTheTables(t *testing.T) {
	ttl := time.Second
	acq := func(tbl *reference.LockTable, client string, req, token uint64) lockservice.LockReply {
		return tbl.Acquire(lockservice.AcquireRequest{Resource: "r", Client: client, TTL: ttl, Request: req}, 0, token)
	}
	t.Run("token-reuse-on-reacquire", func(t *testing.T) {
		for _, m := range []lockservice.Mutant{"", MutTokenReuseOnReacquire} {
			tbl := reference.NewLockTable()
			tbl.Rules = tableRules(m)
			acq(tbl, "a", 1, 5)
			tbl.Release(lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: 5, Request: 2})
			got := acq(tbl, "b", 1, 9).Token
			if want := map[lockservice.Mutant]uint64{"": 9, MutTokenReuseOnReacquire: 5}[m]; got != want {
				t.Errorf("mutant %q: second grant has token %d, want %d", m, got, want)
			}
		}
	})
	t.Run("release-no-owner-check", func(t *testing.T) {
		for _, m := range []lockservice.Mutant{"", MutReleaseNoOwnerCheck} {
			tbl := reference.NewLockTable()
			tbl.Rules = tableRules(m)
			acq(tbl, "a", 1, 5)
			r, _ := tbl.Release(lockservice.ReleaseRequest{Resource: "r", Client: "b", Token: 3, Request: 1})
			if want := map[lockservice.Mutant]lockservice.Status{"": lockservice.NotHolder, MutReleaseNoOwnerCheck: lockservice.Released}[m]; r.Status != want {
				t.Errorf("mutant %q: b's release of a's lock: %v, want %v", m, r.Status, want)
			}
		}
	})
	t.Run("renew-after-expiry", func(t *testing.T) {
		for _, m := range []lockservice.Mutant{"", MutRenewAfterExpiry} {
			tbl := reference.NewLockTable()
			tbl.Rules = tableRules(m)
			acq(tbl, "a", 1, 5)
			tbl.ExpireToken("r", 5)
			r := tbl.Renew(lockservice.RenewRequest{Resource: "r", Client: "a", Token: 5, Request: 2}, 0)
			if want := map[lockservice.Mutant]lockservice.Status{"": lockservice.NotHolder, MutRenewAfterExpiry: lockservice.Renewed}[m]; r.Status != want {
				t.Errorf("mutant %q: renewal of an expired lease: %v, want %v", m, r.Status, want)
			}
		}
	})
	t.Run("no-retry-dedup", func(t *testing.T) {
		for _, m := range []lockservice.Mutant{"", MutNoRetryDedup} {
			tbl := reference.NewLockTable()
			tbl.Rules = tableRules(m)
			acq(tbl, "a", 1, 5)
			tbl.Release(lockservice.ReleaseRequest{Resource: "r", Client: "a", Token: 5, Request: 2})
			acq(tbl, "a", 1, 9) // a late copy of the first acquire
			_, held := tbl.Lease("r")
			if held != (m == MutNoRetryDedup) {
				t.Errorf("mutant %q: a late copy of an applied acquire left the lock held: %v", m, held)
			}
		}
	})
	t.Run("store-fence-strict-gt", func(t *testing.T) {
		for _, strict := range []bool{false, true} {
			ft := fencedstore.NewFenceTable()
			if strict {
				var cfg fencedstore.StoreConfig
				InjectStore(MutStoreFenceStrictGT, &cfg)
				ft.Fence = cfg.Fence
			}
			ft.Write(lockservice.WriteRequest{Resource: "r", Client: "a", Token: 5, Value: 1, Request: 1})
			d := ft.Write(lockservice.WriteRequest{Resource: "r", Client: "a", Token: 5, Value: 2, Request: 2})
			if d.Reply.Accepted == strict {
				t.Errorf("strict %v: the holder's second write accepted %v", strict, d.Reply.Accepted)
			}
		}
	})
}
