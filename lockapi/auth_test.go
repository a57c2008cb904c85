package lockapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencesim/fencesim/internal/clientauth"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

// tokens writes a client token file for alice and bob and loads it.
func tokens(t *testing.T) *clientauth.Tokens {
	t.Helper()
	p := filepath.Join(t.TempDir(), "clients")
	if err := os.WriteFile(p, []byte("# identity token\nalice "+aliceToken+"\n\nbob "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := clientauth.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestClientIdentity: with client tokens, a request without a known
// token gets 401; a client acts only under its own identity, so a second
// identity cannot acquire, renew or release as the first, nor read its
// lease's token (403); the holder reads it.
func TestClientIdentity(t *testing.T) {
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{Authenticate: tokens(t).Identify})
	url := base + "/v1/locks/invoice-42"
	want := func(what string, r lockapitest.Reply, status int, code string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
		}
		if code != "" {
			if e := r.Error(t); e.Error != code {
				t.Fatalf("%s: error %q, want %q", what, e.Error, code)
			}
		}
	}
	want("no token", lockapitest.Do(t, "POST", url+"/acquire", `{"client":"alice","ttl_ms":10000,"request_id":"1"}`), 401, lockapi.CodeUnauthorized)
	want("unknown token", lockapitest.DoAs(t, "guess-guess-guess-guess", "GET", url, ""), 401, lockapi.CodeUnauthorized)
	want("bob acquiring as alice", lockapitest.DoAs(t, bobToken, "POST", url+"/acquire", `{"client":"alice","ttl_ms":10000,"request_id":"1"}`), 403, lockapi.CodeForbidden)
	r := lockapitest.DoAs(t, aliceToken, "POST", url+"/acquire", `{"client":"alice","ttl_ms":10000,"request_id":"1"}`)
	want("alice acquiring", r, 200, "")
	tok := r.Lease(t).Token.String()
	want("bob reading alice's lease", lockapitest.DoAs(t, bobToken, "GET", url, ""), 403, lockapi.CodeForbidden)
	want("bob renewing as alice", lockapitest.DoAs(t, bobToken, "POST", url+"/renew", `{"client":"alice","ttl_ms":10000,"token":"`+tok+`"}`), 403, lockapi.CodeForbidden)
	want("bob releasing as alice", lockapitest.DoAs(t, bobToken, "POST", url+"/release", `{"client":"alice","token":"`+tok+`"}`), 403, lockapi.CodeForbidden)
	want("bob releasing with alice's token as himself", lockapitest.DoAs(t, bobToken, "POST", url+"/release", `{"client":"bob","token":"`+tok+`"}`), 409, lockapi.CodeNotHolder)
	r = lockapitest.DoAs(t, aliceToken, "GET", url, "")
	want("alice reading her lease", r, 200, "")
	var st lockapi.LockResponse
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil || !st.Held || st.Holder != "alice" || st.Token.String() != tok {
		t.Fatalf("alice's read: %s", r.Body)
	}
	want("alice releasing", lockapitest.DoAs(t, aliceToken, "POST", url+"/release", `{"client":"alice","token":"`+tok+`"}`), 200, "")
	want("bob reading the free lock", lockapitest.DoAs(t, bobToken, "GET", url, ""), 200, "")
}

// TestSmallerInputRules: a duplicate JSON key is refused (not "last
// wins"), a wrongly typed field is explained in the API's terms (no Go
// type name), and a request from a web page (Origin) is refused.
func TestSmallerInputRules(t *testing.T) {
	_, base := lockapitest.Serve(t, lockapitest.NewMem(), lockapi.Config{})
	acq := base + "/v1/locks/r/acquire"
	r := lockapitest.Do(t, "POST", acq, `{"client":"a","client":"b","ttl_ms":1000,"request_id":"1"}`)
	if e := r.Error(t); r.Status != 400 || e.Field != "client" || !strings.Contains(e.Message, "twice") {
		t.Errorf("duplicate key: %d %s", r.Status, r.Body)
	}
	r = lockapitest.Do(t, "POST", acq, `{"client":"a","ttl_ms":"1000","request_id":"1"}`)
	if e := r.Error(t); r.Status != 400 || e.Field != "ttl_ms" || strings.Contains(e.Message, "int64") || !strings.Contains(e.Message, "an integer") {
		t.Errorf("a string for ttl_ms: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequest("POST", acq, strings.NewReader(`{"client":"a","ttl_ms":1000,"request_id":"1"}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a web page's text/plain POST: %d, want 403", resp.StatusCode)
	}
}
