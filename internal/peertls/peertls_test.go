package peertls

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/fencesim/fencesim/process"
)

// TestWatchRotates: replacing a replica's certificate files is noticed
// (Watch) and the next handshake presents the new certificate; a file that
// does not load keeps the current one.
func TestWatchRotates(t *testing.T) {
	dir := t.TempDir()
	files, err := DevFiles(dir, []process.NodeID{0})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load(files[0])
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c := r.PeerTLS().Client(0).Certificates[0]
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.String()
	}
	before := serial()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))

	ca, key, err := LoadDevCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a later modification time
	if _, _, err := Issue(dir, ca, key, MemberName(0), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); serial() == before && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
	}
	after := serial()
	if after == before {
		t.Fatal("the rotated certificate was not picked up")
	}
	os.WriteFile(files[0].Cert, []byte("not a certificate"), 0o600)
	time.Sleep(100 * time.Millisecond)
	if serial() != after {
		t.Fatal("a broken certificate file replaced the working one")
	}
}
