// Package clientauth identifies the clients of a service's HTTP API by
// bearer tokens read from a file: "Authorization: Bearer <token>" names an
// identity, and the lock API binds a request's client (the lease owner)
// to it, so that a client can renew, release and read only leases it
// holds under its own identity.
//
// Bearer tokens rather than client certificates: they work the same from
// curl, a browser-less script and the Go client, through any TLS-ending
// proxy, and an operator adds or revokes one by editing a line and
// sending SIGHUP — no CA to run for every client. Their weakness, that a
// token is replayable by whoever sees it, is why the API should be served
// over TLS (-api-cert-file) whenever it leaves the machine.
//
// The file has one client a line, "<identity> <token>", blank lines and
// lines starting with # ignored; identities are lock client names
// ([A-Za-z0-9._-], at most 128 characters), tokens at least 16
// characters, each unique. Tokens are looked up by their SHA-256, so no
// comparison leaks how much of a guess matched.
package clientauth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/fencesim/fencesim/internal/httpx"
)

// MinTokenLen is the shortest token the file may hold.
const MinTokenLen = 16

// Tokens maps bearer tokens to identities; safe for concurrent use.
type Tokens struct {
	path string
	ids  atomic.Pointer[map[[32]byte]string]
}

// Load reads the token file at path, which only its owner may read.
func Load(path string) (*Tokens, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again; on an error the current tokens stay.
func (t *Tokens) Reload() error {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return err
	}
	m, err := parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	t.ids.Store(&m)
	return nil
}

func parse(b []byte) (map[[32]byte]string, error) {
	m := map[[32]byte]string{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"<identity> <token>\"", n)
		}
		if !httpx.ValidName(f[0], 128) {
			return nil, fmt.Errorf("line %d: identity %q must be 1..128 characters of [A-Za-z0-9._-]", n, f[0])
		}
		if len(f[1]) < MinTokenLen {
			return nil, fmt.Errorf("line %d: the token of %q is shorter than %d characters", n, f[0], MinTokenLen)
		}
		h := sha256.Sum256([]byte(f[1]))
		if _, dup := m[h]; dup {
			return nil, fmt.Errorf("line %d: a token given twice", n)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("line %d: identity %q given twice", n, f[0])
		}
		seen[f[0]] = true
		m[h] = f[0]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, errors.New("holds no client")
	}
	return m, nil
}

// Identify returns the identity of r's bearer token, ok false without a
// known one.
func (t *Tokens) Identify(r *http.Request) (identity string, ok bool) {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || tok == "" {
		return "", false
	}
	id, ok := (*t.ids.Load())[sha256.Sum256([]byte(tok))]
	return id, ok
}
