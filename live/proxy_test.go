package live

import (
	"io"
	"net"
	"testing"
	"time"
)

// echo serves an echo on loopback.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes b and reports whether it came back within d.
func roundTrip(t *testing.T, c net.Conn, b string, d time.Duration) (bool, error) {
	t.Helper()
	if _, err := c.Write([]byte(b)); err != nil {
		return false, err
	}
	c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false, nil
		}
		return false, err
	}
	return string(got) == b, nil
}

func TestProxyBlockAndHeal(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to string // the direction blocked
	}{
		{"requests a→b", "a", "b"},
		{"replies b→a", "b", "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &linkSet{}
			defer l.close()
			addr, err := l.add("a", "b", echo(t))
			if err != nil {
				t.Fatal(err)
			}
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if ok, err := roundTrip(t, conn, "one", 5*time.Second); !ok || err != nil {
				t.Fatalf("before the block: %v %v", ok, err)
			}
			if n := l.block(c.from, c.to, true); n != 1 {
				t.Fatalf("block touched %d links, want 1", n)
			}
			if ok, err := roundTrip(t, conn, "two", 300*time.Millisecond); ok || err != nil {
				t.Fatalf("through the block: came back %v, error %v", ok, err)
			}
			l.heal()
			// The connection that lost bytes is reset, never resumed
			// after a gap.
			if ok, err := roundTrip(t, conn, "three", 5*time.Second); ok || err == nil {
				t.Fatalf("after the heal the cut connection answered (%v, %v)", ok, err)
			}
			fresh, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			if ok, err := roundTrip(t, fresh, "four", 5*time.Second); !ok || err != nil {
				t.Fatalf("a new connection after the heal: %v %v", ok, err)
			}
		})
	}
}

// TestProxyPartitionSides: a partition cuts only the links that cross it.
func TestProxyPartitionSides(t *testing.T) {
	l := &linkSet{}
	defer l.close()
	e := echo(t)
	inside, _ := l.add("a", "b", e)
	across, _ := l.add("a", "c", e)
	if n := l.cut(func(n string) bool { return n == "a" || n == "b" }); n != 1 {
		t.Fatalf("cut %d links, want 1", n)
	}
	ci, _ := net.Dial("tcp", inside)
	defer ci.Close()
	ca, _ := net.Dial("tcp", across)
	defer ca.Close()
	if ok, err := roundTrip(t, ci, "x", 5*time.Second); !ok || err != nil {
		t.Fatalf("a→b inside the partition: %v %v", ok, err)
	}
	if ok, _ := roundTrip(t, ca, "y", 300*time.Millisecond); ok {
		t.Fatal("a→c across the partition went through")
	}
}

// TestProxyHush: an answer the server sends once its links are hushed
// never reaches the client, though its request got through before (the
// store's crash: every acknowledged write must be in the apply log read
// under the hush); lifting the hush keeps a block in force and resets the
// connection that lost bytes.
func TestProxyHush(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got, answer := make(chan struct{}, 1), make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
					if b[0] == 'w' { // a write the server decides late
						got <- struct{}{}
						<-answer
					}
					c.Write(b)
				}
			}()
		}
	}()
	l := &linkSet{}
	defer l.close()
	addr, _ := l.add("c", "store", ln.Addr().String())
	other, _ := l.add("c", "n1", echo(t))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("w")); err != nil {
		t.Fatal(err)
	}
	<-got
	l.hush("store", true)
	close(answer)
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := conn.Read(make([]byte, 1)); n > 0 {
		t.Fatal("the answer sent under the hush reached the client")
	}
	oc, _ := net.Dial("tcp", other)
	defer oc.Close()
	if ok, err := roundTrip(t, oc, "x", 5*time.Second); !ok || err != nil {
		t.Fatalf("a link not to the store under the hush: %v %v", ok, err)
	}
	l.block("c", "store", true)
	l.hush("store", false)
	if ok, err := roundTrip(t, conn, "y", 5*time.Second); ok || err == nil {
		t.Fatalf("after the hush the connection that lost its answer went on (%v, %v)", ok, err)
	}
	fresh, _ := net.Dial("tcp", addr)
	defer fresh.Close()
	if ok, _ := roundTrip(t, fresh, "z", 300*time.Millisecond); ok {
		t.Fatal("the block in force under the hush was lifted with it")
	}
	l.block("c", "store", false)
	f2, _ := net.Dial("tcp", addr)
	defer f2.Close()
	if ok, err := roundTrip(t, f2, "v", 5*time.Second); !ok || err != nil {
		t.Fatalf("after the block: %v %v", ok, err)
	}
}
