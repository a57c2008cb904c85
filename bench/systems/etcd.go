package systems

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
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/bench"
)

// Etcd is a three-member etcd-server cluster of child processes on
// loopback, each with its own data directory, fsync on (etcd's default).
type Etcd struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	Version   string
	members   []*child
}

// StartEtcd starts the cluster (etcd on PATH, e.g. Debian's etcd-server)
// with data under dir and waits (at most 20s) until every member reports
// healthy.
func StartEtcd(dir string) (*Etcd, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd not installed (apt-get install etcd-server): %w", err)
	}
	out, _ := exec.Command(bin, "--version").Output()
	e := &Etcd{Version: strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: ")}
	const size = 3
	ports, err := freePorts(2 * size)
	if err != nil {
		return nil, err
	}
	peer := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]) }
	var initial []string
	for i := range size {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peer(i)))
		e.Endpoints = append(e.Endpoints, "http://127.0.0.1:"+strconv.Itoa(ports[2*i]))
	}
	for i := range size {
		data, err := mkdir(dir, fmt.Sprintf("etcd-%d", i))
		if err != nil {
			e.Close()
			return nil, err
		}
		c, err := startChild(fmt.Sprintf("etcd member m%d", i), filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)), bin,
			"--name", fmt.Sprintf("m%d", i), "--data-dir", data,
			"--listen-client-urls", e.Endpoints[i], "--advertise-client-urls", e.Endpoints[i],
			"--listen-peer-urls", peer(i), "--initial-advertise-peer-urls", peer(i),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "fencesim-bench")
		if err != nil {
			e.Close()
			return nil, err
		}
		e.members = append(e.members, c)
	}
	hc := &http.Client{Timeout: time.Second}
	for i, m := range e.members {
		err := m.waitUp(20*time.Second, func() error {
			resp, err := hc.Get(e.Endpoints[i] + "/health")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var h struct{ Health string }
			if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Health != "true" {
				return fmt.Errorf("health %q (%v)", h.Health, err)
			}
			return nil
		})
		if err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// Close kills every member.
func (e *Etcd) Close() {
	for _, m := range e.members {
		m.stop()
	}
	e.members = nil
}

// BuildEtcdDriver builds the etcd driver (module bench/etcd of the
// checkout at root) into dir and returns the binary's path. The build
// needs the Go toolchain and, the first time, the module proxy for the
// etcd client.
func BuildEtcdDriver(root, dir string) (string, error) {
	out := filepath.Join(dir, "fencesim-bench-etcd")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(root, "bench", "etcd")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the etcd driver in %s: %v: %s", cmd.Dir, err, msg)
	}
	return out, nil
}

// RunEtcdDriver runs the driver binary over e for the given cells and
// returns its results, in the driver's order. Each result line is passed
// to progress as it arrives (nil: none).
func RunEtcdDriver(ctx context.Context, driver string, e *Etcd, modes []string, workers []int, warmup, duration time.Duration, progress func(bench.Result)) ([]bench.Result, error) {
	var ws []string
	for _, w := range workers {
		ws = append(ws, strconv.Itoa(w))
	}
	cmd := exec.CommandContext(ctx, driver, "-endpoints", strings.Join(e.Endpoints, ","),
		"-modes", strings.Join(modes, ","), "-workers", strings.Join(ws, ","),
		"-warmup", warmup.String(), "-duration", duration.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var results []bench.Result
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var r bench.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			cmd.Process.Kill()
			io.Copy(io.Discard, stdout)
			cmd.Wait()
			return results, fmt.Errorf("etcd driver printed %q: %w", sc.Text(), err)
		}
		results = append(results, r)
		if progress != nil {
			progress(r)
		}
	}
	if err := cmd.Wait(); err != nil {
		return results, fmt.Errorf("etcd driver: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return results, nil
}

// ModuleRoot finds the fencesim checkout around the working directory
// (go env GOMOD), where the etcd driver's sources are.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the fencesim checkout: run from it, or pass -etcd-driver")
	}
	root := filepath.Dir(mod)
	if _, err := os.Stat(filepath.Join(root, "bench", "etcd", "go.mod")); err != nil {
		return "", fmt.Errorf("%s has no bench/etcd module: run from the fencesim checkout, or pass -etcd-driver", root)
	}
	return root, nil
}
