// Package etcdcluster describes an etcd-server cluster on loopback: the
// binary, each member's command line and its health check. It starts
// nothing itself: fencesim-bench (bench/systems) starts the members as
// its children, the live harness (live) under its supervisor, so that
// both run the same members (same flags, same readiness test) without a
// copy of either.
package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Member is one etcd-server process of a cluster.
type Member struct {
	Name      string // m0, m1, …: the member's name in the cluster
	ClientURL string // where it serves clients (http://127.0.0.1:port)
	PeerURL   string // where it listens for its peers
	DataDir   string
	Args      []string // its command line after the binary
}

// Options are the cluster's settings; the zero value is etcd's defaults.
type Options struct {
	// Token is the cluster token (etcd refuses peers of another token).
	Token string
	// HeartbeatInterval and ElectionTimeout are etcd's Raft timings
	// (0: etcd's 100ms and 1s). etcd's shortest lease TTL is 1.5 election
	// timeouts rounded up to a second, so an election timeout of at most
	// 666ms lets a lease of 1s stay 1s.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// AdvertisePeer, if set, maps member i to the peer URL the others
	// reach it at (a proxy in front of PeerURL); nil: PeerURL itself.
	AdvertisePeer func(i int) string
}

// Binary finds etcd on PATH (Debian's etcd-server package installs it).
func Binary() (string, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcd not installed (apt-get install etcd-server): %w", err)
	}
	return bin, nil
}

// Version is the first line of `etcd --version` without its label
// ("3.4.30"), or "" if the binary does not say.
func Version(bin string) string {
	out, _ := exec.Command(bin, "--version").Output()
	return strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: ")
}

// Plan returns the members of a new cluster with one member per entry of
// clientPorts (peerPorts alike), member i's data in dataDir(i).
func Plan(dataDir func(i int) string, clientPorts, peerPorts []int, opt Options) ([]Member, error) {
	if len(clientPorts) == 0 || len(clientPorts) != len(peerPorts) {
		return nil, fmt.Errorf("etcdcluster: %d client ports for %d peer ports: give one of each per member", len(clientPorts), len(peerPorts))
	}
	url := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	advertise := opt.AdvertisePeer
	if advertise == nil {
		advertise = func(i int) string { return url(peerPorts[i]) }
	}
	var initial []string
	for i := range clientPorts {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, advertise(i)))
	}
	token := opt.Token
	if token == "" {
		token = "fencesim"
	}
	members := make([]Member, len(clientPorts))
	for i := range members {
		m := Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: url(clientPorts[i]),
			PeerURL:   url(peerPorts[i]),
			DataDir:   dataDir(i),
		}
		m.Args = []string{"--name", m.Name, "--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", advertise(i),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token}
		if opt.HeartbeatInterval > 0 {
			m.Args = append(m.Args, "--heartbeat-interval", strconv.FormatInt(opt.HeartbeatInterval.Milliseconds(), 10))
		}
		if opt.ElectionTimeout > 0 {
			m.Args = append(m.Args, "--election-timeout", strconv.FormatInt(opt.ElectionTimeout.Milliseconds(), 10))
		}
		members[i] = m
	}
	return members, nil
}

// Healthy asks a member's /health endpoint: nil once the member reports
// healthy (it has a leader), the reason otherwise.
func Healthy(ctx context.Context, hc *http.Client, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct{ Health string }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Health != "true" {
		return fmt.Errorf("health %q (%v)", h.Health, err)
	}
	return nil
}
