// Package freeport hands out free loopback ports for servers that bind
// them later: a child process started with the port on its command line,
// or a node stopped and restarted on the address its peers know.
//
// A port is drawn below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where no outgoing connection is given a
// local port. From the ephemeral range (what port 0 gives), the port
// released for a server was at times taken by a connect before the server
// bound it — by the cluster's own nodes dialing a stopped peer, or by
// another test package's client on the same machine — and the server
// failed with "bind: address already in use": 2 of about 130 live runs,
// and realrt's TestSnapshotLargerThanAFrame in a CI run, whose stopped
// replica could not bind its port again for 5 s. A port is still chosen
// free (listened on) and never fixed; with no room below the range, port
// 0 decides.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Low is the lowest port drawn: above the well-known and most registered
// services' ports.
const Low = 20000

// Listen listens on a free loopback port below the ephemeral range (port 0
// without room there); the caller holds it until its server binds it.
func Listen() (net.Listener, error) {
	lo := EphemeralLow()
	for range 64 {
		if lo-Low < 1000 {
			break
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", Low+rand.IntN(lo-Low)))
		if err == nil {
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("freeport: no free loopback port: %w", err)
	}
	return ln, nil
}

// Addr returns a free loopback host:port from Listen, released for a
// server to bind. Nothing holds it meanwhile, but no outgoing connection
// will be given it.
func Addr() (string, error) {
	ln, err := Listen()
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Port is Addr's port.
func Port() (int, error) {
	a, err := Addr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}

// EphemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 0 || lo > 65535 {
		return 32768
	}
	return lo
}
