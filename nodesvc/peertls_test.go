package nodesvc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/lockservice/raft"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
)

// tlsCluster starts three replicas authenticated by mutual TLS with a
// throwaway CA; it returns them, their peer list and the CA's files.
func tlsCluster(t *testing.T) ([]*nodesvc.Backend, []nodesvc.Peer, string) {
	dir := t.TempDir()
	ids := []process.NodeID{0, 1, 2}
	files, err := peertls.DevFiles(dir, ids)
	if err != nil {
		t.Fatal(err)
	}
	var ls []net.Listener
	var peers []nodesvc.Peer
	for _, id := range ids {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		peers = append(peers, nodesvc.Peer{ID: id, Raft: l.Addr().String(), HTTP: "http://127.0.0.1:1"})
	}
	var bs []*nodesvc.Backend
	for i, id := range ids {
		r, err := peertls.Load(files[id])
		if err != nil {
			t.Fatal(err)
		}
		b, err := nodesvc.Open(nodesvc.Config{ID: id, DataDir: t.TempDir(), Listener: ls[i], Peers: peers, PeerTLS: r.PeerTLS()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs = append(bs, b)
	}
	return bs, peers, dir
}

func tlsLeader(t *testing.T, bs []*nodesvc.Backend) int {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for i, b := range bs {
			if b.IsLeader() {
				return i
			}
		}
	}
	t.Fatal("no leader within 10s")
	return -1
}

// TestForgedFramesRefusedAtHandshake replays the forged-frame attack (an
// append response "from a member" at term 1000, then at 2^64−1) against a
// group with mutual TLS: over plain TCP, with a certificate of another
// CA, with the group CA's certificate for a non-member, and with a
// member's certificate but a hello naming another member. Each is refused
// at the handshake (or before the first frame): the leader's term never
// moves, and the group goes on granting.
func TestForgedFramesRefusedAtHandshake(t *testing.T) {
	bs, peers, dir := tlsCluster(t)
	lead := tlsLeader(t, bs)
	term := bs[lead].Term()
	addr := peers[lead].Raft
	from := process.NodeID((lead + 1) % 3)
	frames := func(c net.Conn, helloFrom process.NodeID) {
		p := &peerConn{c: c, as: helloFrom, to: process.NodeID(lead)}
		hello := append([]byte("FSRT\x01"), be64(uint64(helloFrom))...)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write(append(hello, be64(uint64(lead))...))
		p.send(raft.Message{Type: raft.MsgAppResp, From: raft.ID(from) + 1, To: raft.ID(lead) + 1, Term: 1000, Index: 1})
		p.send(raft.Message{Type: raft.MsgAppResp, From: raft.ID(from) + 1, To: raft.ID(lead) + 1, Term: math.MaxUint64, Index: 1})
		// The node closes a connection it refused: the read ends.
		io.Copy(io.Discard, c)
		c.Close()
	}

	// Plain TCP.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	frames(c, from)

	// Another CA's certificate for a member name.
	other, err := peertls.DevFiles(t.TempDir(), []process.NodeID{from})
	if err != nil {
		t.Fatal(err)
	}
	dialTLS := func(f peertls.Files) (net.Conn, error) {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
		pool.AppendCertsFromPEM(ca)
		return tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: peertls.MemberName(process.NodeID(lead))})
	}
	if c, err := dialTLS(other[from]); err == nil {
		frames(c, from) // TLS 1.3: the server's refusal of the client certificate comes after the client's handshake ends
	}

	// The group's CA, a non-member's name.
	caCert, caKey, err := peertls.LoadDevCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := peertls.Issue(t.TempDir(), caCert, caKey, peertls.MemberName(7), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := dialTLS(peertls.Files{Cert: cf, Key: kf}); err == nil {
		frames(c, from)
	}

	// A member's certificate, a hello naming another member.
	liar := process.NodeID((lead + 2) % 3)
	cf, kf, err = peertls.Issue(t.TempDir(), caCert, caKey, peertls.MemberName(liar), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := dialTLS(peertls.Files{Cert: cf, Key: kf}); err == nil {
		frames(c, from)
	}

	time.Sleep(100 * time.Millisecond)
	if got := bs[lead].Term(); got != term || !bs[lead].IsLeader() {
		t.Fatalf("after the refused frames: leader %v at term %d, was leader at %d", bs[lead].IsLeader(), got, term)
	}
	if n := bs[lead].Node().Stats().BadPeers; n < 4 {
		t.Errorf("%d connections refused as bad peers, want 4", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := bs[lead].Acquire(ctx, "r", "c", time.Second, 0, "1"); err != nil {
		t.Fatalf("the group does not grant over TLS: %v", err)
	}
}

func be64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}
