package systems

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// NodeProcs is a three-replica fencesim-node cluster of real processes,
// the binary at Bin each with its own data directory, for the soak: a
// replica can be killed (SIGKILL) and started again on its data, and its
// disk, memory and metrics read while it runs.
type NodeProcs struct {
	Bin string
	// Env is added to each replica's environment (FENCESIM_NODE_*).
	Env []string
	// HTTP are the replicas' lock API base URLs; Dirs their data.
	HTTP, Dirs []string
	dir        string
	peers      string
	kids       []*child
	starts     []int
}

// StartNodeProcs starts the three replicas with data under dir and waits
// (at most 20s) until each is ready.
func StartNodeProcs(bin, dir string, env []string) (*NodeProcs, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	c := &NodeProcs{Bin: bin, Env: env, dir: dir, kids: make([]*child, 3), starts: make([]int, 3)}
	var peers []string
	for i := range 3 {
		raft, http := fmt.Sprintf("127.0.0.1:%d", ports[2*i]), fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		peers = append(peers, fmt.Sprintf("%d=%s=%s", i, raft, http))
		c.HTTP = append(c.HTTP, "http://"+http)
		c.Dirs = append(c.Dirs, filepath.Join(dir, fmt.Sprintf("node-%d", i)))
	}
	c.peers = strings.Join(peers, ",")
	for i := range 3 {
		if err := c.Start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range 3 {
		if err := c.WaitReady(i, 20*time.Second); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Start starts replica i (stopped or never started) on its data
// directory; it does not wait for it to be ready.
func (c *NodeProcs) Start(i int) error {
	c.starts[i]++
	k, err := startChildEnv(fmt.Sprintf("fencesim-node %d", i), filepath.Join(c.dir, fmt.Sprintf("node-%d.%d.log", i, c.starts[i])), c.Bin,
		// Loopback peers without TLS: the soak measures disk, memory and
		// restart, not the handshake (the cycle benchmark measures TLS).
		c.Env, "-id", strconv.Itoa(i), "-data", c.Dirs[i], "-peers", c.peers, "-peer-insecure", "true")
	if err != nil {
		return err
	}
	c.kids[i] = k
	return nil
}

// WaitReady polls replica i's /readyz (every 5ms, at most timeout) until
// it answers 200: it has loaded its data and knows a leader.
func (c *NodeProcs) WaitReady(i int, timeout time.Duration) error {
	cl := http.Client{Timeout: time.Second}
	end := time.Now().Add(timeout)
	for {
		resp, err := cl.Get(c.HTTP[i] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		select {
		case werr := <-c.kids[i].exited:
			c.kids[i].exited <- werr
			return fmt.Errorf("%s exited (%v): %s", c.kids[i].name, werr, c.kids[i].tail())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s not ready within %v (%v): %s", c.kids[i].name, timeout, err, c.kids[i].tail())
		}
	}
}

// Kill kills replica i with SIGKILL and reaps it.
func (c *NodeProcs) Kill(i int) {
	if c.kids[i] != nil {
		c.kids[i].stop()
		c.kids[i] = nil
	}
}

// Close kills every replica.
func (c *NodeProcs) Close() {
	for i := range c.kids {
		c.Kill(i)
	}
}

// RSS is replica i's resident memory in bytes (Linux: /proc/PID/status).
func (c *NodeProcs) RSS(i int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.kids[i].cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", c.kids[i].cmd.Process.Pid)
}

// DiskBytes is the size of the files in replica i's data directory.
func (c *NodeProcs) DiskBytes(i int) (int64, error) {
	var n int64
	err := filepath.WalkDir(c.Dirs[i], func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

// Metric reads one unlabelled gauge or counter from replica i's /metrics.
func (c *NodeProcs) Metric(i int, name string) (float64, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(c.HTTP[i] + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	prefix := []byte(name + " ")
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, prefix) {
			return strconv.ParseFloat(string(bytes.TrimSpace(line[len(prefix):])), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no metric %s", c.HTTP[i], name)
}

// BuildNode builds cmd/fencesim-node of the checkout at root into dir.
func BuildNode(root, dir string) (string, error) {
	out := filepath.Join(dir, "fencesim-node")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/fencesim-node")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fencesim-node in %s: %v: %s", root, err, msg)
	}
	return out, nil
}
