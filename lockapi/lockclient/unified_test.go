package lockclient

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockapi/lockapitest"
	simclient "github.com/fencesim/fencesim/lockservice/lockclient"
)

// TestLostAtTheStateMachinesDeadline: with every renewal failing, Lost
// closes when the simulator's state machine says — at the deadline it
// computed with WatchdogDeadline from the acquire's first send, on the
// lock's clock — and Deadline reports that same instant.
func TestLostAtTheStateMachinesDeadline(t *testing.T) {
	m := lockapitest.NewMem()
	m.SetHook(func(_ context.Context, op string) error {
		if op == "renew" {
			return errors.New("backend down")
		}
		return nil
	})
	_, base := lockapitest.Serve(t, m, lockapi.Config{})
	c, err := New(Config{Endpoints: []string{base}, Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const ttl = 300 * time.Millisecond
	l, err := c.Acquire(ctx, "r", ttl)
	if err != nil {
		t.Fatal(err)
	}
	var deadline, start time.Duration
	l.ex.call(func() { deadline, start = l.sm.Deadline(), l.sm.LeaseStart() })
	if want := simclient.WatchdogDeadline(l.cfg, start, 0, ttl); deadline != want {
		t.Fatalf("deadline %v, the state machine's function says %v", deadline, want)
	}
	// 300ms·(1−0.001) − 10ms from the acquire's first send.
	if want := start + ttl - 300*time.Microsecond - 10*time.Millisecond; deadline != want {
		t.Fatalf("deadline %v, want start %v + 289.7ms = %v", deadline, start, want)
	}
	if got := l.Deadline(); !got.Equal(l.origin.Add(deadline)) {
		t.Fatalf("Deadline() %v, want the state machine's %v", got, l.origin.Add(deadline))
	}
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost never closed")
	}
	at := l.env.clock.Monotonic()
	// Never before the deadline (that would be the watchdog firing on
	// its own arithmetic); how late is the machine's load, not behaviour
	// (the select above bounds it).
	if at < deadline {
		t.Fatalf("Lost closed at %v on the lock's clock, before the state machine's deadline %v", at, deadline)
	}
}

// leaseArithmetic lists what in Go source src would be lease or retry
// arithmetic of the client's own: timers and sleeps (time.AfterFunc,
// NewTimer, NewTicker, After, Sleep, Until), random draws (jitter), and
// *, / or − on anything but a unit conversion (a count times
// time.Millisecond or time.Second). The watchdog, the renewal schedule and
// the retry waits belong to the state machine.
func leaseArithmetic(t *testing.T, name, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	isUnit := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && x.Name == "time" && (s.Sel.Name == "Millisecond" || s.Sel.Name == "Second")
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			switch n.Op {
			case token.MUL:
				if !isUnit(n.X) && !isUnit(n.Y) {
					found = append(found, fset.Position(n.Pos()).String()+": *")
				}
			case token.QUO, token.SUB, token.REM:
				found = append(found, fset.Position(n.Pos()).String()+": "+n.Op.String())
			}
		case *ast.CallExpr:
			if s, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok {
					switch {
					case x.Name == "time" && strings.Contains(" AfterFunc NewTimer NewTicker After Sleep Until Tick ", " "+s.Sel.Name+" "):
						found = append(found, fset.Position(n.Pos()).String()+": time."+s.Sel.Name)
					}
				}
				if strings.HasPrefix(s.Sel.Name, "Int64N") || strings.HasPrefix(s.Sel.Name, "IntN") || s.Sel.Name == "Float64" {
					found = append(found, fset.Position(n.Pos()).String()+": "+s.Sel.Name)
				}
			}
		}
		return true
	})
	return found
}

// TestNoLeaseArithmeticOfItsOwn: the package has no watchdog, renewal or
// retry timing of its own (see leaseArithmetic); and the check catches the
// client this package used to be (its watchdog and backoff lines).
func TestNoLeaseArithmeticOfItsOwn(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, f := range leaseArithmetic(t, name, string(src)) {
			t.Errorf("%s: lease or retry arithmetic outside the state machine", f)
		}
	}
	if n < 3 {
		t.Fatalf("checked %d files: the package's sources were not found", n)
	}
	old := `package x
func (l *Lock) safe(ttl time.Duration) time.Duration {
	return ttl - time.Duration(int64(ttl)/1_000_000*l.c.cfg.DriftBoundPPM) - l.c.cfg.Margin
}
func f() { t := time.NewTimer(time.Until(granted.Add(l.ttl / 3))); backoff = min(backoff*2, max) }
func (c *Client) jitter(d time.Duration) time.Duration { return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1)) }
`
	if got := leaseArithmetic(t, "old.go", old); len(got) < 6 {
		t.Fatalf("the check found only %q in the old client's watchdog and backoff", got)
	}
}
