package live

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fencesim/fencesim/live/liveclient"
)

// clientProc is one workload client's process and the harness's end of
// its protocol. A crash kills it; a restart starts a new incarnation with
// new pipes, and the replies the old one owed never come (unknown).
type clientProc struct {
	*proc

	mu      sync.Mutex
	stdin   *os.File
	pending map[uint64]chan liveclient.Reply
	nextID  uint64
}

func newClientProc(p *proc) *clientProc {
	return &clientProc{proc: p, pending: map[uint64]chan liveclient.Reply{}}
}

// launch starts an incarnation and its reply reader.
func (c *clientProc) launch() error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("live: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("live: %w", err)
	}
	err = c.proc.start(inR, outW)
	inR.Close() // the child's ends: its exit then closes the pipes
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return err
	}
	c.mu.Lock()
	if c.stdin != nil {
		c.stdin.Close()
	}
	c.stdin = inW
	c.mu.Unlock()
	go func() { // ends at EOF: when the incarnation exits
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r liveclient.Reply
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			c.mu.Lock()
			ch := c.pending[r.ID]
			delete(c.pending, r.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}()
	return nil
}

// closeStdin tells the client to finish (liveclient.Main returns at EOF).
func (c *clientProc) closeStdin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
	}
}

// call sends cmd and waits up to timeout for its reply, or until ctx ends
// (the run is interrupted). It returns the call and return instants on
// the monotonic base, and ok false when no reply came (the outcome is
// unknown).
func (c *clientProc) call(ctx context.Context, cmd liveclient.Command, timeout time.Duration) (r liveclient.Reply, call, ret time.Duration, ok bool) {
	ch := make(chan liveclient.Reply, 1)
	c.mu.Lock()
	c.nextID++
	cmd.ID = c.nextID
	c.pending[cmd.ID] = ch
	w := c.stdin
	c.mu.Unlock()
	b, _ := json.Marshal(cmd)
	b = append(b, '\n')
	call = monoNow()
	if w == nil {
		return r, call, 0, false
	}
	// A write to a paused client's pipe fits in the pipe's buffer; one to
	// an exited client fails at once.
	w.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := w.Write(b); err != nil {
		c.forget(cmd.ID)
		return r, call, 0, false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r = <-ch:
		return r, call, monoNow(), true
	case <-t.C:
	case <-ctx.Done():
	}
	c.forget(cmd.ID)
	return r, call, 0, false
}

func (c *clientProc) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}
