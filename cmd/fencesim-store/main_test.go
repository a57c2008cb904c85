package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencesim/fencesim/internal/svcmain"
)

// childEnv makes the test binary run the command instead of the tests, so
// that a test can run the store as a process of its own and SIGKILL it.
const childEnv = "FENCESIM_TEST_CHILD_STORE" // outside FENCESIM_STORE_*, whose unknown names the store refuses

func TestMain(m *testing.M) {
	if svcmain.AsChild(childEnv, main) {
		return
	}
	os.Exit(m.Run())
}

// TestConfigErrors: a bad value exits 2 with a message naming the flag or
// variable, the value and what is allowed, and creates nothing.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir() + "/data"
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "FENCESIM_STORE_DATA (or -data) is required"},
		{[]string{"-data", dir, "-listen", "nohost"}, nil, `-listen="nohost": must be host:port`},
		{[]string{"-data", dir}, map[string]string{"FENCESIM_STORE_LISTEN": "127.0.0.1:99999"}, `FENCESIM_STORE_LISTEN="127.0.0.1:99999": the port must be a number in 0..65535`},
		{nil, map[string]string{"FENCESIM_STORE_DATA": dir, "FENCESIM_STORE_MAX_KEYS": "0"}, `FENCESIM_STORE_MAX_KEYS="0": must be an integer in 1..1000000`},
		{[]string{"-data", dir, "-max-in-flight", "many"}, nil, `-max-in-flight="many": must be an integer in 1..65536`},
		{[]string{"-data", dir}, map[string]string{"FENCESIM_STORE_REQUEST_TIMEOUT": "2"}, `FENCESIM_STORE_REQUEST_TIMEOUT="2": must be a duration in 1ms..1m0s`},
		{[]string{"-data", dir, "-drain-timeout", "1h"}, nil, `-drain-timeout="1h": must be a duration in 1s..10m0s`},
		{[]string{"-data", dir}, map[string]string{"FENCESIM_STORE_LOG_FORMAT": "xml"}, `FENCESIM_STORE_LOG_FORMAT="xml": must be text or json`},
		{[]string{"-data", dir, "-bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"-data", dir, "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"-data", dir}, map[string]string{"FENCESIM_TEST_HOOKS": "yes"}, `FENCESIM_TEST_HOOKS="yes": must be 0 or 1`},
		{[]string{"-data", dir}, map[string]string{"FENCESIM_STORE_UNFENCED": "true"}, `FENCESIM_STORE_UNFENCED=true (or -unfenced) needs FENCESIM_TEST_HOOKS=1`},
		{[]string{"-data", dir, "-unfenced", "maybe"}, map[string]string{"FENCESIM_TEST_HOOKS": "1"}, `-unfenced="maybe": must be true or false`},
		// The flag wins over the variable.
		{[]string{"-data", dir, "-max-keys", "x"}, map[string]string{"FENCESIM_STORE_MAX_KEYS": "5"}, `-max-keys="x"`},
	}
	for _, c := range cases {
		var out bytes.Buffer
		code := run(context.Background(), c.args, c.env, &out, nil)
		if code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("args %q env %v: exit %d, output %q; want exit 2 and %q", c.args, c.env, code, out.String(), c.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a rejected configuration created the data directory (%v)", err)
	}
	file := t.TempDir() + "/file"
	os.WriteFile(file, nil, 0o600)
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-data", file}, nil, &out, nil); code != 2 || !strings.Contains(out.String(), "is not a directory") {
		t.Errorf("a file as data directory: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"-h"}, nil, &out, nil); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), s.Env) || !strings.Contains(out.String(), "-"+s.Flag) {
			t.Errorf("-h does not list %s / -%s", s.Env, s.Flag)
		}
	}
}

// serveIn runs the command in this process with env and returns its base
// URL and stop, which signals it (ctx ends) and returns its exit code and
// log once it has drained.
func serveIn(t *testing.T, env map[string]string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	var logs syncBuffer
	go func() { done <- run(ctx, nil, env, &logs, func(a string) { addrc <- a }) }()
	select {
	case a := <-addrc:
		base = "http://" + a
	case code := <-done:
		cancel()
		t.Fatalf("exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("never served")
	}
	return base, func() (int, string) {
		cancel()
		select {
		case code := <-done:
			return code, logs.String()
		case <-time.After(15 * time.Second):
			t.Fatal("did not drain")
			return -1, ""
		}
	}
}

// TestRunDrainsOnCancel: the command serves from the environment's
// configuration, and a signal (ctx ending) drains it to exit 0.
func TestRunDrainsOnCancel(t *testing.T) {
	base, stop := serveIn(t, map[string]string{"FENCESIM_STORE_DATA": t.TempDir(), "FENCESIM_STORE_LISTEN": "127.0.0.1:0"})
	if st, _ := put(base, "k", 3, 30); st != 200 {
		stop()
		t.Fatalf("PUT: %d", st)
	}
	code, logs := stop()
	if code != 0 {
		t.Fatalf("exit %d after the signal: %s", code, logs)
	}
	if !strings.Contains(logs, "fencesim-store drained") {
		t.Fatalf("no drain in the log: %s", logs)
	}
}

// TestUnfencedWithTestHooks: FENCESIM_TEST_HOOKS=1 and
// FENCESIM_STORE_UNFENCED=true give a store that accepts a stale write and
// logs it; the same command without them has no /test/ routes.
func TestUnfencedWithTestHooks(t *testing.T) {
	for _, hooks := range []bool{true, false} {
		env := map[string]string{"FENCESIM_STORE_DATA": t.TempDir(), "FENCESIM_STORE_LISTEN": "127.0.0.1:0"}
		if hooks {
			env["FENCESIM_TEST_HOOKS"], env["FENCESIM_STORE_UNFENCED"] = "1", "true"
		}
		base, stop := serveIn(t, env)
		put(base, "k", 9, 90)
		st, _ := put(base, "k", 4, 40)
		resp, err := httpc.Get(base + "/test/applies")
		if err != nil {
			stop()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if hooks && (st != 200 || resp.StatusCode != 200 || !strings.Contains(string(body), `"token":4,"accepted":true`)) {
			t.Errorf("unfenced store: stale write %d, /test/applies %d %s", st, resp.StatusCode, body)
		}
		if !hooks && (st != 409 || resp.StatusCode != 404) {
			t.Errorf("default store: stale write %d, /test/applies %d (want 409, 404)", st, resp.StatusCode)
		}
		if code, logs := stop(); code != 0 {
			t.Fatalf("exit %d: %s", code, logs)
		}
	}
}

// syncBuffer is a stderr that tests may read while run writes.
type syncBuffer = svcmain.SyncBuffer

var httpc = &http.Client{Timeout: 5 * time.Second}

// put writes value under token; it returns the status (0 on a transport
// error) and the JSON body.
func put(base, key string, token uint64, value int64) (int, map[string]string) {
	req, _ := http.NewRequest("PUT", base+"/v1/objects/"+key, strings.NewReader(strconv.FormatInt(value, 10)))
	req.Header.Set("Fencing-Token", strconv.FormatUint(token, 10))
	return send(req)
}

func get(base, key string) (int, map[string]string) {
	req, _ := http.NewRequest("GET", base+"/v1/objects/"+key, nil)
	return send(req)
}

func send(req *http.Request) (int, map[string]string) {
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return resp.StatusCode, out
}

// child is the command running as a process of its own.
type child struct {
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
	exit chan error
}

var addrRE = regexp.MustCompile(`msg="fencesim-store serving" addr=(\S+)`)

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := svcmain.Child(childEnv, "-data", dir, "-listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &syncBuffer{}, exit: make(chan error, 1)}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(c.logs, line)
			if m := addrRE.FindStringSubmatch(line); m != nil {
				addrc <- m[1]
			}
		}
		c.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case a := <-addrc:
		c.base = "http://" + a
	case err := <-c.exit:
		t.Fatalf("the store exited at boot (%v): %s", err, c.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the store did not start: %s", c.logs.String())
	}
	return c
}

// TestKill9KeepsAcknowledgedWrites: the store, a process of its own, is
// SIGKILLed right after acknowledged writes and while writers are still
// sending; restarted on the same directory, it has every acknowledged
// write (a key's token is the last acknowledged one or a later write's
// that was in flight, with that write's value), and the stale writer is
// still refused with the T_max it was refused with before.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	c := startChild(t, dir)

	// The fence: a newer holder (token 100) wrote; the old one (99) is stale.
	if st, _ := put(c.base, "fenced", 100, 1000); st != 200 {
		t.Fatalf("PUT token 100: %d", st)
	}
	if st, b := put(c.base, "fenced", 99, 990); st != 409 || b["t_max"] != "100" {
		t.Fatalf("stale PUT before the crash: %d %v", st, b)
	}
	// Writers on keys of their own, each token one higher, value = token*7.
	const writers = 4
	acked := make([]uint64, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	enough := make(chan struct{}, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("w%d", w)
			deadline := time.Now().Add(20 * time.Second)
			for tok := uint64(1); time.Now().Before(deadline); tok++ {
				select {
				case <-stop:
					return
				default:
				}
				st, _ := put(c.base, key, tok, int64(tok)*7)
				if st != 200 {
					return // the store is gone
				}
				acked[w] = tok
				if tok == 20 {
					enough <- struct{}{}
				}
			}
		}()
	}
	for range writers {
		select {
		case <-enough:
		case <-time.After(20 * time.Second):
			t.Fatal("writers did not get 20 writes each acknowledged")
		}
	}
	// SIGKILL with writes in flight.
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	select {
	case <-c.exit:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed store did not exit")
	}

	c = startChild(t, dir)
	for w := range writers {
		key := fmt.Sprintf("w%d", w)
		st, b := get(c.base, key)
		if st != 200 {
			t.Fatalf("GET %s after the crash: %d", key, st)
		}
		tok, _ := strconv.ParseUint(b["token"], 10, 64)
		if tok < acked[w] || tok > acked[w]+1 {
			t.Errorf("%s: token %d after the crash; acknowledged up to %d (at most one more was in flight)", key, tok, acked[w])
		}
		if b["value"] != strconv.FormatUint(tok*7, 10) || b["t_max"] != b["token"] {
			t.Errorf("%s: %v does not belong to token %d's write", key, b, tok)
		}
		// The writer's next token still works: the fence is where it was.
		if st, _ := put(c.base, key, tok+1, int64(tok+1)*7); st != 200 {
			t.Errorf("%s: the next token after the restart got %d", key, st)
		}
	}
	if st, b := put(c.base, "fenced", 99, 991); st != 409 || b["t_max"] != "100" {
		t.Fatalf("stale PUT after the crash: %d %v", st, b)
	}
	if st, b := get(c.base, "fenced"); st != 200 || b["value"] != "1000" || b["token"] != "100" {
		t.Fatalf("GET fenced after the crash: %d %v", st, b)
	}
	// And SIGTERM drains it to exit 0.
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exit:
		if err != nil {
			t.Fatalf("SIGTERM: %v: %s", err, c.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("SIGTERM did not drain the store")
	}
}
