package fencemac

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSignVerify(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	mac := Sign(key, "invoice-42", 7, "alice")
	if !Verify(key, "invoice-42", 7, "alice", mac) {
		t.Fatal("a MAC the service made does not verify")
	}
	for _, c := range []struct {
		name             string
		key              []byte
		resource, holder string
		token            uint64
		mac              string
	}{
		{"another resource", key, "invoice-43", "alice", 7, mac},
		{"another token", key, "invoice-42", "alice", 18446744073709551615, mac},
		{"another holder", key, "invoice-42", "mallory", 7, mac},
		{"another key", []byte(strings.Repeat("x", 32)), "invoice-42", "alice", 7, mac},
		{"shifted field boundary", key, "invoice-4", "2alice", 7, mac},
		{"garbage", key, "invoice-42", "alice", 7, "not base64!"},
		{"empty", key, "invoice-42", "alice", 7, ""},
		{"truncated", key, "invoice-42", "alice", 7, mac[:20]},
	} {
		if Verify(c.key, c.resource, c.token, c.holder, c.mac) {
			t.Errorf("%s: verified", c.name)
		}
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(strings.Repeat("a", 44)+"\n"), 0o600)
	if k, err := LoadKey(good); err != nil || len(k) != 44 {
		t.Fatalf("LoadKey: %d bytes, %v", len(k), err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := LoadKey(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short key: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte(strings.Repeat("a", 44)), 0o644)
	if _, err := LoadKey(open); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: %v", err)
	}
	if _, err := LoadKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}
