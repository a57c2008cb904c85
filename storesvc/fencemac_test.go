package storesvc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/internal/fencemac"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

// TestVerifiedTokens: with a fencing key shared by the lock service and
// the store, a token the lock service granted writes, and a forged one —
// far ahead (2^64−1, which would lock the key out for good), another
// holder's, another resource's, or one without a MAC — gets 403 and
// changes nothing.
func TestVerifiedTokens(t *testing.T) {
	key := []byte(strings.Repeat("s3cret-", 6))
	_, lockd := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{TokenKey: key})
	s := start(t, t.TempDir(), Config{TokenKey: key})

	r := lockapitest.Do(t, "POST", lockd+"/v1/locks/ledger-1/acquire", `{"client":"alice","ttl_ms":10000,"request_id":"1"}`)
	var lease lockapi.LeaseResponse
	if err := json.Unmarshal([]byte(r.Body), &lease); err != nil || r.Status != 200 || lease.TokenMAC == "" {
		t.Fatalf("acquire: %d %s (%v)", r.Status, r.Body, err)
	}
	tok := strconv.FormatUint(uint64(lease.Token), 10)
	hdr := func(token, holder, mac string) map[string]string {
		h := map[string]string{HeaderToken: token}
		if holder != "" {
			h[fencemac.HeaderHolder] = holder
		}
		if mac != "" {
			h[fencemac.HeaderMAC] = mac
		}
		return h
	}
	url := s.url + "/v1/objects/ledger-1"
	do(t, "PUT", url, hdr(tok, "alice", lease.TokenMAC), "250").expect(t, 200, map[string]string{"token": tok, "t_max": tok})
	for _, c := range []struct {
		name string
		h    map[string]string
		url  string
	}{
		{"no MAC", hdr("18446744073709551615", "", ""), url},
		{"far ahead with the holder's MAC", hdr("18446744073709551615", "alice", lease.TokenMAC), url},
		{"another holder", hdr(tok, "mallory", lease.TokenMAC), url},
		{"another resource", hdr(tok, "alice", lease.TokenMAC), s.url + "/v1/objects/ledger-2"},
		{"a made-up MAC", hdr("99", "mallory", fencemac.Sign([]byte(strings.Repeat("guess", 8)), "ledger-1", 99, "mallory")), url},
	} {
		do(t, "PUT", c.url, c.h, "999").expect(t, 403, map[string]string{"error": CodeForged})
	}
	get(t, s.url, "ledger-1").expect(t, 200, map[string]string{"value": "250", "token": tok, "t_max": tok})
	get(t, s.url, "ledger-2").expect(t, 404, nil)
	// A renewal is signed too.
	r = lockapitest.Do(t, "POST", lockd+"/v1/locks/ledger-1/renew", `{"client":"alice","ttl_ms":10000,"token":"`+tok+`"}`)
	var renewed lockapi.LeaseResponse
	json.Unmarshal([]byte(r.Body), &renewed)
	if !fencemac.Verify(key, "ledger-1", uint64(lease.Token), "alice", renewed.TokenMAC) {
		t.Fatalf("renewal's token_mac does not verify: %s", r.Body)
	}
}
