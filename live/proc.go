package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one supervised child: started in its own process group (so a
// signal reaches whatever it forks, and a pause stops all of it), its
// output in a log file, its end waited for by one goroutine.
type proc struct {
	name string
	argv []string
	env  []string
	log  string // the log file (stdout and stderr), appended across restarts
	// stopSig ends the process at the end of the run (0: SIGTERM).
	stopSig syscall.Signal

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current incarnation exited
	exitErr error
	paused  bool
	// ending: the harness is ending the current incarnation itself (a
	// crash of the schedule, the stop at the end), so its exit is
	// expected; deaths lists the incarnations that exited otherwise.
	ending bool
	deaths []string
	// ready is closed when the current incarnation passed its ready
	// check (or the check gave up): see markReady, awaitReady.
	ready     chan struct{}
	readyDone func()
}

// errExited is the error of a ready check whose process exited first.
var errExited = errors.New("exited")

// start starts a new incarnation. stdin, if set, is the child's stdin;
// stdout, if set, receives its stdout (else the log file does). Both are
// files (pipes), so no copying goroutine outlives the child.
func (p *proc) start(stdin, stdout *os.File) error {
	if len(p.argv) == 0 {
		return fmt.Errorf("live: %s: empty command", p.name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("live: %s: %w", p.name, err)
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = f
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.Stderr = f
	// Its own process group, and killed if the harness dies first
	// (Pdeathsig): a crashed harness leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("live: starting %s (%s): %w", p.name, p.argv[0], err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.exitErr, p.paused, p.ending = cmd, done, nil, false, false
	p.ready, p.readyDone = ready, sync.OnceFunc(func() { close(ready) })
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		if !p.ending {
			status := "exited with status 0"
			if err != nil {
				status = err.Error()
			}
			p.deaths = append(p.deaths, status)
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// alive reports whether the current incarnation runs.
func (p *proc) alive() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (p *proc) pgid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the process group of the current incarnation.
func (p *proc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return fmt.Errorf("live: %s is not running", p.name)
	}
	if err := syscall.Kill(-p.pgid(), sig); err != nil {
		return fmt.Errorf("live: signalling %s: %w", p.name, err)
	}
	return nil
}

// pause stops the whole process group (a stop-the-world pause).
func (p *proc) pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	return nil
}

func (p *proc) resume() error {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	return p.signal(syscall.SIGCONT)
}

// markReady ends the wait of awaitReady for the current incarnation (its
// ready check passed, or gave up).
func (p *proc) markReady() {
	p.mu.Lock()
	f := p.readyDone
	p.mu.Unlock()
	if f != nil {
		f()
	}
}

// awaitReady waits until the current incarnation is marked ready, at most
// d or until ctx ends; false if it was not.
func (p *proc) awaitReady(ctx context.Context, d time.Duration) bool {
	p.mu.Lock()
	ch := p.ready
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// expectExit marks the current incarnation's coming exit as the
// harness's doing (not a death of its own).
func (p *proc) expectExit() {
	p.mu.Lock()
	p.ending = true
	p.mu.Unlock()
}

// unexpectedExits lists how the incarnations that ended on their own
// (neither crashed by the schedule nor stopped by the harness) ended.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.deaths...)
}

// kill is a crash: SIGKILL to the group, then waited for (bounded).
func (p *proc) kill() error {
	if !p.alive() {
		return nil
	}
	p.expectExit()
	syscall.Kill(-p.pgid(), syscall.SIGKILL)
	return p.wait(5 * time.Second)
}

func (p *proc) wait(d time.Duration) error {
	return p.waitCtx(context.Background(), d)
}

// waitCtx waits for the current incarnation to exit, at most d or until
// ctx ends.
func (p *proc) waitCtx(ctx context.Context, d time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	return fmt.Errorf("live: %s did not exit within %v", p.name, d)
}

// stop ends the process whatever its state: SIGCONT (a paused process
// cannot handle SIGTERM), SIGTERM to the group, and SIGKILL after grace,
// or at once when ctx ends (the user interrupted the run and waits).
// hung reports that SIGTERM was not enough in time.
func (p *proc) stop(ctx context.Context, grace time.Duration) (hung bool, err error) {
	if !p.alive() {
		return false, nil
	}
	p.expectExit()
	pg := p.pgid()
	sig := p.stopSig
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	syscall.Kill(-pg, syscall.SIGCONT)
	syscall.Kill(-pg, sig)
	if p.waitCtx(ctx, grace) == nil {
		reapGroup(pg)
		return false, nil
	}
	syscall.Kill(-pg, syscall.SIGKILL)
	err = p.wait(5 * time.Second)
	reapGroup(pg)
	return true, err
}

// reapGroup kills whatever is left in a process group whose leader
// exited (a child it forked).
func reapGroup(pg int) {
	if pg > 0 {
		syscall.Kill(-pg, syscall.SIGKILL)
	}
}

// exitStatus describes how the current incarnation ended.
func (p *proc) exitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr == nil {
		return "exited with status 0"
	}
	return p.exitErr.Error()
}

// tail returns the end of the log file, for error messages.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitReady polls check until it succeeds, the process exits, or ctx
// ends; the error says which, with the end of the process's log.
func (p *proc) waitReady(ctx context.Context, check func(context.Context) error) error {
	var last error
	for {
		if !p.alive() {
			return fmt.Errorf("live: %s %v before it was ready (%s); its log %s ends:\n%s", p.name, errExited, p.exitStatus(), p.log, p.tail(2000))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("live: %s was not ready in time (last check: %v); its log %s ends:\n%s", p.name, last, p.log, p.tail(2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// httpReady is the ready check of a server that answers GET url with 200.
func httpReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func logPath(dir, name string) string { return filepath.Join(dir, "logs", name+".log") }
