// Package redistest starts a real redis-server for tests: on a free
// loopback port, AOF with appendfsync always (the durability lockd
// documents), in a temporary directory, killed when the test ends.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/freeport"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	t    testing.TB
	bin  string
	dir  string
	port int
	stop func()
	proc *os.Process
}

// Start returns a fresh redis-server. Without the binary the test is
// skipped, except in CI (CI set), where it fails: the lockd tests against
// a real Redis must not silently vanish there.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: install it (apt-get install redis-server); .ci/run does")
		}
		t.Skip("redis-server not installed (apt-get install redis-server); skipping the real-Redis tests")
	}
	var lastErr error
	for range 3 { // a free port can be taken between probe and bind
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{t: t, bin: bin, dir: t.TempDir(), port: port}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(func() { s.stop() })
			return s
		}
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

// Crash kills redis-server with SIGKILL (nothing flushed beyond what it
// already fsynced) and starts it again on the same port and directory.
func (s *Server) Crash() {
	s.t.Helper()
	s.stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redis-server did not restart: %v", err)
	}
}

// RestartEmpty kills redis-server with SIGKILL and starts it again on the
// same port with an empty directory: a Redis that lost its data (run
// without persistence, or its disk replaced).
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.stop()
	s.dir = s.t.TempDir()
	if err := s.start(); err != nil {
		s.t.Fatalf("redis-server did not restart: %v", err)
	}
}

// Pause stops redis-server with SIGSTOP; Resume continues it (SIGCONT).
func (s *Server) Pause()  { s.proc.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() { s.proc.Signal(syscall.SIGCONT) }

// freePort is a port for redis-server to bind, drawn where no connection
// is given a local port (internal/freeport): a restarted server binds it
// again.
func freePort() (int, error) { return freeport.Port() }

func (s *Server) start() error {
	dir := s.dir
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGCONT) // a paused server dies as well
		cmd.Process.Kill()
		<-exited
	}
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ping(addr) == nil {
			s.Addr, s.stop, s.proc = addr, stop, cmd.Process
			return nil
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return fmt.Errorf("exited (%v): %s", err, tail(string(log)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("no PONG from %s within 5s", addr)
		}
	}
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func tail(s string) string {
	if len(s) > 500 {
		return s[len(s)-500:]
	}
	return s
}
