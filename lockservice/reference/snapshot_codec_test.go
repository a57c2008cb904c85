package reference

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencesim/fencesim/lockservice"
)

// TestStateEncodingKeepsNoStalePart: the snapshot codec keeps each
// client's encoded part until the client changes (appendState). After any
// sequence of table operations — keyed and unkeyed acquires, renewals,
// releases, expiries, retries, a restore from the codec — the encoding
// with the kept parts equals the one encoded afresh, and decodes to a
// table that encodes the same.
func TestStateEncodingKeepsNoStalePart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := NewLockTable()
		started := map[string]uint64{}
		clients := []string{"a", "b", "c", "d"}
		resources := []string{"r0", "r1"}
		var token, req uint64
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			c := rapid.SampledFrom(clients).Draw(t, "client")
			res := rapid.SampledFrom(resources).Draw(t, "resource")
			req++
			if rapid.IntRange(0, 4).Draw(t, "retry") == 0 && req > 1 {
				req-- // a retry of the last request number
			}
			id := 1<<32 | req
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				token++
				key := ""
				if rapid.Bool().Draw(t, "keyed") {
					key = rapid.SampledFrom([]string{"k1", "k2", "k3"}).Draw(t, "key")
				}
				tb.Acquire(lockservice.AcquireRequest{Resource: res, Client: c, TTL: time.Second, Request: id, Key: key}, 0, token)
				started[res] = token
			case 2:
				if l, ok := tb.Lease(res); ok {
					tb.Renew(lockservice.RenewRequest{Resource: res, Client: l.Holder, Token: l.Token, TTL: time.Second, Request: id}, 0)
				}
			case 3:
				l, _ := tb.Lease(res)
				tb.Release(lockservice.ReleaseRequest{Resource: res, Client: c, Token: l.Token, Request: id})
			case 4:
				if l, ok := tb.Lease(res); ok {
					tb.ExpireToken(res, l.Token)
				}
			case 5:
				b := appendState(nil, tb, started)
				var err error
				if tb, started, err = decodeState(b); err != nil {
					t.Fatalf("decode: %v", err)
				}
				if again := appendState(nil, tb, started); !bytes.Equal(again, b) {
					t.Fatalf("the decoded table encodes differently:\n%x\n%x", b, again)
				}
			}
			kept := appendState(nil, tb, started)
			for _, m := range tb.clients { //detlint:sorted (clears every part)
				m.encoded = false
			}
			if fresh := appendState(nil, tb, started); !bytes.Equal(kept, fresh) {
				t.Fatalf("the encoding with the kept parts differs from the fresh one:\n%x\n%x", kept, fresh)
			}
		}
	})
}
