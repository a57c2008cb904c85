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
	"github.com/fencesim/fencesim/internal/etcdcluster"
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
	bin, err := etcdcluster.Binary()
	if err != nil {
		return nil, err
	}
	e := &Etcd{Version: etcdcluster.Version(bin)}
	const size = 3
	ports, err := freePorts(2 * size)
	if err != nil {
		return nil, err
	}
	plan, err := etcdcluster.Plan(func(i int) string { return filepath.Join(dir, fmt.Sprintf("etcd-%d", i)) }, ports[:size], ports[size:], etcdcluster.Options{Token: "fencesim-bench"})
	if err != nil {
		return nil, err
	}
	for i, m := range plan {
		e.Endpoints = append(e.Endpoints, m.ClientURL)
		if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
			e.Close()
			return nil, err
		}
		c, err := startChild("etcd member "+m.Name, filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)), bin, m.Args...)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.members = append(e.members, c)
	}
	hc := &http.Client{Timeout: time.Second}
	for i, m := range e.members {
		err := m.waitUp(20*time.Second, func() error {
			return etcdcluster.Healthy(context.Background(), hc, e.Endpoints[i])
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
