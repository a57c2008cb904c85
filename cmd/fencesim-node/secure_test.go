package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/clientauth"
	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/lockapi/lockclient"
	"github.com/fencesim/fencesim/process"
	"github.com/fencesim/fencesim/storesvc"
)

// TestSecureDeployment runs the dev cluster as a deployment would: mutual
// TLS between the replicas, TLS on the client API, clients named by bearer
// tokens, and a fencing key shared with the store, which takes the same
// token file. The holder writes with its signed token; a second identity
// cannot read the holder's lease or release it (403), nor write to the
// store under the holder's token (403), and the store is unchanged.
func TestSecureDeployment(t *testing.T) {
	dir := t.TempDir()
	if _, err := peertls.DevFiles(dir, []process.NodeID{0}); err != nil {
		t.Fatal(err)
	}
	ca, caKey, err := peertls.LoadDevCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := peertls.Issue(dir, ca, caKey, "localhost", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const aliceTok, bobTok = "alice-0123456789abcdef", "bob-0123456789abcdef00"
	tokFile := write("clients", "alice "+aliceTok+"\nbob "+bobTok+"\n")
	keyFileMAC := write("fence.key", strings.Repeat("k", 44))

	us := startDev(t, nil, "-api-cert-file", certFile, "-api-key-file", keyFile,
		"-client-tokens-file", tokFile, "-token-key-file", keyFileMAC)
	ctx := context.Background()
	if !strings.HasPrefix(us[0], "https://") {
		t.Fatalf("API URLs %v, want https", us)
	}

	// The store, with the same token file and fencing key.
	tokens, err := clientauth.Load(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	fkey, _ := os.ReadFile(keyFileMAC)
	svc, err := storesvc.Open(storesvc.Config{DataDir: t.TempDir(), TokenKey: fkey, Authenticate: tokens.Identify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()); svc.Close() })
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go svc.Serve(sl)
	store := "http://" + sl.Addr().String() + "/v1/objects/invoice-42"

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	alice, err := lockclient.New(lockclient.Config{Endpoints: us, Name: "alice", BearerToken: aliceTok, HTTP: hc})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	lock, err := alice.Acquire(actx, "invoice-42", 10*time.Second)
	if err != nil {
		t.Fatalf("alice's acquire over TLS with her token: %v", err)
	}
	if lock.TokenMAC() == "" {
		t.Fatal("the grant carries no token MAC")
	}
	put := func(bearer string, set func(http.Header), body string) int {
		req, _ := http.NewRequest("PUT", store, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(aliceTok, lock.SetFencingHeaders, "250"); code != 200 {
		t.Fatalf("alice's fenced write: %d", code)
	}
	if code := put(bobTok, lock.SetFencingHeaders, "999"); code != 403 {
		t.Fatalf("bob's write with alice's token: %d, want 403", code)
	}
	if code := put(bobTok, func(h http.Header) { h.Set("Fencing-Token", "18446744073709551615") }, "999"); code != 403 {
		t.Fatalf("bob's forged token: %d, want 403", code)
	}

	// Bob, at every node (a follower redirects only after authenticating).
	leaderAsk := func(method, path, body, bearer string) int {
		for _, u := range us {
			req, _ := http.NewRequest(method, u+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+bearer)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTemporaryRedirect {
				return resp.StatusCode
			}
		}
		return 0
	}
	tok := lock.Token()
	if code := leaderAsk("GET", "/v1/locks/invoice-42", "", bobTok); code != 403 {
		t.Errorf("bob reading alice's lease: %d, want 403", code)
	}
	rel := `{"client":"alice","token":"` + strconv.FormatUint(tok, 10) + `"}`
	if code := leaderAsk("POST", "/v1/locks/invoice-42/release", rel, bobTok); code != 403 {
		t.Errorf("bob releasing alice's lease: %d, want 403", code)
	}
	if code := leaderAsk("GET", "/v1/locks/invoice-42", "", aliceTok); code != 200 {
		t.Errorf("alice reading her lease: %d, want 200", code)
	}
	if err := lock.Release(actx); err != nil {
		t.Fatalf("alice's release: %v", err)
	}
}
