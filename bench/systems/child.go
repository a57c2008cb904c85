package systems

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/fencesim/fencesim/internal/freeport"
)

// child is a server process the bench started: killed (SIGKILL) and
// reaped by stop, its log kept in a file for the error message if it
// does not come up.
type child struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan error
}

func startChild(name, logPath, bin string, args ...string) (*child, error) {
	return startChildEnv(name, logPath, bin, nil, args...)
}

// startChildEnv is startChild with env added to the child's environment.
func startChildEnv(name, logPath, bin string, env []string, args ...string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait() }()
	return c, nil
}

// waitUp polls up (every 20ms, at most timeout) until it returns nil; it
// fails early if the process exits, quoting the end of its log.
func (c *child) waitUp(timeout time.Duration, up func() error) error {
	end := time.Now().Add(timeout)
	for {
		err := up()
		if err == nil {
			return nil
		}
		select {
		case werr := <-c.exited:
			c.exited <- werr
			return fmt.Errorf("%s exited (%v): %s", c.name, werr, c.tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s not up within %v (%v): %s", c.name, timeout, err, c.tail())
		}
	}
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	werr := <-c.exited
	c.exited <- werr
}

func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// freePorts reserves n distinct loopback ports below the ephemeral range
// (internal/freeport) and releases them for a child to bind; another
// program binding one in between shows as the child failing to start.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := freeport.Listen() // where no connection is given a local port
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
