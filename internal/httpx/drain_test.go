package httpx

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestDrainEndsConnectionsThatSentNoRequest: a drain with an idle
// keep-alive connection, a connection that never sent a request and a
// request in flight finishes once the request does — far below the 2 s
// ReadHeaderTimeout that http.Server.Shutdown alone waits out for the
// connection with no request — and the request in flight is answered.
func TestDrainEndsConnectionsThatSentNoRequest(t *testing.T) {
	const slow = 150 * time.Millisecond
	started := make(chan struct{}, 1)
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			time.Sleep(slow)
		}
		io.WriteString(w, "ok")
	}), Timeouts{ReadHeader: 2 * time.Second, Read: 5 * time.Second, Write: 10 * time.Second, Idle: time.Minute}, slog.New(slog.DiscardHandler))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	base := "http://" + l.Addr().String()

	keepAlive := &http.Client{Transport: &http.Transport{}}
	resp, err := keepAlive.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close() // idle, kept alive
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close() // connected, no request sent
	inFlight := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{}}).Get(base + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = io.ErrUnexpectedEOF
			}
		}
		inFlight <- err
	}()
	<-started
	for range 100 { // the raw connection reaches the server's books
		if srv.conns.open() >= 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	if err := srv.Drain(ctx, 0); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if took := time.Since(begin); took >= time.Second {
		t.Errorf("Drain took %v: it waited for a connection that sent no request (ReadHeaderTimeout 2s)", took)
	}
	if err := <-inFlight; err != nil {
		t.Errorf("the request in flight during the drain failed: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve returned %v", err)
	}
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := raw.Read(make([]byte, 1)); err == nil {
		t.Errorf("the connection with no request is still open (read %d bytes)", n)
	}
}
