// Package httpxtest holds test helpers for the services' HTTP fronts.
package httpxtest

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"
)

// StallBodies opens n connections to base (http://host:port) and on each
// sends the headers of a `method path` request announcing a 16-byte body,
// then never sends the body: the slow-body attack. It returns once the
// server has read every request's headers (give it a moment: it waits
// 200 ms), and closes the connections when the test ends.
func StallBodies(t testing.TB, base, method, path string, n int) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 16\r\nFencing-Token: 1\r\n\r\n", method, path, u.Host)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
}
