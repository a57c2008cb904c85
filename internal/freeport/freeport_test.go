package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestBelowTheEphemeralRange: Listen draws its ports below the kernel's
// ephemeral range and holds them; Addr's and Port's can then be bound.
func TestBelowTheEphemeralRange(t *testing.T) {
	lo := EphemeralLow()
	if lo-Low < 1000 {
		t.Skipf("no room below the ephemeral range (it starts at %d)", lo)
	}
	below := func(a string) {
		t.Helper()
		_, ps, _ := net.SplitHostPort(a)
		if p, _ := strconv.Atoi(ps); p < Low || p >= lo {
			t.Errorf("%s: want a port in [%d, %d)", a, Low, lo)
		}
	}
	ln, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	below(ln.Addr().String())
	if again, err := net.Listen("tcp", ln.Addr().String()); err == nil {
		again.Close()
		t.Errorf("%s was not held", ln.Addr())
	}
	ln.Close()
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	below(a)
	srv, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("Addr's %s cannot be bound: %v", a, err)
	}
	srv.Close()
	p, err := Port()
	if err != nil || p < Low || p >= lo {
		t.Errorf("Port: %d, %v", p, err)
	}
}
