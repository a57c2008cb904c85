package realrt

import (
	"net"
	"testing"
	"time"
)

// TestSelfConnectionIsRefused: a dial to a port nothing listens on, from
// that same port, connects to itself (TCP simultaneous open, as happens
// when the kernel picks the port for an ordinary dial); selfConnected
// says so, and an ordinary connection is not taken for one. A node that
// kept such a connection to a peer held the peer's port, and the peer
// could not start (TestSerialUnderLoad failed so: "bind: address already
// in use").
func TestSelfConnectionIsRefused(t *testing.T) {
	addr := freeAddr(t)
	local, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: local, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("this kernel does not make a self-connection (%v)", err)
	}
	defer c.Close()
	if !selfConnected(c) {
		t.Fatalf("a connection from %v to %v is not taken for a self-connection", c.LocalAddr(), c.RemoteAddr())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if selfConnected(o) {
		t.Fatalf("an ordinary connection %v → %v taken for a self-connection", o.LocalAddr(), o.RemoteAddr())
	}
}
