// Package fencemac makes fencing tokens verifiable: the lock service signs
// each grant with a key it shares with the fenced store, and the store
// accepts a token only with a valid signature, so no client can forge a
// token far ahead of the lock service's (which would lock a key out for
// every honest writer) or borrow another holder's token.
//
// The signature is HMAC-SHA256 over the resource, the token and the holder,
// with a domain prefix and length-prefixed fields (so that no two
// different triples sign the same bytes), sent base64url without padding.
// Chubby checks a sequencer by a round trip to the lock service; a MAC
// costs the store one hash and no round trip.
package fencemac

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Header names: a write to the store carries the token (Fencing-Token),
// its holder and the lock service's MAC over both and the resource.
const (
	HeaderMAC    = "Fencing-Token-Mac"
	HeaderHolder = "Fencing-Holder"
)

// MinKeyLen is the shortest key LoadKey accepts, in bytes.
const MinKeyLen = 32

// domain separates these MACs from any other use of the same key.
const domain = "fencesim-fencing-token-v1"

// Sign returns the MAC of (resource, token, holder) under key.
func Sign(key []byte, resource string, token uint64, holder string) string {
	return base64.RawURLEncoding.EncodeToString(sum(key, resource, token, holder))
}

// Verify reports whether mac is the MAC of (resource, token, holder) under
// key, in constant time.
func Verify(key []byte, resource string, token uint64, holder, mac string) bool {
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	return hmac.Equal(got, sum(key, resource, token, holder))
}

func sum(key []byte, resource string, token uint64, holder string) []byte {
	h := hmac.New(sha256.New, key)
	b := make([]byte, 0, len(domain)+len(resource)+len(holder)+32)
	b = append(b, domain...)
	b = binary.AppendUvarint(b, uint64(len(resource)))
	b = append(b, resource...)
	b = binary.BigEndian.AppendUint64(b, token)
	b = binary.AppendUvarint(b, uint64(len(holder)))
	b = append(b, holder...)
	h.Write(b)
	return h.Sum(nil)
}

// LoadKey reads a key file: at least MinKeyLen bytes of secret (a trailing
// newline is not part of it), e.g. `head -c 32 /dev/urandom | base64 >
// fence.key`. The file must not be readable by group or others.
func LoadKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k := []byte(strings.TrimRight(string(b), "\r\n"))
	if len(k) < MinKeyLen {
		return nil, errors.New("the key file holds " + fmt.Sprint(len(k)) + " bytes; at least 32 are needed (head -c 32 /dev/urandom | base64 > FILE)")
	}
	return k, nil
}
