package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencesim/fencesim/internal/peertls"
	"github.com/fencesim/fencesim/internal/svcmain"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/lockservice/reference"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/process"
)

// config is the command's configuration, read at boot from flags, then the
// environment, then the defaults, each value validated.
type config struct {
	DevCluster     int
	ID             process.NodeID
	DataDir        string
	Listen         string // HTTP
	PeerListen     string // Raft; default: this node's entry in Peers
	Peers          []nodesvc.Peer
	RequestTimeout time.Duration
	DrainDelay     time.Duration
	DrainTimeout   time.Duration
	Admission      string // lockapi.LimiterConfig.Algorithm
	// ElectionTimeout is nodesvc.Config.ElectionTimeout.
	ElectionTimeout time.Duration
	// HandoverTimeout bounds the leadership transfer on SIGTERM.
	HandoverTimeout time.Duration
	LogFormat       string
	// TokenOffset starts the group's tokens above it (nodesvc.Config).
	TokenOffset uint64
	// Snapshot is when the replica snapshots its lock table and drops the
	// log it covers (nodesvc.Snapshot).
	Snapshot nodesvc.Snapshot
	// SyncWrites: -sync-writes (nodesvc.Config.SyncWrites).
	SyncWrites bool
	TestHooks  bool
	TokenKey   []byte // the fencing key shared with the store (lockapi.Config)
	// PeerFiles authenticate the replicas to each other (mutual TLS);
	// PeerInsecure runs without, on loopback peers only.
	PeerFiles    peertls.Files
	PeerInsecure bool
	// API is the client API's TLS and client identities.
	API svcmain.APIAuth
}

// settings are the command's flags and variables.
var settings = append(baseSettings, svcmain.ClientAuth("FENCESIM_NODE_", func(c *config) *svcmain.APIAuth { return &c.API })...)

var baseSettings = []svcmain.Setting[config]{
	svcmain.S("dev-cluster", "FENCESIM_NODE_DEV_CLUSTER", "0", "run a local cluster of this many replicas (3 or 5) in this process on free loopback ports, with temporary data (or -data/node-<id>); 0: run one node", func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n != 0 && n != 3 && n != 5 {
			return errors.New("must be 0, 3 or 5")
		}
		c.DevCluster = n
		return nil
	}),
	svcmain.S("id", "FENCESIM_NODE_ID", "", "this replica's id, one of the ids in -peers (required unless -dev-cluster)", func(c *config, v string) error {
		if v == "" {
			c.ID = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxID {
			return fmt.Errorf("must be an integer in 0..%d", maxID)
		}
		c.ID = process.NodeID(n)
		return nil
	}),
	svcmain.S("data", "FENCESIM_NODE_DATA", "", "data directory (required unless -dev-cluster; created if missing): Raft term, vote and log, fsynced; one process at a time", func(c *config, v string) error {
		if fi, err := os.Stat(v); v != "" && err == nil && !fi.IsDir() {
			return errors.New("exists and is not a directory")
		}
		c.DataDir = v
		return nil
	}),
	svcmain.S("listen", "FENCESIM_NODE_LISTEN", "", "HTTP listen address of the lock API, host:port (default: the host:port of this node's HTTP address in -peers)", func(c *config, v string) error {
		if v != "" {
			if err := checkHostPort(v); err != nil {
				return err
			}
		}
		c.Listen = v
		return nil
	}),
	svcmain.S("peer-listen", "FENCESIM_NODE_PEER_LISTEN", "", "Raft listen address, host:port (default: this node's Raft address in -peers)", func(c *config, v string) error {
		if v != "" {
			if err := checkHostPort(v); err != nil {
				return err
			}
		}
		c.PeerListen = v
		return nil
	}),
	svcmain.S("peers", "FENCESIM_NODE_PEERS", "", "every replica, this one included (3 or 5), as id=raft-host:port=http-host:port,... e.g. 0=127.0.0.1:7000=127.0.0.1:8080,1=...", func(c *config, v string) error {
		if v == "" {
			c.Peers = nil
			return nil
		}
		ps, err := parsePeers(v)
		c.Peers = ps
		return err
	}),
	svcmain.S("request-timeout", "FENCESIM_NODE_REQUEST_TIMEOUT", "2s", "longest wait for the replica's answer; past it 503 (the outcome is unknown: retry with the same request id) (10ms..1m)", svcmain.DurIn(10*time.Millisecond, time.Minute, func(c *config, d time.Duration) { c.RequestTimeout = d })),
	svcmain.S("drain-delay", "FENCESIM_NODE_DRAIN_DELAY", "0s", "on SIGTERM, how long to answer 503 before closing the listener (0..1m)", svcmain.DurIn(0, time.Minute, func(c *config, d time.Duration) { c.DrainDelay = d })),
	svcmain.S("drain-timeout", "FENCESIM_NODE_DRAIN_TIMEOUT", "10s", "on SIGTERM, the deadline for in-flight requests (1s..10m)", svcmain.DurIn(time.Second, 10*time.Minute, func(c *config, d time.Duration) { c.DrainTimeout = d })),
	svcmain.S("admission", "FENCESIM_NODE_ADMISSION", "gradient", "how the API's concurrency limit (64..256 requests in flight, over it 429 at once) adapts: gradient (to the ratio of long- to short-term latency), aimd (shrinks past 50ms) or static (256)", func(c *config, v string) error {
		if !slices.Contains(lockapi.Algorithms, v) {
			return errors.New("must be one of " + strings.Join(lockapi.Algorithms, ", "))
		}
		c.Admission = v
		return nil
	}),
	svcmain.S("election-timeout", "FENCESIM_NODE_ELECTION_TIMEOUT", "1s", "how long a follower waits to hear from the leader before it campaigns (50ms..10s; every replica alike): a leader crash is noticed after it, and a CPU-saturated leader keeps its term as long as its heartbeats arrive within it", svcmain.DurIn(50*time.Millisecond, 10*time.Second, func(c *config, d time.Duration) { c.ElectionTimeout = d })),
	svcmain.S("handover-timeout", "FENCESIM_NODE_HANDOVER_TIMEOUT", "2s", "on SIGTERM, how long a leader waits for a follower to take over before it drains anyway (the others then elect one after their election timeout) (0..1m; 0: no hand-over)", svcmain.DurIn(0, time.Minute, func(c *config, d time.Duration) { c.HandoverTimeout = d })),
	svcmain.S("token-offset", tokenOffsetVar, "0", "start the group's fencing tokens above this number (token = log index + offset), e.g. past the tokens an older lock service gave the same fenced resources; only for a brand-new data directory: a node whose data was created with another offset refuses to start (0..2^64−2^40)", func(c *config, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > nodesvc.MaxTokenOffset {
			return fmt.Errorf("must be an integer in 0..%d", uint64(nodesvc.MaxTokenOffset))
		}
		c.TokenOffset = n
		return nil
	}),
	svcmain.S("snapshot-entries", "FENCESIM_NODE_SNAPSHOT_ENTRIES", strconv.Itoa(reference.DefaultSnapshotEntries), "snapshot the lock table and drop the Raft log it covers after this many entries; a restart replays at most about this many (0: only by -snapshot-bytes; 0..100000000)", uintIn(0, 100_000_000, func(c *config, n uint64) { c.Snapshot.Entries = n })),
	svcmain.S("snapshot-bytes", "FENCESIM_NODE_SNAPSHOT_BYTES", strconv.Itoa(reference.DefaultSnapshotBytes), "snapshot after this many bytes of commands, whichever comes first (0: only by -snapshot-entries; 0..1073741824)", uintIn(0, 1<<30, func(c *config, n uint64) { c.Snapshot.Bytes = n })),
	svcmain.S("snapshot-keep", "FENCESIM_NODE_SNAPSHOT_KEEP", strconv.Itoa(reference.DefaultSnapshotKeep), "entries before a snapshot kept in memory, so that a follower that far behind catches up by appends, not the whole snapshot (0..10000000)", uintIn(0, 10_000_000, func(c *config, n uint64) { c.Snapshot.Keep = n })),
	svcmain.S("log-format", "FENCESIM_NODE_LOG_FORMAT", "text", "log format on stderr: text or json", func(c *config, v string) error {
		if v != "text" && v != "json" {
			return errors.New("must be text or json")
		}
		c.LogFormat = v
		return nil
	}),
	svcmain.S("peer-ca-file", "FENCESIM_NODE_PEER_CA_FILE", "", "PEM file of the CA that signs every replica's peer certificate (mutual TLS between replicas; with -peer-cert-file and -peer-key-file; reloaded on SIGHUP or when a file changes)", func(c *config, v string) error {
		c.PeerFiles.CA = v
		return nil
	}),
	svcmain.S("peer-cert-file", "FENCESIM_NODE_PEER_CERT_FILE", "", "PEM file of this replica's peer certificate, signed by the CA, with the DNS name fencesim-node-<id>", func(c *config, v string) error {
		c.PeerFiles.Cert = v
		return nil
	}),
	svcmain.S("peer-key-file", "FENCESIM_NODE_PEER_KEY_FILE", "", "PEM file of this replica's peer certificate's private key", func(c *config, v string) error {
		c.PeerFiles.Key = v
		return nil
	}),
	svcmain.S("peer-insecure", "FENCESIM_NODE_PEER_INSECURE", "false", "true: replicas talk without TLS and trust whoever reaches the Raft port; only with loopback Raft addresses (a -dev-cluster without certificates)", svcmain.Bool(func(c *config, b bool) { c.PeerInsecure = b })),
	svcmain.S("sync-writes", "FENCESIM_NODE_SYNC_WRITES", "false", "true: the replica fsyncs each batch of Raft writes before it handles anything else (fencesim-0.19's way, for comparison); false: fsyncs run in the background while it goes on stepping, and only what depends on them (votes, acknowledgements, applying) waits", svcmain.Bool(func(c *config, b bool) { c.SyncWrites = b })),
	svcmain.TestHooks(func(c *config, on bool) { c.TestHooks = on }),
	svcmain.TokenKeyFile("FENCESIM_NODE_TOKEN_KEY_FILE", "with it every grant carries a MAC of its token (token_mac) that fencesim-store checks", func(c *config, k []byte) { c.TokenKey = k }),
}

// uintIn parses an integer in lo..hi and hands it to set.
func uintIn(lo, hi uint64, set func(*config, uint64)) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in %d..%d", lo, hi)
		}
		set(c, n)
		return nil
	}
}

// maxID keeps ids clear of the front end's own id in nodesvc.
const maxID = 1<<20 - 1

func checkHostPort(v string) error {
	return svcmain.CheckHostPort(v, "127.0.0.1:8080 or :8080")
}

// parsePeers reads id=raft=http entries; the HTTP address may be a URL
// ("http://host:port") or host:port.
func parsePeers(v string) ([]nodesvc.Peer, error) {
	var ps []nodesvc.Peer
	seen := map[process.NodeID]bool{}
	addrs := map[string]bool{}
	for _, e := range strings.Split(v, ",") {
		f := strings.Split(strings.TrimSpace(e), "=")
		if len(f) != 3 {
			return nil, fmt.Errorf("entry %q must be id=raft-host:port=http-host:port", e)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || id < 0 || id > maxID {
			return nil, fmt.Errorf("entry %q: the id must be an integer in 0..%d", e, maxID)
		}
		if seen[process.NodeID(id)] {
			return nil, fmt.Errorf("id %d appears twice", id)
		}
		seen[process.NodeID(id)] = true
		if err := checkHostPort(f[1]); err != nil {
			return nil, fmt.Errorf("entry %q: the Raft address %v", e, err)
		}
		h := strings.TrimPrefix(strings.TrimPrefix(f[2], "https://"), "http://")
		if err := checkHostPort(h); err != nil {
			return nil, fmt.Errorf("entry %q: the HTTP address %v", e, err)
		}
		if _, port, _ := net.SplitHostPort(f[1]); port == "0" {
			return nil, fmt.Errorf("entry %q: peers need fixed ports, not 0", e)
		}
		for _, a := range []struct{ what, addr string }{{"Raft", f[1]}, {"HTTP", h}} {
			if addrs[a.addr] {
				return nil, fmt.Errorf("the %s address %s appears twice: every replica needs addresses of its own", a.what, a.addr)
			}
			addrs[a.addr] = true
		}
		ps = append(ps, nodesvc.Peer{ID: process.NodeID(id), Raft: f[1], HTTP: "http://" + h})
	}
	if len(ps) != 3 && len(ps) != 5 {
		return nil, fmt.Errorf("has %d replicas; a group has 3 or 5", len(ps))
	}
	return ps, nil
}

// loadConfig reads every setting from args (flags), else env, else its
// default, and validates each and then the whole. The error names the flag
// or variable, the value and what is allowed.
func loadConfig(args []string, env map[string]string, stderr io.Writer) (config, error) {
	c, err := svcmain.Load("fencesim-node", settings, args, env, stderr, usage)
	if err != nil {
		return config{}, err
	}
	if c.DevCluster > 0 {
		if c.ID >= 0 || c.Peers != nil || c.PeerListen != "" || c.Listen != "" {
			return config{}, errors.New("-dev-cluster (FENCESIM_NODE_DEV_CLUSTER) picks its own ids and ports: leave -id, -peers, -listen and -peer-listen unset")
		}
	} else {
		switch {
		case c.ID < 0:
			return config{}, errors.New("FENCESIM_NODE_ID (or -id) is required: this replica's id in -peers (or run a local cluster with -dev-cluster 3)")
		case c.DataDir == "":
			return config{}, errors.New("FENCESIM_NODE_DATA (or -data) is required: the directory of the Raft log, e.g. /var/lib/fencesim-node")
		case c.Peers == nil:
			return config{}, errors.New("FENCESIM_NODE_PEERS (or -peers) is required: every replica as id=raft-host:port=http-host:port,...")
		}
		var self *nodesvc.Peer
		for i := range c.Peers {
			if c.Peers[i].ID == c.ID {
				self = &c.Peers[i]
			}
		}
		if self == nil {
			return config{}, fmt.Errorf("FENCESIM_NODE_ID (or -id) %d is not one of the ids in FENCESIM_NODE_PEERS (or -peers)", c.ID)
		}
		if c.PeerListen == "" {
			c.PeerListen = self.Raft
		}
		if c.Listen == "" {
			c.Listen = strings.TrimPrefix(self.HTTP, "http://")
		}
	}
	if c.Snapshot.Entries == 0 && c.Snapshot.Bytes == 0 {
		return config{}, errors.New("FENCESIM_NODE_SNAPSHOT_ENTRIES (or -snapshot-entries) and FENCESIM_NODE_SNAPSHOT_BYTES (or -snapshot-bytes) are both 0: the Raft log would grow for ever; set at least one")
	}
	if err := c.checkPeerAuth(); err != nil {
		return config{}, err
	}
	if err := c.API.Check("FENCESIM_NODE_"); err != nil {
		return config{}, err
	}
	for i := range c.Peers { // redirects to the leader keep the API's scheme
		c.Peers[i].HTTP = c.apiScheme() + strings.TrimPrefix(c.Peers[i].HTTP, "http://")
	}
	// Created only once everything is valid: a rejected configuration
	// leaves nothing behind.
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return config{}, fmt.Errorf("the data directory (FENCESIM_NODE_DATA or -data) %q cannot be created: %v", c.DataDir, err)
		}
	}
	return c, nil
}

// apiScheme is the API's URL scheme with "://".
func (c config) apiScheme() string {
	if c.API.CertFile != "" {
		return "https://"
	}
	return "http://"
}

// checkPeerAuth: the replicas authenticate each other (all three files),
// or the configuration says explicitly that they do not, on loopback only.
// A dev cluster makes its own certificates unless told insecure.
func (c config) checkPeerAuth() error {
	f := c.PeerFiles
	set := 0
	for _, v := range []string{f.CA, f.Cert, f.Key} {
		if v != "" {
			set++
		}
	}
	switch {
	case set > 0 && set < 3:
		return errors.New("FENCESIM_NODE_PEER_CA_FILE, FENCESIM_NODE_PEER_CERT_FILE and FENCESIM_NODE_PEER_KEY_FILE (-peer-ca-file, -peer-cert-file, -peer-key-file) go together: set all three")
	case set == 3 && c.PeerInsecure:
		return errors.New("FENCESIM_NODE_PEER_INSECURE=true (-peer-insecure) contradicts the peer certificate files: drop one")
	case set == 3:
		if _, err := peertls.Load(f); err != nil {
			return fmt.Errorf("peer TLS (FENCESIM_NODE_PEER_*_FILE): %v", err)
		}
		return nil
	case c.DevCluster > 0:
		return nil
	case !c.PeerInsecure:
		return errors.New("the replicas must authenticate each other: set FENCESIM_NODE_PEER_CA_FILE, FENCESIM_NODE_PEER_CERT_FILE and FENCESIM_NODE_PEER_KEY_FILE (mutual TLS; see the README's Security section), or FENCESIM_NODE_PEER_INSECURE=true (-peer-insecure) for loopback peers without TLS")
	}
	addrs := []string{c.PeerListen}
	for _, p := range c.Peers {
		addrs = append(addrs, p.Raft)
	}
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("FENCESIM_NODE_PEER_INSECURE=true (-peer-insecure) binds loopback only, but the Raft address %q is not a loopback address: give the replicas certificates (FENCESIM_NODE_PEER_*_FILE)", a)
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `fencesim-node: one replica of the reference lock service (Raft + lock table)
with the HTTP lock API; fencing tokens are Raft log indexes.

  POST /v1/locks/{resource}/acquire  {"client","ttl_ms","request_id"} → 200 {"token","ttl_ms"}, 409 held
  POST /v1/locks/{resource}/renew    {"client","ttl_ms","token"}
  POST /v1/locks/{resource}/release  {"client","token"}
  GET  /v1/locks/{resource}          GET /healthz /readyz /metrics
  A follower answers 307 to the leader; 429/503 carry Retry-After.

  A local cluster in one command:  fencesim-node -dev-cluster 3

Each setting is a flag or an environment variable (the flag wins):

`)
	svcmain.Usage(w, settings, 30)
	fmt.Fprintf(w, "\nSIGTERM or SIGINT drains: /readyz turns 503, in-flight requests finish, then the replica stops.\nExit codes: 0 drained, 1 failure, 2 bad configuration.\n")
}

// tokenOffsetVar names the token offset's variable in errors about it.
const tokenOffsetVar = "FENCESIM_NODE_TOKEN_OFFSET"
