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
// new pipes, and the replies the old one owed never come (unknown): its
// calls end as soon as it exits, so that the workload goes on at once, as
// the simulator's restarted client does, instead of waiting out their
// timeouts while the other clients have the resource to themselves.
type clientProc struct {
	*proc

	mu          sync.Mutex
	stdin       *os.File
	incarnation uint64 // counts launches; a call belongs to the one it was sent to
	exited      uint64 // the last incarnation that exited: no call to it is answered
	pending     map[uint64]pendingCall
	nextID      uint64
}

// pendingCall is a call awaiting its reply: closed, ch says that the
// incarnation it was sent to exited without one.
type pendingCall struct {
	ch          chan liveclient.Reply
	incarnation uint64
}

func newClientProc(p *proc) *clientProc {
	return &clientProc{proc: p, pending: map[uint64]pendingCall{}}
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
	c.incarnation++
	inc := c.incarnation
	c.mu.Unlock()
	go func() { // ends at EOF: when the incarnation exits
		defer outR.Close()
		defer c.orphan(inc)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r liveclient.Reply
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			c.mu.Lock()
			p, ok := c.pending[r.ID]
			delete(c.pending, r.ID)
			c.mu.Unlock()
			if ok {
				p.ch <- r
			}
		}
	}()
	return nil
}

// orphan ends the calls the exited incarnation inc owed a reply: no reply
// comes now.
func (c *clientProc) orphan(inc uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exited = max(c.exited, inc)
	for id, p := range c.pending {
		if p.incarnation == inc {
			close(p.ch)
			delete(c.pending, id)
		}
	}
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

// call sends cmd and waits up to timeout for its reply, until the
// incarnation it was sent to exits, or until ctx ends (the run is
// interrupted). It returns the call and return instants on the monotonic
// base, and ok false when no reply came (the outcome is unknown).
func (c *clientProc) call(ctx context.Context, cmd liveclient.Command, timeout time.Duration) (r liveclient.Reply, call, ret time.Duration, ok bool) {
	ch := make(chan liveclient.Reply, 1)
	c.mu.Lock()
	c.nextID++
	cmd.ID = c.nextID
	gone := c.exited == c.incarnation // crashed, not yet restarted
	if !gone {
		c.pending[cmd.ID] = pendingCall{ch: ch, incarnation: c.incarnation}
	}
	w := c.stdin
	c.mu.Unlock()
	b, _ := json.Marshal(cmd)
	b = append(b, '\n')
	call = monoNow()
	if w == nil || gone {
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
	case reply, ok := <-ch:
		if !ok {
			return r, call, 0, false // the incarnation exited: forgotten already
		}
		return reply, call, monoNow(), true
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
